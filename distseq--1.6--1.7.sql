/* distseq--1.6--1.7.sql */

\echo Use "ALTER EXTENSION distseq UPDATE TO '1.7'" to load this file. \quit

-- ---- distseq_setval (issue 13, item 2) ----

-- Move a sequence forward: from now on no server hands out a value at or
-- below "value".  Returns "value", as setval().  Needs UPDATE on the backing
-- sequence, as setval() does (checked in C); with peers, every member
-- applies it, or the call fails.  Not in a transaction block.
CREATE FUNCTION @extschema@.distseq_setval(sequence_name pg_catalog.text, value pg_catalog.int8)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'distseq_setval'
LANGUAGE C STRICT VOLATILE;

-- A member's part of it, called by peers: how far this server reserved the
-- sequence, and with "apply", the floor applied here first.
CREATE FUNCTION distseq.distseq_peer_setval(sequence_name pg_catalog.text, value pg_catalog.int8,
											apply pg_catalog.bool)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'distseq_peer_setval'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION distseq.distseq_peer_setval(pg_catalog.text, pg_catalog.int8, pg_catalog.bool)
	FROM PUBLIC;
