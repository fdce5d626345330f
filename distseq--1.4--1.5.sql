/* distseq--1.4--1.5.sql */

\echo Use "ALTER EXTENSION distseq UPDATE TO '1.5'" to load this file. \quit

-- distseq_status: a sequence's open windows can hold more values than a
-- bigint counts (up to 2^64 - 2 from start_value -9223372036854775807 to
-- max_value 9223372036854775806), so window_values_left is a numeric, as
-- sum() of bigints is, and runway_seconds an unconstrained numeric: the
-- sum cast to bigint and numeric(20, 1) failed for every reader of the
-- view.  Every other column is bounded by the sequence's values or by
-- counters of this server.  Operators are named in pg_catalog, so that no
-- look-alike in a schema on the search_path is chosen when the view is
-- made.
DROP VIEW distseq_status;
CREATE VIEW distseq_status WITH (security_barrier) AS
SELECT s.sequence_name,
	   s.seqrel AS backing_sequence,
	   s.block_size,
	   p.segment_size,
	   p.pool_start,
	   p.pool_end,
	   p.prefetch_start,
	   p.prefetch_end,
	   COALESCE(w.open_windows, 0::pg_catalog.int8) AS open_windows,
	   COALESCE(w.values_left, 0::pg_catalog.numeric) AS window_values_left,
	   COALESCE(p.refills, 0::pg_catalog.int8) AS refills,
	   COALESCE(p.waits, 0::pg_catalog.int8) AS waits,
	   COALESCE(p.wait_time_ms, 0::pg_catalog.float8) AS wait_time_ms,
	   COALESCE(p.values_issued, s.values_issued) AS values_issued,
	   COALESCE(p.values_lost, s.values_lost) AS values_lost,
	   s.start_value,
	   s.max_value,
	   s.window_size,
	   s.min_open_windows,
	   s.stripes,
	   s.stripe,
	   s.servers,
	   p.values_per_second,
	   CASE WHEN p.values_per_second OPERATOR(pg_catalog.>) 0::pg_catalog.float8
		   THEN pg_catalog.round(COALESCE(w.values_left, 0::pg_catalog.numeric)
								 OPERATOR(pg_catalog./)
								 p.values_per_second::pg_catalog.numeric, 1)
	   END AS runway_seconds
FROM @extschema@.distseq_sequences s
LEFT JOIN @extschema@.distseq_pool_status() p
	   ON p.seqrel OPERATOR(pg_catalog.=) s.seqrel::pg_catalog.oid
	  AND p.generation OPERATOR(pg_catalog.=) s.generation
LEFT JOIN LATERAL (
	SELECT pg_catalog.count(*) AS open_windows,
		   pg_catalog.sum(w.window_end::pg_catalog.numeric
						  OPERATOR(pg_catalog.-) w.next_hi::pg_catalog.numeric) AS values_left
	FROM @extschema@.distseq_windows w
	WHERE w.sequence_name OPERATOR(pg_catalog.=) s.sequence_name
	  AND w.next_hi OPERATOR(pg_catalog.<) w.window_end
) w ON true
WHERE pg_catalog.has_sequence_privilege(s.seqrel::pg_catalog.oid, 'SELECT, USAGE, UPDATE');
GRANT SELECT ON distseq_status TO PUBLIC;
