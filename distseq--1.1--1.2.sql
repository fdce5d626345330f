/* distseq--1.1--1.2.sql */

\echo Use "ALTER EXTENSION distseq UPDATE TO '1.2'" to load this file. \quit

-- Striped sequences: this server issues only the values congruent to stripe
-- modulo stripes, with no coordination with the servers that issue the
-- other stripes.  Windows, pools and blocks count slots: slot s is the value
-- s * stripes + stripe.
ALTER TABLE distseq_sequences
	ADD COLUMN stripes integer NOT NULL DEFAULT 1 CHECK (stripes > 0),
	ADD COLUMN stripe integer NOT NULL DEFAULT 0,
	ADD CHECK (stripe >= 0 AND stripe < stripes);

DROP FUNCTION distseq_create(text, integer, bigint, bigint, bigint, integer);
CREATE FUNCTION distseq_create(sequence_name text,
							   block_size integer DEFAULT NULL,
							   window_size bigint DEFAULT 100000,
							   start_value bigint DEFAULT 1,
							   max_value bigint DEFAULT 9223372036854775806,
							   min_open_windows integer DEFAULT 2,
							   stripes integer DEFAULT 1,
							   stripe integer DEFAULT 0)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_create'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION distseq_create(text, integer, bigint, bigint, bigint, integer, integer, integer)
	FROM PUBLIC;

-- values_left counts values, not slots
CREATE OR REPLACE VIEW distseq_blocks AS
SELECT b.pid,
	   s.sequence_name,
	   b.block_next,
	   b.block_end,
	   (b.block_end - b.block_next + s.stripes - 1) / s.stripes AS values_left
FROM distseq_block_status() b
JOIN distseq_sequences s
	   ON b.seqrel = s.seqrel::oid AND b.generation = s.generation
WHERE pg_catalog.has_sequence_privilege(s.seqrel::oid, 'SELECT, USAGE, UPDATE');

CREATE OR REPLACE VIEW distseq_status AS
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
	   s.min_open_windows,
	   s.stripes,
	   s.stripe
FROM @extschema@.distseq_sequences s
LEFT JOIN @extschema@.distseq_pool_status() p
	   ON p.seqrel = s.seqrel::oid AND p.generation = s.generation
LEFT JOIN LATERAL (
	SELECT count(*) AS open_windows,
		   sum(w.window_end - w.next_hi)::bigint AS values_left
	FROM @extschema@.distseq_windows w
	WHERE w.sequence_name = s.sequence_name AND w.next_hi < w.window_end
) w ON true
WHERE pg_catalog.has_sequence_privilege(s.seqrel::oid, 'SELECT, USAGE, UPDATE');
