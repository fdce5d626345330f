/* distseq--1.0--1.1.sql */

\echo Use "ALTER EXTENSION distseq UPDATE TO '1.1'" to load this file. \quit

-- Where each sequence's catalog lives: the server (system identifier and
-- timeline), the database and the backing relation.  When the worker finds
-- the catalog somewhere else -- restored from a dump, after pg_upgrade,
-- after a promotion or a point-in-time recovery -- the place it came from
-- may have reserved more than the copy says, so the worker skips every open
-- window and one more round above them ("rejoin").  NULL: not known yet
-- (sequences created by 1.0), recorded on the next refill.
ALTER TABLE distseq_sequences
	ADD COLUMN origin_system bigint,
	ADD COLUMN origin_database oid,
	ADD COLUMN origin_relation oid,
	ADD COLUMN origin_timeline bigint;

-- Force a rejoin at the next refill, for copies the worker cannot tell
-- apart (a file-level copy of the data directory, say).  Returns the number
-- of sequences marked.
CREATE FUNCTION distseq_rejoin(sequence_name text DEFAULT NULL)
RETURNS integer
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
	WITH marked AS (
		UPDATE @extschema@.distseq_sequences s SET origin_system = 0
		WHERE $1 IS NULL OR s.sequence_name = $1
		RETURNING 1)
	SELECT count(*)::integer FROM marked;
$$;
REVOKE ALL ON FUNCTION distseq_rejoin(text) FROM PUBLIC;
