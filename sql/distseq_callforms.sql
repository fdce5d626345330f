--
-- Every way a sequence name reaches distseq_nextval and distseq_currval,
-- with names that change between calls at one call site.  Each sequence
-- has a range of its own, so a value tells which sequence it came from:
-- cf_a 1,000,000s, cf_b 2,000,000s, cf_c 3,000,000s.  Every call is logged
-- by cf_got() with the name asked for, the value and distseq_currval of
-- that name right after; the checks at the end say, per call form, whether
-- each value came from the sequence named and whether currval followed.
--
-- The matrix runs twice: as a superuser, and as regress_cf_user, who has
-- USAGE on cf_a and cf_b only; each call site ends with cf_c (permission
-- denied for regress_cf_user) and cf_nope (does not exist), so privilege
-- and existence are shown to be checked per name at each site.
--
CREATE EXTENSION IF NOT EXISTS distseq;
SET client_min_messages = warning;

SELECT distseq_create('cf_a', block_size => 10, start_value => 1000000, max_value => 1999999);
SELECT distseq_create('cf_b', block_size => 10, start_value => 2000000, max_value => 2999999);
SELECT distseq_create('cf_c', block_size => 10, start_value => 3000000, max_value => 3999999);

CREATE ROLE regress_cf_user;
GRANT USAGE ON SEQUENCE distseq.cf_a, distseq.cf_b TO regress_cf_user;

CREATE FUNCTION cf_seq_of(v bigint) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE v / 1000000 WHEN 1 THEN 'cf_a' WHEN 2 THEN 'cf_b' WHEN 3 THEN 'cf_c' END
$$;

CREATE TABLE cf_log (
	role name NOT NULL DEFAULT current_user,
	form text NOT NULL,
	n text NOT NULL,
	v bigint NOT NULL,
	cur bigint
);
GRANT INSERT ON cf_log TO regress_cf_user;

