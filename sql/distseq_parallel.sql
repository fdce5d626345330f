--
-- distseq_nextval is PARALLEL UNSAFE, so a query that calls it is never
-- run in parallel; but a function that calls it may be labelled PARALLEL
-- SAFE by mistake.  Native nextval() refuses to run during a parallel
-- operation; so must distseq_nextval: a parallel worker would draw from a
-- block of its own, and the session would see its values go down and
-- currval not follow them.  Whether the leader or a worker runs the call,
-- the error is the same (VERBOSITY terse hides the worker's context).
--
CREATE EXTENSION IF NOT EXISTS distseq;
SELECT distseq_create('par_seq', block_size => 10);
CREATE SEQUENCE par_native;

CREATE FUNCTION par_draw() RETURNS bigint
LANGUAGE plpgsql PARALLEL SAFE
AS $$ BEGIN RETURN distseq_nextval('par_seq'); END $$;
CREATE FUNCTION par_native_draw() RETURNS bigint
LANGUAGE plpgsql PARALLEL SAFE
AS $$ BEGIN RETURN nextval('par_native'); END $$;

CREATE TABLE par_rows AS SELECT g FROM generate_series(1, 1000) g;
ANALYZE par_rows;

SELECT distseq_nextval('par_seq') AS first \gset

SET max_parallel_workers_per_gather = 2;
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET parallel_leader_participation = off;
EXPLAIN (COSTS OFF) SELECT par_draw() FROM par_rows WHERE g < 5;

\set VERBOSITY terse
SELECT par_native_draw() FROM par_rows WHERE g < 5;
SELECT par_draw() FROM par_rows WHERE g < 5;
\set VERBOSITY default
RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET parallel_leader_participation;

-- nothing was drawn meanwhile: currval is the last value, and the next
-- one follows it
SELECT distseq_currval('par_seq') = :first AS currval_kept;
SELECT distseq_nextval('par_seq') = :first + 1 AS next_follows;

DROP TABLE par_rows;
DROP FUNCTION par_draw(), par_native_draw();
DROP SEQUENCE par_native;
SELECT distseq_drop('par_seq');
