--
-- DISCARD forgets a session's currval where it does for native sequences:
-- DISCARD SEQUENCES and DISCARD ALL, not DISCARD TEMP or PLANS.  A pooler
-- (PgBouncer's server_reset_query = DISCARD ALL) must not hand one
-- client's currval to the next on the same backend.  Each step shows the
-- native sequence next to the distseq one.
--
CREATE EXTENSION IF NOT EXISTS distseq;
SELECT distseq_create('dc_seq', block_size => 10);
CREATE SEQUENCE dc_native;

-- currval of both, or how it failed
CREATE FUNCTION dc_currvals(OUT native text, OUT distseq text)
LANGUAGE plpgsql AS $$
BEGIN
	BEGIN
		native := currval('dc_native') > 0;
	EXCEPTION WHEN OTHERS THEN
		native := SQLSTATE;
	END;
	BEGIN
		distseq := distseq_currval('dc_seq') > 0;
	EXCEPTION WHEN OTHERS THEN
		distseq := SQLSTATE;
	END;
END
$$;

SELECT * FROM dc_currvals();
SELECT nextval('dc_native') > 0 AS native, distseq_nextval('dc_seq') > 0 AS distseq;
DISCARD TEMP;
SELECT * FROM dc_currvals();
DISCARD PLANS;
SELECT * FROM dc_currvals();
DISCARD SEQUENCES;
SELECT * FROM dc_currvals();

SELECT nextval('dc_native') > 0 AS native, distseq_nextval('dc_seq') > 0 AS distseq;
DISCARD ALL;
SELECT * FROM dc_currvals();

-- inside a transaction block: DISCARD SEQUENCES runs, DISCARD ALL refuses
-- and leaves currval as it was
BEGIN;
SELECT nextval('dc_native') > 0 AS native, distseq_nextval('dc_seq') > 0 AS distseq;
DISCARD SEQUENCES;
SELECT * FROM dc_currvals();
COMMIT;
SELECT nextval('dc_native') > 0 AS native, distseq_nextval('dc_seq') > 0 AS distseq;
BEGIN;
DISCARD ALL;
ROLLBACK;
SELECT * FROM dc_currvals();

-- a prepared call and a call site cached before DISCARD ALL draw on, and
-- values keep coming from the block the backend held: none twice
CREATE TABLE dc_got (v bigint);
PREPARE dc_draw AS INSERT INTO dc_got SELECT distseq_nextval('dc_seq');
EXECUTE dc_draw;
DISCARD ALL;
PREPARE dc_draw AS INSERT INTO dc_got SELECT distseq_nextval('dc_seq');
EXECUTE dc_draw;
SELECT * FROM dc_currvals();
INSERT INTO dc_got SELECT distseq_nextval('dc_seq') FROM generate_series(1, 25);
SELECT count(*), count(DISTINCT v) FROM dc_got;
DEALLOCATE dc_draw;

-- in a function, as natively: DISCARD ALL refuses and leaves currval,
-- DISCARD SEQUENCES forgets it, even in a subtransaction rolled back
CREATE FUNCTION dc_discard(what text) RETURNS void
LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'DISCARD ' || what; END $$;
SELECT dc_discard('ALL');
SELECT * FROM dc_currvals();
SELECT dc_discard('SEQUENCES');
SELECT * FROM dc_currvals();
SELECT nextval('dc_native') > 0 AS native, distseq_nextval('dc_seq') > 0 AS distseq;
DO $$
BEGIN
	BEGIN
		DISCARD SEQUENCES;
		RAISE EXCEPTION 'undo';
	EXCEPTION WHEN raise_exception THEN
		NULL;
	END;
END
$$;
SELECT * FROM dc_currvals();

-- RESET ALL and SET SESSION AUTHORIZATION (what poolers send besides)
-- keep it, and a role without the right may not read it
SELECT nextval('dc_native') > 0 AS native, distseq_nextval('dc_seq') > 0 AS distseq;
RESET ALL;
SELECT * FROM dc_currvals();
CREATE ROLE regress_dc_other;
SET SESSION AUTHORIZATION regress_dc_other;
SELECT * FROM dc_currvals();
RESET SESSION AUTHORIZATION;
SELECT * FROM dc_currvals();
DROP ROLE regress_dc_other;

DROP TABLE dc_got;
DROP FUNCTION dc_discard(text);
DROP FUNCTION dc_currvals();
DROP SEQUENCE dc_native;
SELECT distseq_drop('dc_seq');
