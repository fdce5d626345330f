/* distseq--1.6--1.7.sql */

\echo Use "ALTER EXTENSION distseq UPDATE TO '1.7'" to load this file. \quit

-- As in 1.5 and 1.6, every operator and function of general SQL here is
-- named in pg_catalog: this script runs as a superuser with the
-- installation schema first in search_path, where another role may have
-- created look-alikes.

---------------------------------------------------------------------------
-- Owned by a column (owned_by of distseq_create(); distseq_create_for_column()
-- links always): the backing sequence depends on the column as a serial
-- column's sequence does, so that DROP TABLE and ALTER TABLE DROP COLUMN
-- drop it.
---------------------------------------------------------------------------

-- distseq_create() takes owned_by.  A function cannot gain a parameter in
-- place: it is created anew, and the EXECUTE an administrator granted on
-- the old one is granted on the new one.  The old one moves out of the way
-- first, to schema distseq, which only the installing superuser owns, so
-- that its grants can be read from it after the new one exists.
ALTER FUNCTION @extschema@.distseq_create(pg_catalog.text, pg_catalog.int4, pg_catalog.int8,
										  pg_catalog.int8, pg_catalog.int8, pg_catalog.int4,
										  pg_catalog.int4, pg_catalog.int4, pg_catalog.name[],
										  pg_catalog.bool)
	SET SCHEMA distseq;

-- owned_by: 'table.column' or 'schema.table.column', as in ALTER SEQUENCE
-- OWNED BY; the new sequence belongs to the table's owner
CREATE FUNCTION @extschema@.distseq_create(sequence_name pg_catalog.text,
										   block_size pg_catalog.int4 DEFAULT NULL,
										   window_size pg_catalog.int8 DEFAULT 100000,
										   start_value pg_catalog.int8 DEFAULT 1,
										   max_value pg_catalog.int8 DEFAULT 9223372036854775806,
										   min_open_windows pg_catalog.int4 DEFAULT 2,
										   stripes pg_catalog.int4 DEFAULT 1,
										   stripe pg_catalog.int4 DEFAULT 0,
										   servers pg_catalog.name[] DEFAULT NULL,
										   if_not_exists pg_catalog.bool DEFAULT false,
										   owned_by pg_catalog.text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_create'
LANGUAGE C VOLATILE;

-- Configuration changes are not for everybody: a superuser grants them.
REVOKE ALL ON FUNCTION
	@extschema@.distseq_create(pg_catalog.text, pg_catalog.int4, pg_catalog.int8, pg_catalog.int8,
							   pg_catalog.int8, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4,
							   pg_catalog.name[], pg_catalog.bool, pg_catalog.text)
	FROM PUBLIC;

-- Grant again what was granted on the old function.  A grant made by a
-- role holding the grant option is made again in the owner's name.  GRANT
-- in an extension's script also records the privileges as the extension's
-- own in pg_init_privs, which pg_dump leaves out: put back what the REVOKE
-- above recorded, so that the grants stay the administrator's and pg_dump
-- keeps them.
DO $$
DECLARE
	old_oid pg_catalog.oid := ('distseq.distseq_create(pg_catalog.text, pg_catalog.int4,'
		' pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.int4, pg_catalog.int4,'
		' pg_catalog.int4, pg_catalog.name[], pg_catalog.bool)')::pg_catalog.regprocedure::pg_catalog.oid;
	new_name pg_catalog.text := '@extschema@.distseq_create(pg_catalog.text, pg_catalog.int4,'
		' pg_catalog.int8, pg_catalog.int8, pg_catalog.int8, pg_catalog.int4, pg_catalog.int4,'
		' pg_catalog.int4, pg_catalog.name[], pg_catalog.bool, pg_catalog.text)';
	new_oid pg_catalog.oid := new_name::pg_catalog.regprocedure::pg_catalog.oid;
	g record;
	init pg_catalog.aclitem[];
BEGIN
	SELECT p.initprivs INTO init
	FROM pg_catalog.pg_init_privs p
	WHERE p.objoid OPERATOR(pg_catalog.=) new_oid
	  AND p.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
	  AND p.objsubid OPERATOR(pg_catalog.=) 0;

	FOR g IN
		SELECT a.grantee, a.is_grantable
		FROM pg_catalog.pg_proc o, pg_catalog.aclexplode(o.proacl) a
		WHERE o.oid OPERATOR(pg_catalog.=) old_oid
		  AND a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'::pg_catalog.text
		  AND a.grantee OPERATOR(pg_catalog.<>) o.proowner
		ORDER BY a.is_grantable DESC, a.grantee
	LOOP
		EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s',
			new_name,
			CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'::pg_catalog.text
				 ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)::pg_catalog.text) END,
			CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION'::pg_catalog.text ELSE ''::pg_catalog.text END);
	END LOOP;

	UPDATE pg_catalog.pg_init_privs p SET initprivs = init
	WHERE p.objoid OPERATOR(pg_catalog.=) new_oid
	  AND p.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
	  AND p.objsubid OPERATOR(pg_catalog.=) 0;
