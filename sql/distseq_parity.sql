--
-- What native sequences do that distseq does alike: if_not_exists for the
-- creators (CREATE SEQUENCE IF NOT EXISTS) and distseq_lastval() (lastval()).
-- Each step of distseq_lastval() shows the native lastval() next to it.
--
CREATE EXTENSION IF NOT EXISTS distseq;
CREATE ROLE regress_pa_app;

-- lastval of both, or the SQLSTATE it failed with
CREATE FUNCTION pa_lastvals(OUT native text, OUT distseq text)
LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		native := lastval() > 0;
	EXCEPTION WHEN OTHERS THEN
		native := SQLSTATE;
	END;
	BEGIN
		distseq := distseq_lastval() > 0;
	EXCEPTION WHEN OTHERS THEN
		distseq := SQLSTATE;
	END;
END
$$;

--
-- distseq_lastval
--
-- nothing drawn yet in this session
SELECT lastval();
SELECT distseq_lastval();
-- parallel restricted: it runs in the leader, which drew the values (native
-- lastval is unsafe, which keeps the whole query out of parallel workers)
SELECT proparallel AS native, (SELECT proparallel FROM pg_proc WHERE proname = 'distseq_lastval') AS distseq
FROM pg_proc WHERE proname = 'lastval';

SELECT distseq_create('pa_a', block_size => 5);
SELECT distseq_create('pa_b', block_size => 5, start_value => 1000);
CREATE SEQUENCE pa_native;
SELECT * FROM pa_lastvals();

-- the last value from any sequence, whichever it was
SELECT distseq_nextval('pa_a') AS a1 \gset
SELECT distseq_lastval() = :a1 AS is_a1;
SELECT distseq_nextval('pa_b') AS b1 \gset
SELECT distseq_lastval() = :b1 AS is_b1;
SELECT distseq_nextval('pa_a') AS a2 \gset
SELECT distseq_lastval() = :a2 AS is_a2, :a2 > :a1 AS a_grows;
-- currval does not change it, as natively
SELECT distseq_currval('pa_b') = :b1 AS currval_b, distseq_lastval() = :a2 AS still_a2;
-- a striped sequence gives the value, not its slot
SELECT distseq_create('pa_striped', block_size => 5, stripes => 3, stripe => 2);
SELECT distseq_nextval('pa_striped') AS s1 \gset
SELECT distseq_lastval() = :s1 AS is_s1, :s1 % 3 AS stripe;
-- drawn through a column default
CREATE TABLE pa_rows (id bigint DEFAULT distseq_nextval('pa_a'), v text);
INSERT INTO pa_rows (v) VALUES ('x') RETURNING id AS r1 \gset
SELECT distseq_lastval() = :r1 AS is_r1;

-- a draw that failed changes nothing
SELECT distseq_nextval('pa_no_such');
SELECT distseq_lastval() = :r1 AS still_r1;
SELECT distseq_create('pa_one', start_value => 7, max_value => 7);
SELECT distseq_nextval('pa_one');
SELECT distseq_nextval('pa_a') AS a3 \gset
SELECT distseq_nextval('pa_one');
SELECT distseq_lastval() = :a3 AS still_a3;
SET ROLE regress_pa_app;
SELECT distseq_nextval('pa_b');
RESET ROLE;
SELECT distseq_lastval() = :a3 AS still_a3;
-- a statement that fails after its draws keeps the last one, as natively
SELECT distseq_nextval('pa_a') / (3 - g) FROM generate_series(1, 3) g;
SELECT distseq_lastval() = distseq_currval('pa_a') AS is_last_drawn,
	   distseq_lastval() > :a3 AS above_a3;

-- a rolled back draw was handed out all the same
BEGIN;
SELECT distseq_nextval('pa_b') AS b2 \gset
ROLLBACK;
SELECT distseq_lastval() = :b2 AS is_b2;
SELECT nextval('pa_native') AS n1 \gset
SELECT * FROM pa_lastvals();

