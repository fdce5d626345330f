-- runs alone too: the extension may not be there yet
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS distseq;
RESET client_min_messages;
--
-- Privileges: what each kind of role may do, as one matrix.
--
--   superuser
--   owner    EXECUTE on distseq_create, distseq_drop and
--            distseq_create_for_column; creates and owns ps_main and ps_pub
--   usage    USAGE on distseq.ps_main, and EXECUTE on distseq_drop
--   update   UPDATE on distseq.ps_main
--   select   SELECT on distseq.ps_main
--   none     nothing
--   public   the role "none" on ps_pub, on which PUBLIC has USAGE
--
-- Cells: ok, a row count, or the SQLSTATE with the kind of refusal
-- (function: no EXECUTE; sequence: no privilege on the distseq sequence;
-- table: no privilege on a table; owner: must be owner).  Every call that
-- changes something (create, drop, rejoin) is rolled back right away.
--
CREATE ROLE regress_ds_owner;
CREATE ROLE regress_ds_usage;
CREATE ROLE regress_ds_update;
CREATE ROLE regress_ds_select;
CREATE ROLE regress_ds_none;
GRANT EXECUTE ON FUNCTION distseq_create,
                          distseq_drop,
                          distseq_create_for_column
  TO regress_ds_owner;
GRANT EXECUTE ON FUNCTION distseq_drop TO regress_ds_usage;

SET ROLE regress_ds_owner;
SELECT distseq_create('ps_main');
SELECT distseq_create('ps_pub');
GRANT USAGE ON SEQUENCE distseq.ps_main TO regress_ds_usage;
GRANT UPDATE ON SEQUENCE distseq.ps_main TO regress_ds_update;
GRANT SELECT ON SEQUENCE distseq.ps_main TO regress_ds_select;
GRANT USAGE ON SEQUENCE distseq.ps_pub TO PUBLIC;
RESET ROLE;
CREATE TABLE ps_su_tab (id bigint);
CREATE TABLE ps_owner_tab (id bigint);
ALTER TABLE ps_owner_tab OWNER TO regress_ds_owner;
SELECT relname, relowner::regrole, relacl FROM pg_class
WHERE relnamespace = 'distseq'::regnamespace AND relname LIKE 'ps\_%' ORDER BY 1;

-- Run a statement: 'ok' (or its result when show), or how it failed.
-- With undo, whatever it did is rolled back.
CREATE FUNCTION ps_try(stmt text, show boolean, undo boolean) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	res text;
BEGIN
	BEGIN
		IF stmt LIKE 'SELECT %' THEN
			EXECUTE stmt INTO res;
		ELSE
			EXECUTE stmt;
		END IF;
		IF undo THEN
			RAISE EXCEPTION USING ERRCODE = 'ZZ999';
		END IF;
	EXCEPTION
		WHEN SQLSTATE 'ZZ999' THEN NULL;
		WHEN OTHERS THEN
			RETURN SQLSTATE || COALESCE(' ' || CASE
				WHEN SQLERRM LIKE 'permission denied for function %' THEN 'function'
				WHEN SQLERRM LIKE 'permission denied for distseq sequence %' THEN 'sequence'
				WHEN SQLERRM LIKE 'permission denied for table %' THEN 'table'
				WHEN SQLERRM LIKE 'must be owner of %' THEN 'owner'
			END, '');
	END;
	RETURN CASE WHEN show THEN res ELSE 'ok' END;
END
$$;

CREATE TABLE ps_matrix (who text, ord int, action text, outcome text);
GRANT INSERT ON ps_matrix TO PUBLIC;

