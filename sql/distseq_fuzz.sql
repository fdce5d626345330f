-- runs alone too: the extension may not be there yet
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS distseq;
RESET client_min_messages;
--
-- Fuzz: a few hundred calls with hostile names and sizes at the limits,
-- from a fixed seed.  Each call runs in its own subtransaction and, when it
-- succeeds, commits; the outcomes are counted per function and SQLSTATE.
-- Then the catalog must still be consistent, the tables the injection
-- strings aim at must still exist, and the server must still be up.
--
SELECT setseed(0.42);

-- targets of the injection strings, and a table to convert columns of
CREATE TABLE x (v integer);
INSERT INTO x VALUES (1);
CREATE TABLE fuzz_canary (v text);
INSERT INTO fuzz_canary VALUES ('still here');
CREATE TABLE fuzz_tab (id integer, b bigint, s smallint, t text);
INSERT INTO fuzz_tab VALUES (100, 9223372036854775805, 32766, 'x');
CREATE TEMP TABLE fuzz_before AS SELECT sequence_name FROM distseq.distseq_sequences;
CREATE TABLE fuzz_outcome (op text, outcome text, problem text);

-- Limits grid first: every start_value x max_value pair of values at the
-- limits (NULL: the default).  Where creating succeeds, the values come
-- out as start_value, start_value + 1, ... exactly up to max_value.
CREATE TABLE fuzz_grid (sv bigint, mv bigint, created text, vals numeric[], err text);
DO $$
DECLARE
	bigs bigint[] := ARRAY[NULL, 0, -1, 1, 2, 1000, 2147483647, -2147483648,
		9223372036854775806, 9223372036854775807, -9223372036854775808];
	sv bigint;
	mv bigint;
	created text;
	vals numeric[];
	err text;
BEGIN
	FOREACH sv IN ARRAY bigs LOOP
		FOREACH mv IN ARRAY bigs LOOP
			vals := '{}';
			err := NULL;
			BEGIN
				PERFORM distseq_create('grid', 2, NULL, sv, mv, NULL);
				created := 'ok';
			EXCEPTION WHEN OTHERS THEN
				created := SQLSTATE;
			END;
			COMMIT;
			IF created = 'ok' THEN
				FOR k IN 1 .. 4 LOOP
					BEGIN
						vals := vals || distseq_nextval('grid')::numeric;
					EXCEPTION WHEN OTHERS THEN
						err := SQLSTATE;
						EXIT;
					END;
				END LOOP;
				PERFORM distseq_drop('grid');
			END IF;
			INSERT INTO fuzz_grid VALUES (sv, mv, created, vals, err);
			COMMIT;
		END LOOP;
	END LOOP;
END
$$;
SELECT created, count(*) FROM fuzz_grid GROUP BY 1 ORDER BY 1;
-- what differs from what must happen: lists nothing
SELECT sv, mv, created, vals, err
FROM (SELECT *, COALESCE(sv, 1)::numeric AS s, COALESCE(mv, 9223372036854775806)::numeric AS m
      FROM fuzz_grid) g
WHERE (created = 'ok') <> (s <= m AND m <= 9223372036854775806
                            AND s > -9223372036854775808 AND m > -9223372036854775808)
   OR (created = 'ok' AND
       (vals IS DISTINCT FROM ARRAY(SELECT s + k FROM generate_series(0, least(3, m - s)::integer) k)
        OR (err IS NOT NULL) <> (m - s < 3)
        OR err <> '2200H'))
ORDER BY 1, 2;
DROP TABLE fuzz_grid;