-- privileges as native lastval: USAGE or SELECT on the sequence it refers
-- to, checked at the call, for the current role, whoever drew the value
GRANT SELECT ON SEQUENCE pa_native TO regress_pa_app;
SET ROLE regress_pa_app;
SELECT lastval() = :n1 AS native_lastval;
RESET ROLE;
SELECT distseq_nextval('pa_b') AS b3 \gset
SET ROLE regress_pa_app;
SELECT distseq_lastval();
RESET ROLE;
GRANT SELECT ON SEQUENCE distseq.pa_b TO regress_pa_app;
SET ROLE regress_pa_app;
SELECT distseq_lastval() = :b3 AS is_b3;
RESET ROLE;
REVOKE SELECT ON SEQUENCE distseq.pa_b FROM regress_pa_app;
GRANT USAGE ON SEQUENCE distseq.pa_b TO regress_pa_app;
SET ROLE regress_pa_app;
SELECT distseq_lastval() = :b3 AS is_b3;
RESET ROLE;
REVOKE USAGE ON SEQUENCE distseq.pa_b FROM regress_pa_app;
-- UPDATE alone is not enough, as natively
GRANT UPDATE ON SEQUENCE distseq.pa_b TO regress_pa_app;
SET ROLE regress_pa_app;
SELECT distseq_lastval();
RESET ROLE;
REVOKE UPDATE ON SEQUENCE distseq.pa_b FROM regress_pa_app;

-- in a SECURITY DEFINER function, the definer's privileges count
CREATE FUNCTION pa_definer_lastval() RETURNS text
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	RETURN public.distseq_lastval();
EXCEPTION WHEN insufficient_privilege THEN
	RETURN SQLERRM;
END
$$;
ALTER FUNCTION pa_definer_lastval() OWNER TO regress_pa_app;
SELECT pa_definer_lastval();
GRANT USAGE ON SEQUENCE distseq.pa_b TO regress_pa_app;
SELECT pa_definer_lastval() = :'b3' AS is_b3;
REVOKE USAGE ON SEQUENCE distseq.pa_b FROM regress_pa_app;

-- only the session that drew it knows it: a query forced into a parallel
-- worker leaves the call to the leader (PostgreSQL 16 renamed the setting)
BEGIN;
SELECT set_config(CASE WHEN current_setting('server_version_num')::int >= 160000
					   THEN 'debug_parallel_query' ELSE 'force_parallel_mode' END,
				  'on', true) AS parallel;
SELECT distseq_lastval() = :b3 AS is_b3, lastval() = :n1 AS native_is_n1;
SELECT count(*) AS matching FROM pa_rows WHERE id <= distseq_lastval();
COMMIT;

-- dropped: undefined, as natively; dropped and created again under its
-- name: a new sequence, that this session never drew from
SELECT distseq_create('pa_gone');
SELECT distseq_nextval('pa_gone') > 0 AS drawn;
SELECT distseq_drop('pa_gone');
SELECT distseq_lastval();
SELECT distseq_create('pa_gone');
SELECT distseq_lastval();
SELECT distseq_nextval('pa_gone') AS g1 \gset
SELECT distseq_lastval() = :g1 AS is_g1;
-- all in one transaction
BEGIN;
SELECT distseq_drop('pa_gone');
SELECT distseq_create('pa_gone');
SELECT distseq_lastval();
ROLLBACK;
SELECT distseq_lastval() = :g1 AS is_g1;
-- the native ones
SELECT nextval('pa_native') > 0 AS drawn;
DROP SEQUENCE pa_native;
SELECT lastval();
CREATE SEQUENCE pa_native;
SELECT lastval();

-- DISCARD SEQUENCES and DISCARD ALL forget it, where they forget currval
CREATE SEQUENCE pa_native2;
SELECT nextval('pa_native2') > 0 AS native, distseq_nextval('pa_a') > 0 AS distseq;
DISCARD TEMP;
DISCARD PLANS;
SELECT * FROM pa_lastvals();
DISCARD SEQUENCES;
SELECT * FROM pa_lastvals();
SELECT nextval('pa_native2') > 0 AS native, distseq_nextval('pa_a') > 0 AS distseq;
DISCARD ALL;
SELECT * FROM pa_lastvals();
-- in a transaction block: DISCARD SEQUENCES forgets it for good, even when
-- the transaction rolls back; DISCARD ALL refuses and leaves it
SELECT nextval('pa_native2') > 0 AS native, distseq_nextval('pa_a') > 0 AS distseq;
BEGIN;
DISCARD SEQUENCES;
SELECT * FROM pa_lastvals();
ROLLBACK;
SELECT * FROM pa_lastvals();
SELECT nextval('pa_native2') > 0 AS native, distseq_nextval('pa_a') AS a4 \gset
BEGIN;
DISCARD ALL;
ROLLBACK;
SELECT * FROM pa_lastvals();
SELECT distseq_lastval() = :a4 AS is_a4;
-- and the next draw defines it again
DISCARD SEQUENCES;
SELECT distseq_nextval('pa_b') AS b4 \gset
SELECT distseq_lastval() = :b4 AS is_b4;

