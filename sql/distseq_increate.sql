--
-- A sequence used in the transaction that created it (src/increate.c):
-- values come from a counter of the creating backend, recorded in the
-- catalog as reserved when the transaction commits or prepares, so that
-- the refill worker continues above them; a rollback leaves nothing.
--
CREATE EXTENSION IF NOT EXISTS distseq;

-- create, draw and commit in one transaction
BEGIN;
SELECT distseq_create('inc_a');
SELECT distseq_nextval('inc_a'), distseq_nextval('inc_a'), distseq_nextval('inc_a');
SELECT distseq_currval('inc_a'), distseq_lastval();
COMMIT;
-- the first block (100 slots) was recorded as reserved and issued
SELECT window_start, window_end, next_hi FROM distseq.distseq_windows
WHERE sequence_name = 'inc_a' ORDER BY window_start;
SELECT values_reserved, values_issued, hwm FROM distseq.distseq_sequences
WHERE sequence_name = 'inc_a';
-- after commit the worker's first refill starts above every value drawn
SELECT distseq_nextval('inc_a');
SELECT distseq_currval('inc_a');

-- ROLLBACK TO SAVEPOINT does not make a value come again
BEGIN;
SELECT distseq_create('inc_sp', block_size => 2);
SAVEPOINT s1;
SELECT distseq_nextval('inc_sp');
SELECT distseq_nextval('inc_sp');
SELECT distseq_nextval('inc_sp');
ROLLBACK TO SAVEPOINT s1;
SELECT distseq_nextval('inc_sp');
SAVEPOINT s2;
SELECT distseq_nextval('inc_sp');
RELEASE SAVEPOINT s2;
SELECT distseq_currval('inc_sp');
COMMIT;
SELECT window_start, next_hi FROM distseq.distseq_windows
WHERE sequence_name = 'inc_sp' ORDER BY window_start;
SELECT distseq_nextval('inc_sp');

-- a rolled-back creation leaves nothing behind
BEGIN;
SELECT distseq_create('inc_rb');
SELECT distseq_nextval('inc_rb');
ROLLBACK;
SELECT distseq_nextval('inc_rb');
SELECT distseq_currval('inc_rb');
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 'inc_rb';

-- created in a subtransaction that is rolled back: gone at once
BEGIN;
SAVEPOINT s1;
SELECT distseq_create('inc_sub');
SELECT distseq_nextval('inc_sub');
ROLLBACK TO SAVEPOINT s1;
SELECT distseq_nextval('inc_sub');
ROLLBACK TO SAVEPOINT s1;
SELECT distseq_currval('inc_sub');
ROLLBACK TO SAVEPOINT s1;
SELECT distseq_lastval();
ROLLBACK;

-- created in a subtransaction that is released: lives on to the commit
BEGIN;
SAVEPOINT s1;
SELECT distseq_create('inc_rel');
SELECT distseq_nextval('inc_rel');
RELEASE SAVEPOINT s1;
SELECT distseq_nextval('inc_rel');
COMMIT;
SELECT distseq_nextval('inc_rel');

-- created and dropped in one transaction, then created again
BEGIN;
SELECT distseq_create('inc_drop');
SELECT distseq_nextval('inc_drop');
SELECT distseq_drop('inc_drop');
SAVEPOINT s1;
SELECT distseq_nextval('inc_drop');
ROLLBACK TO SAVEPOINT s1;
SELECT distseq_create('inc_drop', start_value => 1000);
SELECT distseq_nextval('inc_drop');
COMMIT;
SELECT distseq_nextval('inc_drop');

-- a call site that outlives the sequences it drew from (PL/pgSQL keeps it)
DO $$
BEGIN
	FOR i IN 1..3 LOOP
		PERFORM distseq_create('inc_loop', start_value => i * 10);
		RAISE NOTICE 'inc_loop: %', distseq_nextval('inc_loop');
		PERFORM distseq_drop('inc_loop');
	END LOOP;
END
$$;

-- if_not_exists in the creating transaction finds the sequence
BEGIN;
SELECT distseq_create('inc_ine');
SELECT distseq_create('inc_ine', if_not_exists => true);
SELECT distseq_nextval('inc_ine');
COMMIT;
SELECT distseq_nextval('inc_ine');

-- a migration: create the table and its sequence, then seed it
BEGIN;
CREATE TABLE inc_items (id integer PRIMARY KEY, item text);
INSERT INTO inc_items VALUES (1, 'old'), (7, 'old');
SELECT distseq_create_for_column('inc_items', 'id');
INSERT INTO inc_items (item) SELECT 'seed' FROM generate_series(1, 250);
SELECT min(id), max(id), count(*), count(DISTINCT id) FROM inc_items WHERE item = 'seed';
COMMIT;
INSERT INTO inc_items (item) VALUES ('later') RETURNING id;
SELECT count(*) = count(DISTINCT id) AS unique_ids FROM inc_items;

