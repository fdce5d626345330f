/* distseq--1.4--1.5.sql: internal objects move to schema distseq */

\echo Use "ALTER EXTENSION distseq UPDATE TO '1.5'" to load this file. \quit

-- The catalog tables and the functions nobody calls by hand move from the
-- schema the extension was installed in (public, usually) to schema
-- distseq, next to the backing sequences.  distseq made that schema at
-- CREATE EXTENSION, which fails if it exists already, so it is owned by the
-- installing superuser: no other role can rename it, create in it or take
-- it over.  The installation schema is often owned by the database's owner
-- (public is, from PostgreSQL 15 on), who could rename it and put
-- look-alikes of the tables in a new one of the same name, to be read and
-- written by distseq's SECURITY DEFINER functions and event trigger; and
-- tools that work on it (logical replication of a whole schema, schema
-- diffs of ORMs, pg_dump -n public) no longer meet distseq's tables.
--
-- Every operator in general SQL here is OPERATOR(pg_catalog.x) and every
-- function pg_catalog-qualified: this script runs as a superuser with the
-- installation schema first in search_path, where another role may have
-- created a better-matching one (PostgreSQL's "Security Considerations for
-- Extension Scripts").

-- A distseq sequence named like a table moving here, or like one of their
-- indexes, holds that name in schema distseq (its backing sequence).
DO $$
DECLARE
	clash text;
BEGIN
	WITH moving AS (
		SELECT c.oid, c.relname
		FROM pg_catalog.pg_class c
		JOIN pg_catalog.pg_extension e
		  ON c.relnamespace OPERATOR(pg_catalog.=) e.extnamespace
		WHERE e.extname OPERATOR(pg_catalog.=) 'distseq'::pg_catalog.name
		  AND c.relname OPERATOR(pg_catalog.=) ANY ('{distseq_sequences,distseq_windows,distseq_node,distseq_peer,distseq_seed,distseq_change}'::pg_catalog.name[])
	), names AS (
		SELECT m.relname FROM moving m
		UNION ALL
		SELECT i.relname
		FROM pg_catalog.pg_index x
		JOIN pg_catalog.pg_class i ON i.oid OPERATOR(pg_catalog.=) x.indexrelid
		JOIN moving m ON m.oid OPERATOR(pg_catalog.=) x.indrelid
	)
	SELECT pg_catalog.string_agg(pg_catalog.quote_ident(c.relname::pg_catalog.text), ', '::pg_catalog.text
								 ORDER BY c.relname)
	INTO clash
	FROM pg_catalog.pg_class c
	JOIN names n ON n.relname OPERATOR(pg_catalog.=) c.relname
	WHERE c.relnamespace OPERATOR(pg_catalog.=) 'distseq'::pg_catalog.regnamespace::pg_catalog.oid;

	IF clash IS NOT NULL THEN
		RAISE EXCEPTION 'cannot move distseq''s tables into schema "distseq": it holds relations of their names: %', clash
			USING ERRCODE = 'duplicate_object',
				  DETAIL = 'A distseq sequence is backed by a sequence of its name in schema "distseq".',
				  HINT = 'Move the users of those distseq sequences to sequences of other names, drop them with distseq_drop(), and update again.';
	END IF;
END
$$;

ALTER TABLE @extschema@.distseq_sequences SET SCHEMA distseq;
ALTER TABLE @extschema@.distseq_windows SET SCHEMA distseq;
ALTER TABLE @extschema@.distseq_node SET SCHEMA distseq;
ALTER TABLE @extschema@.distseq_peer SET SCHEMA distseq;
ALTER TABLE @extschema@.distseq_seed SET SCHEMA distseq;
ALTER TABLE @extschema@.distseq_change SET SCHEMA distseq;

ALTER FUNCTION @extschema@.distseq_fdw_validator(text[], oid) SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_on_drop() SET SCHEMA distseq;

-- The functions peers call, with the rights of the extension's owner, as
-- the role of a user mapping (a superuser, often): a peer names them with
-- their schema, which must not be one that the database's owner may rename
-- and fill with look-alikes, or create overloads in that a call with
-- untyped parameters would pick.
ALTER FUNCTION @extschema@.distseq_peer_state() SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_peer_hwm(text) SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_peer_cas(text, bigint, bigint, bigint, bigint) SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_peer_epoch_cas(bigint, bigint, bigint, bigint, bigint[], bigint, bigint)
	SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_peer_join(bigint, bigint, bigint[], bigint, bigint) SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_peer_revert(bigint, bigint) SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_peer_decided(bigint, bigint, bigint) SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_peer_marks(bigint, bigint) SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_peer_activate(bigint, bigint, bigint, bigint, bigint[], text[], bigint[], bigint)
	SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_peer_sequences() SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_peer_create(text, integer, bigint, bigint, bigint, integer, bigint)
	SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_peer_reserve(text, bigint) SET SCHEMA distseq;

-- The event trigger's function reads the tables where they are now.
CREATE OR REPLACE FUNCTION distseq.distseq_on_drop()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	shared text;
BEGIN
	SELECT s.sequence_name INTO shared
	FROM distseq.distseq_sequences s
	JOIN pg_catalog.pg_event_trigger_dropped_objects() d
	  ON d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = s.seqrel::oid
	WHERE s.stripes = 1 AND s.servers IS NULL
	  AND (SELECT epoch > 0 OR cardinality(members) > 1 FROM distseq.distseq_node)
	LIMIT 1;
	IF shared IS NOT NULL THEN
		RAISE EXCEPTION 'cannot drop distseq sequence "%" on a node with peers', shared
			USING ERRCODE = 'object_in_use',
				  HINT = 'Its high-water mark here guards the windows of the other members.';
	END IF;
	DELETE FROM distseq.distseq_sequences s
	USING pg_catalog.pg_event_trigger_dropped_objects() d
	WHERE d.classid = 'pg_catalog.pg_class'::regclass
	  AND d.objid = s.seqrel::oid;
END
$$;

CREATE OR REPLACE FUNCTION @extschema@.distseq_rejoin(sequence_name text DEFAULT NULL)
RETURNS integer
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$
	WITH marked AS (
		UPDATE distseq.distseq_sequences s SET origin_system = 0
		WHERE $1 IS NULL OR s.sequence_name = $1
		RETURNING 1)
	SELECT count(*)::integer FROM marked;
$$;

-- The views again, with nothing in them that a look-alike operator or
-- function could capture: views installed by older scripts may have bound
-- one (an exact "/"(bigint, double precision) in the installation schema,
-- say), which every reader would run.
-- distseq_status: a sequence's open windows can hold more values than a
-- bigint counts (up to 2^64 - 2 from start_value -9223372036854775807 to
-- max_value 9223372036854775806), so window_values_left is a numeric, as
-- sum() of bigints is, and runway_seconds an unconstrained numeric: the
-- sum cast to bigint and numeric(20, 1) failed for every reader of the
-- view.  Every other column is bounded by the sequence's values or by
-- counters of this server.  Operators are named in pg_catalog, so that no
-- look-alike in a schema on the search_path is chosen when the view is
-- made.
DROP VIEW @extschema@.distseq_status;
CREATE VIEW @extschema@.distseq_status WITH (security_barrier) AS
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
FROM distseq.distseq_sequences s
LEFT JOIN @extschema@.distseq_pool_status() p
	   ON p.seqrel OPERATOR(pg_catalog.=) s.seqrel::pg_catalog.oid
	  AND p.generation OPERATOR(pg_catalog.=) s.generation
LEFT JOIN LATERAL (
	SELECT pg_catalog.count(*) AS open_windows,
		   pg_catalog.sum(w.window_end::pg_catalog.numeric
						  OPERATOR(pg_catalog.-) w.next_hi::pg_catalog.numeric) AS values_left
	FROM distseq.distseq_windows w
	WHERE w.sequence_name OPERATOR(pg_catalog.=) s.sequence_name
	  AND w.next_hi OPERATOR(pg_catalog.<) w.window_end
) w ON true
WHERE pg_catalog.has_sequence_privilege(s.seqrel::pg_catalog.oid, 'SELECT, USAGE, UPDATE'::pg_catalog.text);
GRANT SELECT ON @extschema@.distseq_status TO PUBLIC;

CREATE OR REPLACE VIEW @extschema@.distseq_blocks WITH (security_barrier) AS
SELECT b.pid,
	   s.sequence_name,
	   b.block_next,
	   b.block_end,
	   (b.block_end OPERATOR(pg_catalog.-) b.block_next OPERATOR(pg_catalog.+) s.stripes
		OPERATOR(pg_catalog.-) 1) OPERATOR(pg_catalog./) s.stripes AS values_left
FROM @extschema@.distseq_block_status() b
JOIN distseq.distseq_sequences s
	   ON b.seqrel OPERATOR(pg_catalog.=) s.seqrel::pg_catalog.oid
	  AND b.generation OPERATOR(pg_catalog.=) s.generation
WHERE pg_catalog.has_sequence_privilege(s.seqrel::pg_catalog.oid, 'SELECT, USAGE, UPDATE'::pg_catalog.text);

-- What distseq_peers shows of this node: its open windows and shortest
-- runway, as distseq_status shows them to the caller.  Peers read them here
-- rather than in the view, whose schema the database's owner may rename:
-- the body is bound to the view when it is created, not looked up by name.
CREATE FUNCTION distseq.distseq_peer_runway(OUT open_windows numeric, OUT runway_seconds numeric)
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
BEGIN ATOMIC
	SELECT pg_catalog.sum(s.open_windows), pg_catalog.min(s.runway_seconds)
	FROM @extschema@.distseq_status s;
END;