--
-- if_not_exists
--
SELECT distseq_create('pa_a');
-- a notice, and the sequence stays as it was created, whatever the
-- arguments say (as CREATE SEQUENCE IF NOT EXISTS ignores its options)
SELECT distseq_create('pa_a', block_size => 99, start_value => 5000, if_not_exists => true);
SELECT block_size, start_value FROM distseq_status WHERE sequence_name = 'pa_a';
SELECT distseq_nextval('pa_a') < 5000 AS same_range;
CREATE SEQUENCE IF NOT EXISTS pa_native2 START 5000;
SELECT nextval('pa_native2') < 5000 AS native_same_range;
-- NULL is false
SELECT distseq_create('pa_a', if_not_exists => NULL);
-- bad arguments are refused all the same
SELECT distseq_create('pa_a', block_size => 0, if_not_exists => true);
SELECT distseq_create('', if_not_exists => true);
-- a relation of distseq's own of that name is no distseq sequence
SELECT distseq_create('distseq_windows', if_not_exists => true);
-- not there: created
SELECT distseq_create('pa_new', if_not_exists => true);
SELECT distseq_nextval('pa_new') > 0 AS drawn;
-- in the creating transaction, which sees its own; a rollback leaves none
BEGIN;
SELECT distseq_create('pa_tx', if_not_exists => true);
SELECT distseq_create('pa_tx', if_not_exists => true);
ROLLBACK;
SELECT count(*) AS left_behind FROM distseq.distseq_sequences WHERE sequence_name = 'pa_tx';
-- the error can be caught, and nothing is left open
DO $$
BEGIN
	PERFORM distseq_create('pa_a');
EXCEPTION WHEN duplicate_object THEN
	RAISE NOTICE 'caught: %', SQLERRM;
END
$$;
SELECT distseq_nextval('pa_new') > 0 AS drawn;

-- distseq_create_for_column
CREATE TABLE pa_tab (id integer PRIMARY KEY, v text);
INSERT INTO pa_tab VALUES (41, 'x');
SELECT distseq_create_for_column('pa_tab', 'id', if_not_exists => true);
INSERT INTO pa_tab (v) VALUES ('y') RETURNING id;
SELECT distseq_create_for_column('pa_tab', 'id');
-- run again: a notice, the name, and the table and its default left alone,
-- even where the arguments would be refused for the table as it is now
ALTER TABLE pa_tab ALTER COLUMN id SET DEFAULT 0;
SELECT distseq_create_for_column('pa_tab', 'id', max_value => 10, if_not_exists => true);
SELECT pg_get_expr(adbin, adrelid) AS id_default FROM pg_attrdef WHERE adrelid = 'pa_tab'::regclass;
-- the table is still checked first
SELECT distseq_create_for_column('pa_tab', 'nope', if_not_exists => true);
GRANT EXECUTE ON FUNCTION distseq_create_for_column TO regress_pa_app;
SET ROLE regress_pa_app;
SELECT distseq_create_for_column('pa_tab', 'id', if_not_exists => true);
RESET ROLE;
REVOKE EXECUTE ON FUNCTION distseq_create_for_column FROM regress_pa_app;

DROP TABLE pa_tab, pa_rows;
DROP FUNCTION pa_definer_lastval();
DROP FUNCTION pa_lastvals();
DROP SEQUENCE pa_native, pa_native2;
SELECT distseq_drop(sequence_name) FROM distseq.distseq_sequences
WHERE sequence_name LIKE 'pa\_%' ORDER BY sequence_name;
DROP ROLE regress_pa_app;
