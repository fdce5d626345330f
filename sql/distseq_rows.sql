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

-- the backing sequence is what CREATE SEQUENCE run by the bootstrap
-- superuser and ALTER SEQUENCE ... OWNER TO the creator made: the bootstrap
-- superuser's default privileges in schema distseq apply (handed to the
-- owner), the creator's own do not; the owner's dependency is recorded
CREATE ROLE regress_rows_maker;
GRANT EXECUTE ON FUNCTION distseq_create TO regress_rows_maker;
ALTER DEFAULT PRIVILEGES IN SCHEMA distseq GRANT SELECT ON SEQUENCES TO PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE regress_rows_maker
	GRANT UPDATE ON SEQUENCES TO PUBLIC;
SET ROLE regress_rows_maker;
SELECT distseq_create('rows_f');
RESET ROLE;
SELECT relowner::regrole, relacl FROM pg_class
WHERE oid = 'distseq.rows_f'::regclass;
SELECT refclassid::regclass, refobjid::regnamespace, deptype FROM pg_depend
WHERE classid = 'pg_class'::regclass AND objid = 'distseq.rows_f'::regclass;
SELECT refobjid::regrole, deptype FROM pg_shdepend
WHERE classid = 'pg_class'::regclass AND objid = 'distseq.rows_f'::regclass
ORDER BY 2;
SELECT distseq_drop('rows_f');
ALTER DEFAULT PRIVILEGES IN SCHEMA distseq REVOKE SELECT ON SEQUENCES FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE regress_rows_maker
	REVOKE UPDATE ON SEQUENCES FROM PUBLIC;
REVOKE EXECUTE ON FUNCTION distseq_create FROM regress_rows_maker;
DROP ROLE regress_rows_maker;

-- a creation rolled back to a savepoint, one dropped and made again in
-- the same transaction, one whose transaction drew values and rolled
-- back, one refused for a name in schema distseq: each name can be
-- created again, no lock is left behind, and the indexes are whole
BEGIN;
SAVEPOINT s;
SELECT distseq_create('rows_g');
ROLLBACK TO SAVEPOINT s;
SELECT distseq_create('rows_g');
SELECT distseq_nextval('rows_g');
SELECT distseq_drop('rows_g');
SELECT distseq_create('rows_g', start_value => 100);
SELECT distseq_nextval('rows_g');
COMMIT;
BEGIN;
SELECT distseq_create('rows_h');
SELECT distseq_nextval('rows_h');
ROLLBACK;
SELECT distseq_create('rows_h');
SELECT distseq_nextval('rows_h');
SELECT distseq_create('distseq_windows_open');
SELECT locktype, relation::regclass FROM pg_locks
WHERE pid = pg_backend_pid() AND relation <> 'pg_locks'::regclass;
SELECT c.relname, bt_index_check(c.oid, heapallindexed => true)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid IN ('distseq.distseq_sequences'::regclass,
					 'distseq.distseq_windows'::regclass)
ORDER BY 1;
SELECT sequence_name, start_value FROM distseq.distseq_sequences
WHERE sequence_name IN ('rows_g', 'rows_h') ORDER BY 1;
SELECT distseq_drop('rows_g');
SELECT distseq_drop('rows_h');

-- a peer's definition holds the CHECK constraints that the row's insert
-- does not run: refused before anything is made
SELECT distseq.distseq_peer_create('rows_p', 10, 100, 100, 5, 1, 0);
SELECT distseq.distseq_peer_create('rows_p', 10, 100, 1, 9223372036854775807, 1, 0);
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 'rows_p';
SELECT to_regclass('distseq.rows_p');

SELECT distseq_drop('rows_a');
SELECT distseq_drop('rows_b');
SELECT distseq_drop('rows_e');