-- A name: one of a few hostile classics, or 0..80 random characters,
-- multibyte ones included
CREATE FUNCTION fuzz_name() RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	classics text[] := ARRAY['', ' ', '"', '''', ';', '\', '\\', '%s%n', 'x', 'X',
		'''); DROP TABLE x; --', '"; DROP TABLE x; --', '''; DROP TABLE fuzz_canary; --',
		'distseq.x', 'public.x', 'pg_catalog', 'distseq_sequences', 'a b', E'tab\there',
		E'new\nline', 'Ünïcödé', repeat('a', 63), repeat('a', 64), repeat('日', 21),
		repeat('日', 22), 'a' || repeat('日', 21), repeat('🙂', 15) || 'abc',
		repeat('🙂', 16)];
	alphabet text[] := ARRAY['a', 'b', 'Z', '0', '9', '_', ' ', '''', '"', ';', '\',
		'-', '(', ')', '.', '$', '%', 'é', '日', '🙂'];
	n integer;
	s text := '';
BEGIN
	IF random() < 0.4 THEN
		RETURN classics[1 + floor(random() * array_length(classics, 1))::integer];
	END IF;
	n := floor(random() * 81)::integer;
	FOR i IN 1 .. n LOOP
		s := s || alphabet[1 + floor(random() * array_length(alphabet, 1))::integer];
	END LOOP;
	RETURN s;
END
$$;

CREATE FUNCTION fuzz_pick(a anyarray) RETURNS anyelement
LANGUAGE sql AS $$ SELECT a[1 + floor(random() * array_length(a, 1))::integer] $$;

DO $$
DECLARE
	ints integer[] := ARRAY[NULL, 0, -1, 1, 2, 3, 100, 2147483647, -2147483648];
	bigs bigint[] := ARRAY[NULL, 0, -1, 1, 2, 1000, 2147483647, -2147483648,
		9223372036854775806, 9223372036854775807, -9223372036854775808];
	huge_windows bigint[] := ARRAY[0, -1, 9223372036854775806, 9223372036854775807];
	ops text[] := ARRAY['create', 'create', 'create', 'nextval', 'nextval', 'nextval',
		'currval', 'drop', 'drop', 'create_for_column', 'create_for_column', 'rejoin'];
	op text;
	nm text;
	last_created text := 'f1';
	tab text;
	col text;
	bs integer;
	ws bigint;
	sv bigint;
	mv bigint;
	mo integer;
	draws integer;
	cfc_name text;
	st text;
	msg text;
BEGIN
	FOR i IN 1 .. 500 LOOP
		op := fuzz_pick(ops);
		-- often the last name created, so that the calls meet real sequences
		nm := CASE WHEN random() < 0.3 THEN last_created
				   WHEN random() < 0.3 THEN fuzz_pick(ARRAY['f1', 'f2', 'f3'])
				   ELSE fuzz_name() END;
		-- each size: half the time its default, else a value at a limit
		bs := CASE WHEN random() < 0.5 THEN fuzz_pick(ints) END;
		ws := CASE WHEN random() < 0.5 THEN fuzz_pick(bigs) END;
		sv := CASE WHEN random() < 0.5 THEN fuzz_pick(bigs) END;
		mv := CASE WHEN random() < 0.5 THEN fuzz_pick(bigs) END;
		mo := CASE WHEN random() < 0.5
				   THEN fuzz_pick(ARRAY[0, -1, 1, 2, 3, 2147483647, -2147483648]) END;
		-- min_open_windows windows are created at once: keep their number small
		IF mo = 2147483647 THEN
			ws := fuzz_pick(huge_windows);
		END IF;
		tab := fuzz_pick(ARRAY['fuzz_tab', 'fuzz_tab', 'fuzz_tab', 'x', 'fuzz_canary', '0', fuzz_name()]);
		col := fuzz_pick(ARRAY['id', 'b', 's', 't', 'v', 'nope', 'ctid', 'xmin', fuzz_name()]);
		draws := 1 + floor(random() * 3)::integer;
		cfc_name := CASE WHEN random() < 0.5 THEN nm END;
		BEGIN
			CASE op
			WHEN 'create' THEN
				PERFORM distseq_create(nm, bs, ws, sv, mv, mo);
				last_created := nm;
			WHEN 'nextval' THEN
				PERFORM distseq_nextval(nm) FROM generate_series(1, draws);
			WHEN 'currval' THEN
				PERFORM distseq_currval(nm);
			WHEN 'drop' THEN
				PERFORM distseq_drop(nm);
			WHEN 'create_for_column' THEN
				SELECT distseq_create_for_column(CASE WHEN tab = '0' THEN 0::oid::regclass
														 ELSE tab::regclass END,
												 col::name,
												 cfc_name,
												 bs, ws, mv, mo)
				INTO nm;
				last_created := nm;
			WHEN 'rejoin' THEN
				PERFORM distseq_rejoin(nm);
			END CASE;
			st := 'ok';
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
			IF st LIKE 'XX%' OR st LIKE '58%' THEN
				RAISE NOTICE 'call % (%): internal error %', i, op, st;
			END IF;
			-- every message must be readable: valid UTF-8, nothing unset
			BEGIN
				PERFORM convert_to(msg, 'UTF8');
			EXCEPTION WHEN OTHERS THEN
				INSERT INTO fuzz_outcome VALUES (op, st, 'message is not valid UTF-8');
			END;
			IF msg = '' OR msg LIKE '%(null)%' THEN
				INSERT INTO fuzz_outcome VALUES (op, st, 'message without a name');
			END IF;
		END;
		INSERT INTO fuzz_outcome VALUES (op, st);
		COMMIT;
	END LOOP;
END
$$;

SELECT op, outcome, count(*) FROM fuzz_outcome WHERE problem IS NULL
GROUP BY 1, 2 ORDER BY 1, 2;
SELECT count(*) AS calls FROM fuzz_outcome WHERE problem IS NULL;
-- error messages that cannot be read: lists nothing
SELECT op, outcome, problem, count(*) FROM fuzz_outcome WHERE problem IS NOT NULL
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT count(*) AS created FROM distseq.distseq_sequences
WHERE sequence_name NOT IN (SELECT sequence_name FROM fuzz_before);

--
-- Consistency: each query lists what is wrong, so none returns a row.
--
-- every catalog row has its backing sequence in schema distseq, by the same name
SELECT s.sequence_name FROM distseq.distseq_sequences s
LEFT JOIN pg_class c ON c.oid = s.seqrel::oid
WHERE c.oid IS NULL OR c.relnamespace <> 'distseq'::regnamespace
   OR c.relname <> s.sequence_name OR c.relkind <> 'S';
-- and every other relation in schema distseq than distseq's own tables and
-- their indexes is the backing sequence of one
SELECT c.relname FROM pg_class c
WHERE c.relnamespace = 'distseq'::regnamespace
  AND NOT EXISTS (SELECT 1 FROM distseq.distseq_sequences s WHERE s.seqrel::oid = c.oid)
  AND NOT EXISTS (SELECT 1 FROM pg_depend d
                  WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'
                    AND d.refclassid = 'pg_extension'::regclass
                    AND d.objid = COALESCE((SELECT i.indrelid FROM pg_index i
                                            WHERE i.indexrelid = c.oid), c.oid));
-- windows of a sequence do not overlap
SELECT a.sequence_name, a.window_start, b.window_start
FROM distseq.distseq_windows a JOIN distseq.distseq_windows b
  ON a.sequence_name = b.sequence_name AND a.window_start < b.window_start
 AND b.window_start < a.window_end;
-- window_start <= next_hi <= window_end, and no open window is longer than
-- window_size (a closed row may merge several windows)
SELECT w.* FROM distseq.distseq_windows w JOIN distseq.distseq_sequences s USING (sequence_name)
WHERE NOT (w.window_start <= w.next_hi AND w.next_hi <= w.window_end)
   OR (w.next_hi < w.window_end AND w.window_end::numeric - w.window_start > s.window_size);
-- every window lies within start_value .. max_value + 1 (for striped
-- sequences, windows count slots, not values)
SELECT w.* FROM distseq.distseq_windows w JOIN distseq.distseq_sequences s USING (sequence_name)
WHERE COALESCE((to_jsonb(s) ->> 'stripes')::integer, 1) = 1
  AND (w.window_start < s.start_value OR w.window_end::numeric > s.max_value::numeric + 1);
-- what the windows say is reserved is what the counters say
SELECT s.sequence_name, s.values_reserved, s.values_released, w.reserved
FROM distseq.distseq_sequences s
LEFT JOIN (SELECT sequence_name, sum(next_hi::numeric - window_start) AS reserved
           FROM distseq.distseq_windows GROUP BY 1) w USING (sequence_name)
WHERE COALESCE(w.reserved, 0) <> s.values_reserved::numeric - s.values_released
   OR s.values_reserved < 0;
-- the status view still works, and shows every sequence
SELECT count(*) = (SELECT count(*) FROM distseq.distseq_sequences) AS status_complete
FROM distseq_status;
-- the injection strings reached no table
SELECT * FROM x;
SELECT * FROM fuzz_canary;
SELECT id, b, s, t FROM fuzz_tab;

-- a sequence made now works as ever
SELECT distseq_create('fuzz_after');
SELECT distseq_nextval('fuzz_after'), distseq_nextval('fuzz_after');

-- drop what the fuzz made
SELECT count(*) AS dropped FROM distseq.distseq_sequences s,
       LATERAL distseq_drop(s.sequence_name)
WHERE s.sequence_name NOT IN (SELECT sequence_name FROM fuzz_before);
SELECT count(*) FROM distseq.distseq_sequences
WHERE sequence_name NOT IN (SELECT sequence_name FROM fuzz_before);
SELECT count(*) FROM pg_class c WHERE c.relnamespace = 'distseq'::regnamespace
  AND c.relkind = 'S' AND c.relname NOT IN (SELECT sequence_name FROM fuzz_before);
DROP TABLE x, fuzz_canary, fuzz_tab, fuzz_outcome;
DROP FUNCTION fuzz_name();
DROP FUNCTION fuzz_pick(anyarray);