END
$$;

DROP FUNCTION distseq.distseq_create(pg_catalog.text, pg_catalog.int4, pg_catalog.int8,
									 pg_catalog.int8, pg_catalog.int8, pg_catalog.int4,
									 pg_catalog.int4, pg_catalog.int4, pg_catalog.name[],
									 pg_catalog.bool);

-- The event trigger forgets a distseq sequence whatever command drops its
-- backing relation: with a column that owns it, DROP TABLE, ALTER TABLE
-- DROP COLUMN, DROP TYPE ... CASCADE and more, not only the three commands
-- it listed.  Its function is unchanged.
DROP EVENT TRIGGER distseq_on_drop;
CREATE EVENT TRIGGER distseq_on_drop ON sql_drop
	EXECUTE FUNCTION distseq.distseq_on_drop();


-- ---- Settling a membership change whose proposer is lost (issue 12) ----
--
-- The changes proposed from one membership are one instance of consensus.
-- Phase one, as before, is its round 0; any member settles the instance
-- with a prepare and an accept round at a ballot (round >= 1, the node's
-- id) above every ballot it saw: it finishes the change that may have been
-- decided, or abandons them all for a no-op change (change.c,
-- change_settle; test/model/allocator_sim.c, "Settling a change").
--
-- promised_*: the highest ballot this node promised in the instance it is
-- in (of its membership, or of the one it is pending from); a node that
-- promised takes no further step of round 0.  accepted_*: the ballot at
-- which it took its pending change, 0 for round 0 (only a step of round 0
-- goes back).  Both are 0 again once it is active in a new membership.
ALTER TABLE distseq.distseq_node
	ADD COLUMN promised_round bigint NOT NULL DEFAULT 0,
	ADD COLUMN promised_node bigint NOT NULL DEFAULT 0,
	ADD COLUMN accepted_round bigint NOT NULL DEFAULT 0,
	ADD COLUMN accepted_node bigint NOT NULL DEFAULT 0;

-- A promise for the instance of membership (epoch, epoch_id), with the
-- change this node took, if any.  answer: 'promise'; 'decided' (this node
-- is active in the membership after that one: its change was decided);
-- 'refused' (a ballot as high was promised); 'elsewhere'.  node_id: the
-- node the caller means.
CREATE FUNCTION distseq.distseq_peer_prepare(epoch bigint, epoch_id bigint, round bigint,
											 settler bigint, node_id bigint,
											 OUT answer text, OUT promised_round bigint,
											 OUT promised_node bigint, OUT accepted_round bigint,
											 OUT accepted_node bigint, OUT pending boolean, OUT change_epoch bigint,
											 OUT change_epoch_id bigint, OUT members bigint[])
RETURNS record
AS 'MODULE_PATHNAME', 'distseq_peer_prepare'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Take a change from membership (epoch, epoch_id), pending, at a ballot at
-- least as high as any promised here.
CREATE FUNCTION distseq.distseq_peer_accept(epoch bigint, epoch_id bigint, round bigint,
											settler bigint, new_epoch bigint,
											new_epoch_id bigint, new_members bigint[],
											node_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'distseq_peer_accept'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION
	distseq.distseq_peer_prepare(bigint, bigint, bigint, bigint, bigint),
	distseq.distseq_peer_accept(bigint, bigint, bigint, bigint, bigint, bigint, bigint[], bigint)
	FROM PUBLIC;

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

-- ---- distseq_alter (issue 13, item 3) ----

-- Change a live sequence, as ALTER SEQUENCE does: the parameters that are
-- not NULL.  Needs ownership of the backing sequence (checked in C); with
-- peers, every member applies it, or the call fails.  Not in a transaction
-- block.
CREATE FUNCTION @extschema@.distseq_alter(sequence_name pg_catalog.text,
										  block_size pg_catalog.int8 DEFAULT NULL,
										  window_size pg_catalog.int8 DEFAULT NULL,
										  max_value pg_catalog.int8 DEFAULT NULL,
										  min_open_windows pg_catalog.int8 DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_alter'
LANGUAGE C VOLATILE;

-- A member's part of it, called by peers: how far this server reserved the
-- sequence, and with "apply", the new parameters applied here first.
CREATE FUNCTION distseq.distseq_peer_alter(sequence_name pg_catalog.text, block_size pg_catalog.int8,
										   window_size pg_catalog.int8, max_value pg_catalog.int8,
										   min_open_windows pg_catalog.int8, apply pg_catalog.bool)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'distseq_peer_alter'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION distseq.distseq_peer_alter(pg_catalog.text, pg_catalog.int8, pg_catalog.int8,
												  pg_catalog.int8, pg_catalog.int8, pg_catalog.bool)
	FROM PUBLIC;