-- more than the first windows hold: the highest window grows to cover it
BEGIN;
SELECT distseq_create('inc_big', block_size => 5, window_size => 10, min_open_windows => 1);
SELECT count(DISTINCT distseq_nextval('inc_big')) FROM generate_series(1, 28);
SELECT distseq_currval('inc_big');
COMMIT;
SELECT window_start, window_end, next_hi FROM distseq.distseq_windows
WHERE sequence_name = 'inc_big' ORDER BY window_start;
SELECT distseq_nextval('inc_big');

-- the bounds of the sequence hold: stripes, start_value, max_value
BEGIN;
SELECT distseq_create('inc_str', stripes => 3, stripe => 1, start_value => 5);
SELECT distseq_nextval('inc_str'), distseq_nextval('inc_str'), distseq_nextval('inc_str');
COMMIT;
SELECT distseq_nextval('inc_str');
BEGIN;
SELECT distseq_create('inc_int', block_size => 1, start_value => 2147483646,
					  max_value => 2147483647);
SELECT distseq_nextval('inc_int'), distseq_nextval('inc_int');
SELECT distseq_nextval('inc_int');
ROLLBACK;

-- PREPARE TRANSACTION records the values too; ROLLBACK PREPARED leaves nothing
BEGIN;
SELECT distseq_create('inc_2pc');
SELECT distseq_nextval('inc_2pc'), distseq_nextval('inc_2pc');
PREPARE TRANSACTION 'inc_2pc';
SELECT distseq_nextval('inc_2pc');
COMMIT PREPARED 'inc_2pc';
SELECT distseq_nextval('inc_2pc');
BEGIN;
SELECT distseq_create('inc_2pc_rb');
SELECT distseq_nextval('inc_2pc_rb');
PREPARE TRANSACTION 'inc_2pc_rb';
ROLLBACK PREPARED 'inc_2pc_rb';
SELECT distseq_nextval('inc_2pc_rb');

-- SET TRANSACTION READ ONLY after the draws: the commit still records them,
-- as a transaction that used a native sequence commits
BEGIN;
SELECT distseq_create('inc_ro', block_size => 2);
SELECT distseq_nextval('inc_ro');
SET TRANSACTION READ ONLY;
COMMIT;
SELECT window_start, next_hi FROM distseq.distseq_windows
WHERE sequence_name = 'inc_ro' ORDER BY window_start;
SELECT distseq_nextval('inc_ro');
BEGIN;
SELECT distseq_create('inc_ro2pc', block_size => 2);
SELECT distseq_nextval('inc_ro2pc');
SET TRANSACTION READ ONLY;
PREPARE TRANSACTION 'inc_ro2pc';
COMMIT PREPARED 'inc_ro2pc';
SELECT distseq_nextval('inc_ro2pc');

-- values drawn while the commit runs its deferred triggers and holds its
-- cursors are recorded too: nothing comes again after the commit
CREATE TABLE inc_dt (v int);
CREATE FUNCTION inc_dt_draw() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE NOTICE 'deferred draw %', distseq_nextval('inc_dt');
	RETURN NULL;
END
$$;
CREATE CONSTRAINT TRIGGER inc_dt_t AFTER INSERT ON inc_dt
	DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION inc_dt_draw();
BEGIN;
SELECT distseq_create('inc_dt', block_size => 2);
SELECT distseq_nextval('inc_dt');
INSERT INTO inc_dt SELECT g FROM generate_series(1, 4) g;
DECLARE inc_c CURSOR WITH HOLD FOR
	SELECT distseq_nextval('inc_dt') FROM generate_series(1, 3);
COMMIT;
FETCH ALL FROM inc_c;
CLOSE inc_c;
SELECT window_start, next_hi FROM distseq.distseq_windows
WHERE sequence_name = 'inc_dt' ORDER BY window_start;
SELECT distseq_nextval('inc_dt');

-- a call site set up in the creating transaction is used after its commit:
-- a prepared statement, COMMIT AND CHAIN, a procedure's COMMIT
BEGIN;
SELECT distseq_create('inc_ps', block_size => 3);
PREPARE inc_ps AS SELECT distseq_nextval('inc_ps');
EXECUTE inc_ps;
COMMIT AND CHAIN;
EXECUTE inc_ps;
EXECUTE inc_ps;
COMMIT;
EXECUTE inc_ps;
SELECT distseq_currval('inc_ps'), distseq_lastval();
DEALLOCATE inc_ps;
CREATE PROCEDURE inc_proc() LANGUAGE plpgsql AS $$
BEGIN
	PERFORM distseq_create('inc_proc', block_size => 3);
	RAISE NOTICE 'created: %', distseq_nextval('inc_proc');
	COMMIT;
	RAISE NOTICE 'committed: %', distseq_nextval('inc_proc');
	PERFORM distseq_create('inc_proc2', block_size => 3);
	RAISE NOTICE 'created: %', distseq_nextval('inc_proc2');
	ROLLBACK;
	PERFORM distseq_create('inc_proc2', block_size => 3);
	RAISE NOTICE 'created again: %', distseq_nextval('inc_proc2');
