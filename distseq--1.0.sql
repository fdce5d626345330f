/* distseq--1.0.sql */

\echo Use "CREATE EXTENSION distseq" to load this file. \quit

-- Each distseq sequence is backed by a native sequence relation in this
-- schema: it carries the owner, the privileges (GRANT USAGE ON SEQUENCE),
-- the schema-wide name and pg_dump of the sequence.  Its own value is not
-- used.
CREATE SCHEMA distseq;
GRANT USAGE ON SCHEMA distseq TO PUBLIC;

CREATE TABLE distseq_sequences (
	sequence_name text PRIMARY KEY,
	seqrel regclass NOT NULL UNIQUE,
	generation bigint NOT NULL,
	block_size integer NOT NULL CHECK (block_size > 0),
	window_size bigint NOT NULL CHECK (window_size > 0),
	min_open_windows integer NOT NULL CHECK (min_open_windows > 0),
	start_value bigint NOT NULL,
	max_value bigint NOT NULL CHECK (max_value < 9223372036854775807),
	values_reserved bigint NOT NULL DEFAULT 0,
	values_released bigint NOT NULL DEFAULT 0,
	values_issued bigint NOT NULL DEFAULT 0,
	values_lost bigint NOT NULL DEFAULT 0,
	CHECK (start_value <= max_value)
);

-- hi-lo windows: values window_start .. window_end - 1; values below next_hi
-- are reserved.  A window is open while next_hi < window_end.
CREATE TABLE distseq_windows (
	sequence_name text NOT NULL
		REFERENCES distseq_sequences ON UPDATE CASCADE ON DELETE CASCADE,
	window_start bigint NOT NULL,
	window_end bigint NOT NULL,
	next_hi bigint NOT NULL,
	PRIMARY KEY (sequence_name, window_start),
	CHECK (window_start < window_end),
	CHECK (next_hi BETWEEN window_start AND window_end)
);
CREATE INDEX distseq_windows_open ON distseq_windows (sequence_name, window_start)
	WHERE next_hi < window_end;

REVOKE ALL ON distseq_sequences, distseq_windows FROM PUBLIC;

SELECT pg_catalog.pg_extension_config_dump('distseq_sequences', '');
SELECT pg_catalog.pg_extension_config_dump('distseq_windows', '');

CREATE FUNCTION distseq_create(sequence_name text,
							   block_size integer DEFAULT NULL,
							   window_size bigint DEFAULT 100000,
							   start_value bigint DEFAULT 1,
							   max_value bigint DEFAULT 9223372036854775806,
							   min_open_windows integer DEFAULT 2)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_create'
LANGUAGE C VOLATILE;

CREATE FUNCTION distseq_create_for_column(tab regclass, col name,
										  sequence_name text DEFAULT NULL,
										  block_size integer DEFAULT NULL,
										  window_size bigint DEFAULT 100000,
										  max_value bigint DEFAULT NULL,
										  min_open_windows integer DEFAULT 2)
RETURNS text
AS 'MODULE_PATHNAME', 'distseq_create_for_column'
LANGUAGE C VOLATILE;

CREATE FUNCTION distseq_drop(sequence_name text)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_drop'
LANGUAGE C VOLATILE;

CREATE FUNCTION distseq_nextval(sequence_name text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'distseq_nextval'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION distseq_currval(sequence_name text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'distseq_currval'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;

-- Configuration changes are not for everybody: a superuser grants them.
REVOKE ALL ON FUNCTION distseq_create(text, integer, bigint, bigint, bigint, integer),
	distseq_create_for_column(regclass, name, text, integer, bigint, bigint, integer),
	distseq_drop(text)
	FROM PUBLIC;

CREATE FUNCTION distseq_pool_status(
	OUT seqrel oid, OUT generation bigint, OUT segment_size bigint,
	OUT pool_start bigint, OUT pool_end bigint,
	OUT prefetch_start bigint, OUT prefetch_end bigint,
	OUT returned_values bigint, OUT refill_pending boolean,
	OUT refills bigint, OUT waits bigint, OUT wait_time_ms double precision,
	OUT values_issued bigint, OUT values_lost bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'distseq_pool_status'
LANGUAGE C VOLATILE;

CREATE FUNCTION distseq_block_status(
	OUT pid integer, OUT seqrel oid, OUT generation bigint,
	OUT block_next bigint, OUT block_end bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'distseq_block_status'
LANGUAGE C VOLATILE;


-- One row per sequence the caller may use or see.
CREATE VIEW distseq_status AS
SELECT s.sequence_name,
	   s.seqrel AS backing_sequence,
	   s.block_size,
	   p.segment_size,
	   p.pool_start,
	   p.pool_end,
	   p.prefetch_start,
	   p.prefetch_end,
	   COALESCE(w.open_windows, 0) AS open_windows,
	   COALESCE(w.values_left, 0) AS window_values_left,
	   COALESCE(p.refills, 0) AS refills,
	   COALESCE(p.waits, 0) AS waits,
	   COALESCE(p.wait_time_ms, 0) AS wait_time_ms,
	   COALESCE(p.values_issued, s.values_issued) AS values_issued,
	   COALESCE(p.values_lost, s.values_lost) AS values_lost,
	   s.start_value,
	   s.max_value,
	   s.window_size,
	   s.min_open_windows
FROM distseq_sequences s
LEFT JOIN distseq_pool_status() p
	   ON p.seqrel = s.seqrel::oid AND p.generation = s.generation
LEFT JOIN LATERAL (
	SELECT count(*) AS open_windows,
		   sum(w.window_end - w.next_hi)::bigint AS values_left
	FROM distseq_windows w
	WHERE w.sequence_name = s.sequence_name AND w.next_hi < w.window_end
) w ON true
WHERE pg_catalog.has_sequence_privilege(s.seqrel::oid, 'SELECT, USAGE, UPDATE');

-- The block each backend holds, one row per backend and sequence.
CREATE VIEW distseq_blocks AS
SELECT b.pid,
	   s.sequence_name,
	   b.block_next,
	   b.block_end,
	   b.block_end - b.block_next AS values_left
FROM distseq_block_status() b
JOIN distseq_sequences s
	   ON b.seqrel = s.seqrel::oid AND b.generation = s.generation
WHERE pg_catalog.has_sequence_privilege(s.seqrel::oid, 'SELECT, USAGE, UPDATE');

GRANT SELECT ON distseq_status, distseq_blocks TO PUBLIC;

-- DROP SEQUENCE distseq.x (or DROP OWNED) forgets the distseq sequence too.
CREATE FUNCTION distseq_on_drop()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	DELETE FROM @extschema@.distseq_sequences s
	USING pg_catalog.pg_event_trigger_dropped_objects() d
	WHERE d.classid = 'pg_catalog.pg_class'::regclass
	  AND d.objid = s.seqrel::oid;
END
$$;
REVOKE ALL ON FUNCTION distseq_on_drop() FROM PUBLIC;

CREATE EVENT TRIGGER distseq_on_drop ON sql_drop
	WHEN TAG IN ('DROP SEQUENCE', 'DROP SCHEMA', 'DROP OWNED')
	EXECUTE FUNCTION distseq_on_drop();
