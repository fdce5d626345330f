/* distseq--1.2--1.3.sql */

\echo Use "ALTER EXTENSION distseq UPDATE TO '1.3'" to load this file. \quit

-- Several servers ("nodes") share sequences.  Each node issues values from
-- its own windows; windows are allocated by a majority compare-and-set on
-- each sequence's high-water mark (hwm), the top of every range any node
-- ever won, kept on every member.  See README, "Several servers".

-- Peers are foreign servers of this wrapper; host and password live in
-- PostgreSQL's own catalogs (CREATE SERVER, CREATE USER MAPPING).
CREATE FUNCTION distseq_fdw_validator(text[], oid)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_fdw_validator'
LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER distseq VALIDATOR distseq_fdw_validator;

-- This node: its identity and its view of the membership.  (epoch,
-- epoch_id) names the membership in force; epoch_id makes two competing
-- proposals for the same epoch number distinct.  Not dumped: a restored
-- database is a new node.
-- origin_*: the server, timeline and database this node is.  A member
-- found anywhere else (restored from a backup, cloned, promoted) stops
-- taking part in its group: it may lag behind what it promised the others.
CREATE TABLE distseq_node (
	singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	node_id bigint NOT NULL,
	epoch bigint NOT NULL DEFAULT 0,
	epoch_id bigint NOT NULL DEFAULT 0,
	members bigint[] NOT NULL,
	origin_system bigint NOT NULL,
	origin_timeline bigint NOT NULL,
	origin_database oid NOT NULL
);
-- Every operator and function here matches a pg_catalog one exactly: one in
-- the extension's schema, which another role may be able to create in, never
-- wins (see PostgreSQL's "Security Considerations for Extension Scripts").
INSERT INTO @extschema@.distseq_node (node_id, members, origin_system, origin_timeline, origin_database)
SELECT id, ARRAY[id], s.system_identifier, c.timeline_id, d.oid
FROM (SELECT (pg_catalog.random() OPERATOR(pg_catalog.*) 9.2e18::pg_catalog.float8)::pg_catalog.int8
			 OPERATOR(pg_catalog.+) 1::pg_catalog.int8 AS id) r,
	 pg_catalog.pg_control_system() s, pg_catalog.pg_control_checkpoint() c,
	 pg_catalog.pg_database d
WHERE d.datname = pg_catalog.current_database();

-- On a node with peers, a sequence the agent keeps cannot be dropped: its
-- high-water mark here is part of every majority's memory.
CREATE OR REPLACE FUNCTION distseq_on_drop()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	shared text;
BEGIN
	SELECT s.sequence_name INTO shared
	FROM @extschema@.distseq_sequences s
	JOIN pg_catalog.pg_event_trigger_dropped_objects() d
	  ON d.classid = 'pg_catalog.pg_class'::regclass AND d.objid = s.seqrel::oid
	WHERE s.stripes = 1 AND s.servers IS NULL
	  AND (SELECT cardinality(members) FROM @extschema@.distseq_node) > 1
	LIMIT 1;
	IF shared IS NOT NULL THEN
		RAISE EXCEPTION 'cannot drop distseq sequence "%" on a node with peers', shared
			USING ERRCODE = 'object_in_use',
				  HINT = 'Its high-water mark here guards the windows of the other members.';
	END IF;
	DELETE FROM @extschema@.distseq_sequences s
	USING pg_catalog.pg_event_trigger_dropped_objects() d
	WHERE d.classid = 'pg_catalog.pg_class'::regclass
	  AND d.objid = s.seqrel::oid;
END
$$;

-- How this node reaches other members.
CREATE TABLE distseq_peer (
	server_name name PRIMARY KEY,
	node_id bigint NOT NULL UNIQUE,
	added_by oid NOT NULL
);

-- The largest mark of each sequence this node was told when it joined,
-- kept even for sequences it does not have yet: a sequence introduced here
-- later starts no lower.  Not dumped, as distseq_node.
CREATE TABLE distseq_seed (
	sequence_name text PRIMARY KEY,
	hwm bigint NOT NULL
);

REVOKE ALL ON distseq_node, distseq_peer, distseq_seed FROM PUBLIC;

-- The top of every window range won, in slots.  NULL: the highest window,
-- or the first slot when there is none.
ALTER TABLE distseq_sequences ADD COLUMN hwm bigint;

-- A sequence that holds no windows of its own draws from these servers, in
-- order, each reservation made there in that server's own transaction.
ALTER TABLE distseq_sequences ADD COLUMN servers name[];

DROP FUNCTION distseq_create(text, integer, bigint, bigint, bigint, integer, integer, integer);
CREATE FUNCTION distseq_create(sequence_name text,
							   block_size integer DEFAULT NULL,
							   window_size bigint DEFAULT 100000,
							   start_value bigint DEFAULT 1,
							   max_value bigint DEFAULT 9223372036854775806,
							   min_open_windows integer DEFAULT 2,
							   stripes integer DEFAULT 1,
							   stripe integer DEFAULT 0,
							   servers name[] DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_create'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION distseq_create(text, integer, bigint, bigint, bigint, integer, integer, integer, name[])
	FROM PUBLIC;

-- Functions peers call over libpq, each in its own transaction there.  They
-- run with the extension owner's rights; grant EXECUTE to the role peers
-- connect as (superusers need nothing).
CREATE FUNCTION distseq_peer_state(OUT node_id bigint, OUT epoch bigint,
								   OUT epoch_id bigint, OUT members bigint[])
AS 'MODULE_PATHNAME', 'distseq_peer_state'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION distseq_peer_hwm(sequence_name text, OUT hwm bigint,
								 OUT epoch bigint, OUT epoch_id bigint)
AS 'MODULE_PATHNAME', 'distseq_peer_hwm'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION distseq_peer_cas(sequence_name text, epoch bigint, epoch_id bigint,
								 expected bigint, new_hwm bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'distseq_peer_cas'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION distseq_peer_epoch_cas(epoch bigint, epoch_id bigint,
									   new_epoch bigint, new_epoch_id bigint,
									   new_members bigint[],
									   OUT sequence_name text, OUT hwm bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'distseq_peer_epoch_cas'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION distseq_peer_adopt(epoch bigint, epoch_id bigint,
								   members bigint[], sequence_names text[],
								   hwms bigint[])
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_peer_adopt'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION distseq_peer_sequences(OUT sequence_name text, OUT block_size integer,
									   OUT window_size bigint, OUT start_value bigint,
									   OUT max_value bigint, OUT min_open_windows integer,
									   OUT has_windows boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'distseq_peer_sequences'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION distseq_peer_create(sequence_name text, block_size integer,
									window_size bigint, start_value bigint,
									max_value bigint, min_open_windows integer,
									hwm bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'distseq_peer_create'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

CREATE FUNCTION distseq_peer_reserve(sequence_name text, count bigint,
									 OUT lo bigint, OUT hi bigint)
AS 'MODULE_PATHNAME', 'distseq_peer_reserve'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION distseq_peer_reserve(text, bigint), distseq_peer_state(), distseq_peer_hwm(text),
	distseq_peer_cas(text, bigint, bigint, bigint, bigint),
	distseq_peer_epoch_cas(bigint, bigint, bigint, bigint, bigint[]),
	distseq_peer_adopt(bigint, bigint, bigint[], text[], bigint[]),
	distseq_peer_sequences(), distseq_peer_create(text, integer, bigint, bigint, bigint, integer, bigint)
	FROM PUBLIC;

-- Administration, not for PUBLIC.
CREATE FUNCTION distseq_add_peer(server_name name)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_add_peer'
LANGUAGE C STRICT;

CREATE FUNCTION distseq_remove_peer(server_name name)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_remove_peer'
LANGUAGE C STRICT;

CREATE FUNCTION distseq_maintain(OUT sequence_name text, OUT windows_created integer,
								 OUT open_windows bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'distseq_maintain'
LANGUAGE C;

REVOKE ALL ON FUNCTION distseq_add_peer(name), distseq_remove_peer(name),
	distseq_maintain() FROM PUBLIC;

-- Per peer: reachable or not, its membership epoch, its open windows and
-- values left of each sequence.
CREATE FUNCTION distseq_peer_status(OUT server_name name, OUT node_id bigint,
									OUT reachable boolean, OUT error text,
									OUT epoch bigint, OUT members integer,
									OUT open_windows bigint, OUT runway_seconds numeric)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'distseq_peer_status'
LANGUAGE C;
REVOKE ALL ON FUNCTION distseq_peer_status() FROM PUBLIC;

CREATE VIEW distseq_peers AS SELECT * FROM distseq_peer_status();
REVOKE ALL ON distseq_peers FROM PUBLIC;

-- The pool's rate, for the runway: how long the open windows last.
DROP VIEW distseq_status;
DROP FUNCTION distseq_pool_status();
CREATE FUNCTION distseq_pool_status(
	OUT seqrel oid, OUT generation bigint, OUT segment_size bigint,
	OUT pool_start bigint, OUT pool_end bigint,
	OUT prefetch_start bigint, OUT prefetch_end bigint,
	OUT returned_values bigint, OUT refill_pending boolean,
	OUT refills bigint, OUT waits bigint, OUT wait_time_ms double precision,
	OUT values_issued bigint, OUT values_lost bigint,
	OUT values_per_second double precision)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'distseq_pool_status'
LANGUAGE C VOLATILE;

-- security_barrier: a function in the caller's WHERE clause must not see
-- hidden rows.  The runway divides float8 by float8: "bigint / double
-- precision" has no exact operator in pg_catalog, so one that another role
-- created in this schema would have been bound into the view, and run by
-- every reader.
CREATE VIEW distseq_status WITH (security_barrier) AS
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
	   s.stripe,
	   s.servers,
	   p.values_per_second,
	   (COALESCE(w.values_left, 0)::pg_catalog.float8
		OPERATOR(pg_catalog./) NULLIF(p.values_per_second, 0::pg_catalog.float8))::numeric(20, 1)
		   AS runway_seconds
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
GRANT SELECT ON distseq_status TO PUBLIC;

ALTER VIEW distseq_blocks SET (security_barrier);