END
$$;
CALL inc_proc();
SELECT distseq_nextval('inc_proc'), distseq_nextval('inc_proc2');

-- a PL/pgSQL exception block that drops and re-creates the sequence: its
-- rollback brings back the first one, whose counter went on
BEGIN;
SELECT distseq_create('inc_exc', block_size => 2);
SELECT distseq_nextval('inc_exc');
DO $$
BEGIN
	RAISE NOTICE 'in the block: %', distseq_nextval('inc_exc');
	PERFORM distseq_drop('inc_exc');
	PERFORM distseq_create('inc_exc', block_size => 2);
	RAISE NOTICE 'the new one: %', distseq_nextval('inc_exc');
	RAISE EXCEPTION 'undo';
EXCEPTION WHEN raise_exception THEN
	RAISE NOTICE 'after the rollback: %', distseq_nextval('inc_exc');
END
$$;
SELECT distseq_nextval('inc_exc');
COMMIT;
SELECT distseq_nextval('inc_exc');

-- the maximum reached in the creating transaction stays reached
BEGIN;
SELECT distseq_create('inc_max', block_size => 1, start_value => 2147483646,
					  max_value => 2147483647);
SELECT distseq_nextval('inc_max'), distseq_nextval('inc_max');
COMMIT;
SELECT distseq_nextval('inc_max');
-- and so do the bounds of bigint
BEGIN;
SELECT distseq_create('inc_max64', block_size => 2, window_size => 2,
					  start_value => 9223372036854775804,
					  max_value => 9223372036854775806);
SELECT distseq_nextval('inc_max64'), distseq_nextval('inc_max64'),
	   distseq_nextval('inc_max64');
COMMIT;
SELECT distseq_nextval('inc_max64');
BEGIN;
SELECT distseq_create('inc_min64', block_size => 2, window_size => 3,
					  start_value => -9223372036854775807);
SELECT distseq_nextval('inc_min64'), distseq_nextval('inc_min64'),
	   distseq_nextval('inc_min64');
COMMIT;
SELECT window_start, window_end, next_hi FROM distseq.distseq_windows
WHERE sequence_name = 'inc_min64' ORDER BY window_start;
SELECT distseq_nextval('inc_min64');

-- the recording at commit runs with pinned names: an operator that a
-- hostile role put first in the committing session's search_path is not used
CREATE ROLE regress_inc_hostile;
GRANT CREATE ON SCHEMA public TO regress_inc_hostile;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO regress_inc_hostile;
SET ROLE regress_inc_hostile;
CREATE FUNCTION public.inc_lt(bigint, bigint) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
	RAISE NOTICE 'hostile operator ran as %', current_user;
	RETURN $1 OPERATOR(pg_catalog.<) $2;
END
$$;
CREATE OPERATOR public.< (FUNCTION = public.inc_lt, LEFTARG = bigint, RIGHTARG = bigint);
SET search_path = public, pg_catalog;
BEGIN;
SELECT distseq_create('inc_hostile', block_size => 2);
SELECT distseq_nextval('inc_hostile');
COMMIT;
SELECT distseq_nextval('inc_hostile');
SELECT distseq_drop('inc_hostile');
RESET search_path;
RESET ROLE;
DROP OWNED BY regress_inc_hostile;
DROP ROLE regress_inc_hostile;

-- a sequence whose values come from other servers is refused until commit
CREATE SERVER inc_srv FOREIGN DATA WRAPPER distseq OPTIONS (host '127.0.0.1', port '1');
CREATE USER MAPPING FOR CURRENT_USER SERVER inc_srv;
BEGIN;
SELECT distseq_create('inc_remote', servers => ARRAY['inc_srv']::name[]);
SELECT distseq_nextval('inc_remote');
ROLLBACK;
DROP SERVER inc_srv CASCADE;

DROP TABLE inc_items, inc_dt;  -- drops inc_items_id with it
DROP FUNCTION inc_dt_draw();
DROP PROCEDURE inc_proc();
SELECT sequence_name, distseq_drop(sequence_name) FROM distseq.distseq_sequences
WHERE sequence_name LIKE 'inc\_%' ORDER BY 1;