-- One row of the matrix: every action, as the current role, on sequence seq
CREATE FUNCTION ps_row(who text, seq text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	rel text := 'distseq.' || quote_ident(seq);
	a record;
BEGIN
	FOR a IN
		SELECT * FROM (VALUES
			(1, 'distseq_nextval', format('SELECT distseq_nextval(%L)', seq), false, false),
			(2, 'distseq_currval', format('SELECT distseq_currval(%L)', seq), false, false),
			(3, 'distseq_status rows', format('SELECT count(*) FROM distseq_status WHERE sequence_name = %L', seq), true, false),
			(4, 'distseq_blocks rows', format('SELECT count(*) FROM distseq_blocks WHERE sequence_name = %L', seq), true, false),
			(5, 'distseq_pool_status() rows', format('SELECT count(*) FROM distseq_pool_status() WHERE seqrel = %L::regclass', rel), true, false),
			(6, 'distseq_block_status() rows', format('SELECT count(*) FROM distseq_block_status() WHERE seqrel = %L::regclass', rel), true, false),
			(7, 'table distseq.distseq_sequences', 'SELECT count(*) FROM distseq.distseq_sequences', false, false),
			(8, 'table distseq.distseq_windows', 'SELECT count(*) FROM distseq.distseq_windows', false, false),
			(9, 'distseq_create', 'SELECT distseq_create(''ps_new'')', false, true),
			(10, 'distseq_drop', format('SELECT distseq_drop(%L)', seq), false, true),
			(11, 'DROP SEQUENCE', format('DROP SEQUENCE %s', rel), false, true),
			(12, 'create_for_column, superuser''s table', 'SELECT distseq_create_for_column(''ps_su_tab'', ''id'', ''ps_col'')', false, true),
			(13, 'create_for_column, owner''s table', 'SELECT distseq_create_for_column(''ps_owner_tab'', ''id'', ''ps_col'')', false, true),
			(14, 'distseq_rejoin', format('SELECT distseq_rejoin(%L)', seq), true, true)
		) v(ord, action, stmt, show, undo)
		ORDER BY ord
	LOOP
		INSERT INTO ps_matrix VALUES (who, a.ord, a.action, ps_try(a.stmt, a.show, a.undo));
	END LOOP;
END
$$;

-- The superuser draws first: the pool and this session's block of ps_main
-- exist, and its currval is defined in this session (as with native
-- sequences, currval is per session, not per role).
SELECT distseq_nextval('ps_main') > 0 AS drawn;
SELECT ps_row('superuser', 'ps_main');
SET ROLE regress_ds_owner;
SELECT ps_row('owner', 'ps_main');
RESET ROLE;
SET ROLE regress_ds_usage;
SELECT ps_row('usage', 'ps_main');
RESET ROLE;
SET ROLE regress_ds_update;
SELECT ps_row('update', 'ps_main');
RESET ROLE;
SET ROLE regress_ds_select;
SELECT ps_row('select', 'ps_main');
RESET ROLE;
SET ROLE regress_ds_none;
SELECT ps_row('none', 'ps_main');
SELECT ps_row('public', 'ps_pub');
RESET ROLE;

SELECT action,
       max(outcome) FILTER (WHERE who = 'superuser') AS superuser,
       max(outcome) FILTER (WHERE who = 'owner') AS owner,
       max(outcome) FILTER (WHERE who = 'usage') AS usage,
       max(outcome) FILTER (WHERE who = 'update') AS update,
       max(outcome) FILTER (WHERE who = 'select') AS "select",
       max(outcome) FILTER (WHERE who = 'none') AS none,
       max(outcome) FILTER (WHERE who = 'public') AS public
FROM ps_matrix GROUP BY ord, action ORDER BY ord;

-- the messages of the refusals
\set VERBOSITY default
SET ROLE regress_ds_none;
SELECT distseq_nextval('ps_main');
SELECT distseq_create('ps_new');
SELECT * FROM distseq.distseq_sequences;
RESET ROLE;
SET ROLE regress_ds_usage;
SELECT distseq_drop('ps_main');
RESET ROLE;
SET ROLE regress_ds_owner;
SELECT distseq_create_for_column('ps_su_tab', 'id');
RESET ROLE;

-- privileges are checked for the role that calls, on every call: a value
-- drawn by a privileged role earlier in the transaction (here the
-- superuser; the same happens inside a SECURITY DEFINER function) does not
-- open the sequence to a role without USAGE
BEGIN;
SELECT distseq_nextval('ps_main') > 0 AS drawn_as_superuser;
SET LOCAL ROLE regress_ds_none;
SELECT ps_try('SELECT distseq_nextval(''ps_main'')', false, false) AS nextval_as_none;
SELECT ps_try('SELECT distseq_currval(''ps_main'')', false, false) AS currval_as_none;
ROLLBACK;

-- a REVOKE takes effect in a session that has already drawn
SET ROLE regress_ds_usage;
SELECT ps_try('SELECT distseq_nextval(''ps_main'')', false, false) AS before_revoke;
RESET ROLE;
REVOKE USAGE ON SEQUENCE distseq.ps_main FROM regress_ds_usage;
SET ROLE regress_ds_usage;
SELECT ps_try('SELECT distseq_nextval(''ps_main'')', false, false) AS after_revoke;
RESET ROLE;

-- the status views must not let a qual of the caller see rows it may not
-- see: a cheap function in the WHERE clause is not run on hidden rows
SET ROLE regress_ds_none;
CREATE FUNCTION pg_temp.ps_peek(text) RETURNS boolean
LANGUAGE plpgsql COST 0.0000001 AS $$
BEGIN
	IF $1 = 'ps_main' THEN
		RAISE NOTICE 'saw hidden sequence %', $1;
	END IF;
	RETURN true;
END
$$;
SELECT count(*) FROM distseq_status WHERE pg_temp.ps_peek(sequence_name);
SELECT count(*) FROM distseq_blocks WHERE pg_temp.ps_peek(sequence_name);
RESET ROLE;

--
-- search_path: operators, aggregates and tables of a user's schema searched
-- before pg_catalog do not change what distseq does, or run as anybody else.
--
CREATE SCHEMA regress_ds_evil AUTHORIZATION regress_ds_owner;
SET ROLE regress_ds_owner;
CREATE FUNCTION regress_ds_evil.trap_text(text, text) RETURNS boolean
LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'trap: text = text as %', current_user; END$$;
CREATE FUNCTION regress_ds_evil.trap_oid(regclass, oid) RETURNS boolean
LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'trap: regclass = oid as %', current_user; END$$;
CREATE FUNCTION regress_ds_evil.trap_cmp(bigint, bigint) RETURNS boolean
LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'trap: bigint comparison as %', current_user; END$$;
CREATE FUNCTION regress_ds_evil.trap_arith(bigint, bigint) RETURNS bigint
LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'trap: bigint arithmetic as %', current_user; END$$;
CREATE FUNCTION regress_ds_evil.trap_count(bigint) RETURNS bigint
LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'trap: count(*) as %', current_user; END$$;
CREATE OPERATOR regress_ds_evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = regress_ds_evil.trap_text);
CREATE OPERATOR regress_ds_evil.= (LEFTARG = regclass, RIGHTARG = oid, FUNCTION = regress_ds_evil.trap_oid);
CREATE OPERATOR regress_ds_evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = regress_ds_evil.trap_cmp);
CREATE OPERATOR regress_ds_evil.< (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = regress_ds_evil.trap_cmp);
CREATE OPERATOR regress_ds_evil.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = regress_ds_evil.trap_arith);
CREATE OPERATOR regress_ds_evil.- (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = regress_ds_evil.trap_arith);
CREATE AGGREGATE regress_ds_evil.max(bigint) (SFUNC = regress_ds_evil.trap_arith, STYPE = bigint);
CREATE AGGREGATE regress_ds_evil.count(*) (SFUNC = regress_ds_evil.trap_count, STYPE = bigint, INITCOND = '0');
CREATE TABLE regress_ds_evil.distseq_sequences (sequence_name text, seqrel oid);
CREATE TABLE regress_ds_evil.distseq_windows (sequence_name text, window_start bigint);
CREATE TABLE regress_ds_evil.sp_tab (id integer);
INSERT INTO regress_ds_evil.sp_tab VALUES (41);
SET search_path = regress_ds_evil, pg_catalog, public;
-- the traps do catch ordinary queries
SELECT 'a'::text = 'a'::text;
SELECT 1::bigint < 2::bigint;
SELECT max(v) FROM (VALUES (1::bigint)) t(v);
SELECT count(*) FROM sp_tab;
-- but distseq runs none of them: create, draw across several refills, drop
SELECT distseq_create('sp_seq', block_size => 2, window_size => 3);
SELECT distseq_nextval('sp_seq') FROM generate_series(1, 7);
SELECT distseq_currval('sp_seq');
SELECT distseq_create_for_column('sp_tab', 'id');
INSERT INTO sp_tab VALUES (DEFAULT) RETURNING id;
SELECT distseq_drop('sp_seq');
DROP SEQUENCE distseq.sp_tab_id;
RESET search_path;
RESET ROLE;
-- nothing went into the decoys; the real catalog has neither sequence left
SELECT count(*) FROM regress_ds_evil.distseq_sequences;
SELECT count(*) FROM regress_ds_evil.distseq_windows;
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name IN ('sp_seq', 'sp_tab_id');
SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name IN ('sp_seq', 'sp_tab_id');
SELECT count(*) FROM pg_class
WHERE relnamespace = 'distseq'::regnamespace AND relname IN ('sp_seq', 'sp_tab_id');

--
-- Clean up: revoke, then DROP OWNED drops the owner's sequences (and their
-- catalog rows, through the event trigger), schema and table.
--
DROP FUNCTION ps_row(text, text);
DROP FUNCTION ps_try(text, boolean, boolean);
DROP TABLE ps_matrix, ps_su_tab;
REVOKE EXECUTE ON FUNCTION distseq_create,
                           distseq_drop,
                           distseq_create_for_column
  FROM regress_ds_owner, regress_ds_usage;
DROP OWNED BY regress_ds_owner, regress_ds_usage, regress_ds_update,
              regress_ds_select, regress_ds_none;
DROP ROLE regress_ds_owner, regress_ds_usage, regress_ds_update,
          regress_ds_select, regress_ds_none;
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name LIKE 'ps\_%';
SELECT count(*) FROM pg_class
WHERE relnamespace = 'distseq'::regnamespace AND relname LIKE 'ps\_%';
SELECT count(*) FROM pg_namespace WHERE nspname = 'regress_ds_evil';