-- Log a value v got for name n: takes v, returns it.  currval is read
-- under a savepoint, so that a call that should have failed and did not
-- is logged (with cur null) rather than stopped by currval's own check.
CREATE FUNCTION cf_got(form text, n text, v bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	cur bigint;
BEGIN
	BEGIN
		cur := distseq_currval(n);
	EXCEPTION WHEN OTHERS THEN
		cur := NULL;
	END;
	INSERT INTO cf_log (form, n, v, cur) VALUES (form, n, v, cur);
	RETURN v;
END
$$;

-- The names each call site is given, in order
CREATE TABLE cf_names (i int PRIMARY KEY, n text NOT NULL);
INSERT INTO cf_names VALUES (1, 'cf_a'), (2, 'cf_b'), (3, 'cf_a'), (4, 'cf_b');
CREATE TABLE cf_names_c (i int PRIMARY KEY, n text NOT NULL);
INSERT INTO cf_names_c SELECT * FROM cf_names;
INSERT INTO cf_names_c VALUES (5, 'cf_c');
CREATE TABLE cf_names_nope (i int PRIMARY KEY, n text NOT NULL);
INSERT INTO cf_names_nope SELECT * FROM cf_names;
INSERT INTO cf_names_nope VALUES (5, 'cf_nope');
GRANT SELECT ON cf_names, cf_names_c, cf_names_nope TO regress_cf_user;

-- Tables for the forms that store the values
CREATE TABLE cf_trig (n text NOT NULL, id bigint);
CREATE FUNCTION cf_trig_fill() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	NEW.id := cf_got(TG_ARGV[0], NEW.n, distseq_nextval(NEW.n));
	RETURN NEW;
END
$$;
CREATE TRIGGER cf_trig_fill BEFORE INSERT ON cf_trig
	FOR EACH ROW EXECUTE FUNCTION cf_trig_fill('trigger');
CREATE TABLE cf_copy (n text NOT NULL, id bigint,
					  d bigint DEFAULT distseq_nextval('cf_b'));
CREATE TRIGGER cf_copy_fill BEFORE INSERT ON cf_copy
	FOR EACH ROW EXECUTE FUNCTION cf_trig_fill('copy');
CREATE TABLE cf_default (n text NOT NULL DEFAULT 'cf_a',
						 id bigint DEFAULT distseq_nextval('cf_a'),
						 id2 bigint DEFAULT distseq_nextval('cf_b'));
CREATE TABLE cf_rule (n text NOT NULL);
CREATE RULE cf_rule_log AS ON INSERT TO cf_rule DO INSTEAD
	INSERT INTO cf_log (form, n, v, cur)
	VALUES ('rule', NEW.n, distseq_nextval(NEW.n), distseq_currval(NEW.n));
CREATE VIEW cf_view AS
	SELECT i, n, cf_got('view', n, distseq_nextval(n)) AS v FROM cf_names;
CREATE VIEW cf_view_c AS
	SELECT i, n, cf_got('view', n, distseq_nextval(n)) AS v FROM cf_names_c;
GRANT INSERT ON cf_trig, cf_copy, cf_default, cf_rule TO regress_cf_user;
GRANT SELECT ON cf_trig, cf_copy, cf_default, cf_view, cf_view_c TO regress_cf_user;

-- SQL functions: one that is inlined, one that cannot be (a SET clause)
CREATE FUNCTION cf_sql(n text) RETURNS bigint
LANGUAGE sql VOLATILE AS $$ SELECT distseq_nextval(n) $$;
CREATE FUNCTION cf_sql_noinline(n text) RETURNS bigint
LANGUAGE sql VOLATILE SET work_mem = '4MB' AS $$ SELECT distseq_nextval(n) $$;

-- PL/pgSQL: a variable, a constant, EXECUTE with format() and USING
CREATE FUNCTION cf_plpgsql(names text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	n text;
	v bigint;
BEGIN
	FOREACH n IN ARRAY names LOOP
		v := distseq_nextval(n);
		PERFORM cf_got('plpgsql variable', n, v);
	END LOOP;
END
$$;
CREATE FUNCTION cf_plpgsql_const() RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	n CONSTANT text := 'cf_b';
BEGIN
	FOR i IN 1..3 LOOP
		PERFORM cf_got('plpgsql constant', n, distseq_nextval(n));
		PERFORM cf_got('plpgsql constant', 'cf_a', distseq_nextval('cf_a'));
	END LOOP;
END
$$;
CREATE FUNCTION cf_plpgsql_execute(names text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	n text;
	v bigint;
BEGIN
	FOREACH n IN ARRAY names LOOP
		EXECUTE format('SELECT distseq_nextval(%L)', n) INTO v;
		PERFORM cf_got('execute format', n, v);
		EXECUTE 'SELECT distseq_nextval($1)' INTO v USING n;
		PERFORM cf_got('execute using', n, v);
	END LOOP;
END
$$;
-- A cursor over names, drawing per FETCH
CREATE FUNCTION cf_plpgsql_cursor(tab regclass) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
	c refcursor;
	n text;
	v bigint;
BEGIN
	OPEN c FOR EXECUTE format('SELECT n, distseq_nextval(n) FROM %s ORDER BY i', tab);
	LOOP
		FETCH c INTO n, v;
		EXIT WHEN NOT FOUND;
		PERFORM cf_got('plpgsql cursor', n, v);
	END LOOP;
	CLOSE c;
END
$$;

\set VERBOSITY terse
SELECT current_setting('server_version_num')::int >= 160000 AS pg16 \gset
-- (from the source directory, so that messages name the file the same way
-- wherever the tests run)
\getenv abs_srcdir PG_ABS_SRCDIR
\cd :abs_srcdir
\i sql/callforms_matrix.inc
SET ROLE regress_cf_user;
\i sql/callforms_matrix.inc
RESET ROLE;

-- Per role and call form: the calls logged, whether every value came from
-- the sequence named, and whether currval of that name followed it
SELECT role, form, count(*) AS calls,
	   bool_and(cf_seq_of(v) IS NOT DISTINCT FROM n) AS from_named_sequence,
	   bool_and(cur IS NOT DISTINCT FROM v) AS currval_follows
FROM cf_log GROUP BY role, form ORDER BY role, form;
-- the forms that store values instead of logging them
SELECT 'default' AS form, bool_and(cf_seq_of(id) = n AND cf_seq_of(id2) = 'cf_b') AS ok,
	   count(*) FROM cf_default
UNION ALL
SELECT 'copy default', bool_and(cf_seq_of(d) = 'cf_b'), count(*) FROM cf_copy
UNION ALL
SELECT 'trigger stored', bool_and(cf_seq_of(id) = n), count(*) FROM cf_trig
UNION ALL
SELECT 'copy stored', bool_and(cf_seq_of(id) = n), count(*) FROM cf_copy;

-- No value was handed out twice, also after each sequence hands out more
-- values of its own (a value served from the wrong sequence would come
-- back here)
INSERT INTO cf_log (form, n, v)
SELECT 'direct', n, distseq_nextval(n)
FROM (VALUES ('cf_a'), ('cf_b'), ('cf_c')) s(n), generate_series(1, 200);
SELECT v, count(*) FROM (
	SELECT v FROM cf_log
	UNION ALL SELECT id FROM cf_default UNION ALL SELECT id2 FROM cf_default
	UNION ALL SELECT d FROM cf_copy
) all_values GROUP BY v HAVING count(*) > 1;

--
-- A call site must not take another expression's verdict on whether its
-- name is constant: the site hint is keyed by the expression's address,
-- which a later expression may reuse once the first one is freed.  Here
-- statements 2 and 4 leave hints for a constant-looking CASE, and the
-- 'q' rows of statements 3 and 5 must still draw from q.  q's values are
-- negative, p's positive.
--
SELECT distseq_create('p', block_size => 1000);
SELECT distseq_create('q', block_size => 1000, start_value => -1000000, max_value => -1);
CREATE TABLE src (n text);
INSERT INTO src VALUES ('p'), ('q');
CREATE TABLE got (stmt int, name text, v bigint);
INSERT INTO got SELECT 1, x, distseq_nextval(x) FROM (SELECT CASE WHEN 1=0 THEN n ELSE 'p' END x FROM src) s;
INSERT INTO got SELECT 2, n, distseq_nextval(CASE WHEN 1=0 THEN n ELSE 'p' END) FROM src;
INSERT INTO got SELECT 3, n, distseq_nextval(CASE WHEN 1=1 THEN n ELSE 'p' END) FROM src;
INSERT INTO got SELECT 4, n, distseq_nextval(CASE WHEN 1=0 THEN n ELSE 'p' END) FROM src;
INSERT INTO got SELECT 5, n, distseq_nextval(CASE WHEN 1=1 THEN n ELSE 'p' END) FROM src;
-- the same with the constant-looking statement prepared, and deallocated
PREPARE hint_p AS INSERT INTO got SELECT 7, n, distseq_nextval(CASE WHEN 1=0 THEN n ELSE 'p' END) FROM src;
EXECUTE hint_p;
DEALLOCATE hint_p;
INSERT INTO got SELECT 8, n, distseq_nextval(CASE WHEN 1=1 THEN n ELSE 'p' END) FROM src;
-- ... and inside a SQL function that is not inlined
CREATE FUNCTION hint_p_fn() RETURNS void LANGUAGE sql SET work_mem = '4MB' AS $$
	INSERT INTO got SELECT 9, n, distseq_nextval(CASE WHEN 1=0 THEN n ELSE 'p' END) FROM src;
$$;
SELECT hint_p_fn();
INSERT INTO got SELECT 10, n, distseq_nextval(CASE WHEN 1=1 THEN n ELSE 'p' END) FROM src;
-- column-, CASE- and LATERAL-named calls after constant-named ones
INSERT INTO got SELECT 11, 'p', distseq_nextval('p') FROM generate_series(1, 3);
INSERT INTO got SELECT 12, n, distseq_nextval(n) FROM src;
INSERT INTO got SELECT 13, n, v FROM src, LATERAL (SELECT distseq_nextval(src.n) v) l;
INSERT INTO got SELECT 6, 'q', distseq_nextval('q') FROM generate_series(1, 10);
INSERT INTO got SELECT 14, 'p', distseq_nextval('p') FROM generate_series(1, 10);
SELECT v, count(*) FROM got GROUP BY v HAVING count(*) > 1;
-- statements 2, 4, 7 and 9 draw from p whatever the row; the others from
-- the name stored: a row listed here drew from the wrong sequence
SELECT stmt, name, v < 0 AS from_q FROM got
WHERE (v < 0) <> (name = 'q' AND stmt NOT IN (2, 4, 7, 9)) ORDER BY stmt, name;

DROP TABLE src, got;
DROP FUNCTION hint_p_fn();
SELECT distseq_drop('p');
SELECT distseq_drop('q');

--
-- Names the per-call comparison must tell apart: one a prefix of another,
-- 63-byte names that differ in their last byte only, and names stored
-- compressed or out of line, at one call site each (a column, a prefix
-- operator, a PL/pgSQL variable).  Ranges: cf_p 5,000,000s, cf_pq
-- 6,000,000s, l...1 7,000,000s, l...2 8,000,000s.
--
SELECT distseq_create('cf_p', block_size => 10, start_value => 5000000, max_value => 5999999);
SELECT distseq_create('cf_pq', block_size => 10, start_value => 6000000, max_value => 6999999);
SELECT distseq_create(repeat('l', 62) || '1', block_size => 10, start_value => 7000000, max_value => 7999999);
SELECT distseq_create(repeat('l', 62) || '2', block_size => 10, start_value => 8000000, max_value => 8999999);
CREATE FUNCTION cf_edge_want(n text) RETURNS int
LANGUAGE sql IMMUTABLE AS $$
	SELECT CASE n WHEN 'cf_p' THEN 5 WHEN 'cf_pq' THEN 6
		WHEN repeat('l', 62) || '1' THEN 7 WHEN repeat('l', 62) || '2' THEN 8 END
$$;
-- n and pad can be neither compressed nor moved, so the row is made to fit
-- by moving n_ext out of line and compressing n_main
CREATE TABLE cf_edge (i int, n text, n_main text, n_ext text, pad text);
ALTER TABLE cf_edge ALTER COLUMN n SET STORAGE PLAIN,
	ALTER COLUMN n_main SET STORAGE MAIN, ALTER COLUMN n_ext SET STORAGE EXTERNAL,
	ALTER COLUMN pad SET STORAGE PLAIN;
INSERT INTO cf_edge
SELECT i, n, n, n, repeat('x', 2100)
FROM unnest(ARRAY['cf_p', 'cf_pq', repeat('l', 62) || '1', repeat('l', 62) || '2',
				  'cf_pq', 'cf_p', repeat('l', 62) || '2', repeat('l', 62) || '1'])
	 WITH ORDINALITY AS u(n, i);
SELECT i, octet_length(n) AS len, pg_column_compression(n_main) AS main,
	   pg_column_size(n_ext) < octet_length(n_ext) + 1 AS ext_out_of_line
FROM cf_edge ORDER BY i;
CREATE OPERATOR @> (RIGHTARG = text, FUNCTION = distseq_nextval);
CREATE TABLE cf_edge_got (form text, i int, n text, v bigint);
INSERT INTO cf_edge_got SELECT 'column', i, n, distseq_nextval(n) FROM cf_edge ORDER BY i;
INSERT INTO cf_edge_got SELECT 'column compressed', i, n_main, distseq_nextval(n_main) FROM cf_edge ORDER BY i;
INSERT INTO cf_edge_got SELECT 'column out of line', i, n_ext, distseq_nextval(n_ext) FROM cf_edge ORDER BY i;
INSERT INTO cf_edge_got SELECT 'operator', i, n, @> n FROM cf_edge ORDER BY i;
DO $$
DECLARE
	r record;
	v bigint;
BEGIN
	FOR r IN SELECT i, n FROM cf_edge ORDER BY i LOOP
		v := distseq_nextval(r.n);
		INSERT INTO cf_edge_got VALUES ('plpgsql variable', r.i, r.n, v);
	END LOOP;
END
$$;
SELECT form, count(*) AS calls,
	   bool_and(v / 1000000 = cf_edge_want(n)) AS from_named_sequence
FROM cf_edge_got GROUP BY form ORDER BY form;
-- a row listed here drew from another sequence
SELECT form, i, n, v FROM cf_edge_got WHERE v / 1000000 <> cf_edge_want(n);

-- A role change between two calls of one call site in one transaction,
-- the site constant-named or not: the privilege is checked for the new
-- role (the name stays the same, so only the role can send the second
-- call to the privilege check)
CREATE FUNCTION cf_become(r text) RETURNS text
LANGUAGE sql AS $$ SELECT set_config('role', r, true) $$;
BEGIN;
SELECT g, cf_become(CASE g WHEN 1 THEN 'none' ELSE 'regress_cf_user' END) AS role,
	   distseq_nextval('cf_c') > 0 AS drew
FROM generate_series(1, 2) g;
ROLLBACK;
BEGIN;
SELECT g, cf_become(CASE g WHEN 1 THEN 'none' ELSE 'regress_cf_user' END) AS role,
	   distseq_nextval(n) > 0 AS drew
FROM generate_series(1, 2) g, (VALUES ('cf_c')) s(n);
ROLLBACK;
DO $$
DECLARE
	n text := 'cf_c';
	v bigint;
	who text := 'superuser';
BEGIN
	FOR i IN 1..2 LOOP
		BEGIN
			v := distseq_nextval('cf_c');
			RAISE WARNING 'constant site, %: drew', who;
		EXCEPTION WHEN insufficient_privilege THEN
			RAISE WARNING 'constant site, %: %', who, SQLERRM;
		END;
		BEGIN
			v := distseq_nextval(n);
			RAISE WARNING 'variable site, %: drew', who;
		EXCEPTION WHEN insufficient_privilege THEN
			RAISE WARNING 'variable site, %: %', who, SQLERRM;
		END;
		who := set_config('role', 'regress_cf_user', true);
	END LOOP;
END
$$;
RESET ROLE;
DROP OPERATOR @> (NONE, text);
DROP TABLE cf_edge, cf_edge_got;
DROP FUNCTION cf_edge_want, cf_become;
SELECT distseq_drop('cf_p');
SELECT distseq_drop('cf_pq');
SELECT distseq_drop(repeat('l', 62) || '1');
SELECT distseq_drop(repeat('l', 62) || '2');

--
-- A name that turns out not to exist is forgotten, and the memory it had
-- holds the next new name that the session looks up (nametab.c): the
-- expression that asked for the first must not find the second under the
-- first's name.  The expression's site hint keeps a copy of the name, so
-- it must go with the name.  A generic plan keeps the expression, and so
-- its hint, from one execution to the next.
--
SELECT distseq_create('cf_reused');
SET plan_cache_mode = force_generic_plan;
PREPARE cf_draw(text) AS SELECT distseq_nextval($1) > 0;
PREPARE cf_reuse AS SELECT distseq_nextval('cf_reused') > 0;
EXECUTE cf_draw('cf_never');
EXECUTE cf_reuse;
EXECUTE cf_draw('cf_never');
DEALLOCATE cf_draw;
DEALLOCATE cf_reuse;
RESET plan_cache_mode;
SELECT distseq_drop('cf_reused');

DROP VIEW cf_view, cf_view_c;
DROP TABLE cf_log, cf_names, cf_names_c, cf_names_nope, cf_trig, cf_copy,
	cf_default, cf_rule;
DROP FUNCTION cf_seq_of, cf_got, cf_trig_fill, cf_sql, cf_sql_noinline,
	cf_plpgsql, cf_plpgsql_const, cf_plpgsql_execute, cf_plpgsql_cursor;
SELECT distseq_drop('cf_a');
SELECT distseq_drop('cf_b');
SELECT distseq_drop('cf_c');
DROP ROLE regress_cf_user;
