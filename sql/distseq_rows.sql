--
-- A creation puts the sequence's catalog row and first windows in without
-- the executor (src/rows.c), and makes its backing sequence without SQL:
-- every index gets the entries an INSERT would give it, columns the
-- creation does not set get their defaults, and no DDL event is raised.
--
CREATE EXTENSION IF NOT EXISTS distseq;
CREATE EXTENSION IF NOT EXISTS amcheck;

SELECT distseq_create('rows_a');
SELECT distseq_create('rows_b', window_size => 10, min_open_windows => 3,
					  stripes => 2, stripe => 1);
-- some closed windows too, which the partial index must not find
SELECT count(distseq_nextval('rows_b')) FROM generate_series(1, 25);

-- each heap row has its entry in every index (the partial one for open
-- windows only), and each index is well formed
SELECT c.relname, bt_index_check(c.oid, heapallindexed => true)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid IN ('distseq.distseq_sequences'::regclass,
					 'distseq.distseq_windows'::regclass)
ORDER BY 1;

-- the partial index finds the open windows and only those
SET enable_seqscan = off;
SET enable_bitmapscan = off;
EXPLAIN (COSTS OFF)
SELECT window_start FROM distseq.distseq_windows
WHERE sequence_name = 'rows_b' AND next_hi < window_end;
SELECT window_start, window_end FROM distseq.distseq_windows
WHERE sequence_name = 'rows_b' AND next_hi < window_end ORDER BY 1;
RESET enable_seqscan;
RESET enable_bitmapscan;
SELECT count(*) AS open_windows FROM distseq.distseq_windows
WHERE sequence_name = 'rows_b' AND next_hi < window_end;

-- the row as an INSERT naming the same columns gives it
SELECT seqrel, block_size, window_size, min_open_windows, start_value,
	   max_value, values_reserved, values_released, values_issued,
	   values_lost, stripes, stripe, hwm, servers, server_nodes,
	   origin_relation = seqrel::oid AS origin_here
FROM distseq.distseq_sequences WHERE sequence_name = 'rows_a';
SELECT c.relname, c.relowner::regrole, c.relacl
FROM pg_class c WHERE c.oid = 'distseq.rows_a'::regclass;

-- a column this creation does not know gets its default; one with none
-- that must not be null fails the creation, and nothing is left of it
BEGIN;
ALTER TABLE distseq.distseq_sequences ADD COLUMN extra integer DEFAULT 42;
SELECT distseq_create('rows_c');
SELECT extra FROM distseq.distseq_sequences WHERE sequence_name = 'rows_c';
ROLLBACK;
BEGIN;
ALTER TABLE distseq.distseq_sequences ADD COLUMN extra integer NOT NULL DEFAULT 0;
ALTER TABLE distseq.distseq_sequences ALTER COLUMN extra DROP DEFAULT;
SELECT distseq_create('rows_d');
ROLLBACK;
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name IN ('rows_c', 'rows_d');
SELECT to_regclass('distseq.rows_c'), to_regclass('distseq.rows_d');

-- a name whose row is there is refused before anything is made
SELECT distseq_create('rows_a');

-- the backing sequence is distseq's own, as the catalog rows are: an event
-- trigger (a DDL replicator, say) sees no CREATE or ALTER SEQUENCE for it
CREATE FUNCTION rows_ddl() RETURNS event_trigger LANGUAGE plpgsql
AS $$ BEGIN RAISE NOTICE 'ddl_command_end: %', tg_tag; END $$;
CREATE EVENT TRIGGER rows_ddl ON ddl_command_end EXECUTE FUNCTION rows_ddl();
SELECT distseq_create('rows_e');
DROP EVENT TRIGGER rows_ddl;
DROP FUNCTION rows_ddl();

SELECT distseq_drop('rows_a');
SELECT distseq_drop('rows_b');
SELECT distseq_drop('rows_e');
