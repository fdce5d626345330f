/* distseq--1.3--1.4.sql: membership changes in two phases; removing members */

\echo Use "ALTER EXTENSION distseq UPDATE TO '1.4'" to load this file. \quit

-- A member moved into a new membership takes no part in it (no vote, no
-- window) until the change is active here: pending.  While pending,
-- proposer is the node whose change it is, and prev_* the membership it
-- came from, to go back to if that change is abandoned before it was
-- decided.
ALTER TABLE distseq_node
	ADD COLUMN made_windows boolean NOT NULL DEFAULT false,
	ADD COLUMN pending boolean NOT NULL DEFAULT false,
	ADD COLUMN proposer bigint,
	ADD COLUMN prev_epoch bigint,
	ADD COLUMN prev_epoch_id bigint,
	ADD COLUMN prev_members bigint[];

-- made_windows: this node made windows of a sequence the agent keeps while
-- it was never in a group, so it cannot join one.
UPDATE @extschema@.distseq_node SET made_windows = EXISTS (
	SELECT 1 FROM @extschema@.distseq_windows w JOIN @extschema@.distseq_sequences s USING (sequence_name)
	WHERE s.stripes = 1 AND s.servers IS NULL);

-- On a node that has ever been in a group, a sequence the agent keeps
-- cannot be dropped: its high-water mark here is part of the group's memory.
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
	  AND (SELECT epoch > 0 OR cardinality(members) > 1 FROM @extschema@.distseq_node)
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

-- The changes this node proposed and decided: a row is written in the
-- transaction that moves this node into the new membership, so a change is
-- decided exactly when its row exists.  finished: active on every member.
-- Not dumped, as distseq_node.
CREATE TABLE distseq_change (
	epoch bigint NOT NULL,
	epoch_id bigint NOT NULL,
	prev_epoch bigint NOT NULL,
	prev_epoch_id bigint NOT NULL,
	members bigint[] NOT NULL,
	prev_members bigint[] NOT NULL,
	finished boolean NOT NULL DEFAULT false,
	PRIMARY KEY (epoch, epoch_id)
);
REVOKE ALL ON distseq_change FROM PUBLIC;

-- The nodes of the group a sequence drawing from other servers found them
-- in: a server outside it is refused (its values could repeat theirs).
ALTER TABLE distseq_sequences ADD COLUMN server_nodes bigint[];

DROP VIEW distseq_peers;
DROP FUNCTION distseq_peer_status();
DROP FUNCTION distseq_peer_state();
DROP FUNCTION distseq_peer_epoch_cas(bigint, bigint, bigint, bigint, bigint[]);
DROP FUNCTION distseq_peer_adopt(bigint, bigint, bigint[], text[], bigint[]);

CREATE FUNCTION distseq_peer_state(OUT node_id bigint, OUT epoch bigint,
								   OUT epoch_id bigint, OUT members bigint[],
								   OUT pending boolean)
AS 'MODULE_PATHNAME', 'distseq_peer_state'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Phase one of a change: move from one membership to another, pending.
-- node_id, here and below: the node the caller means, not another one
-- installed at the same address.
CREATE FUNCTION distseq_peer_epoch_cas(epoch bigint, epoch_id bigint,
									   new_epoch bigint, new_epoch_id bigint,
									   new_members bigint[], proposer bigint,
									   node_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_peer_epoch_cas'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Phase one on a fresh node that joins.
CREATE FUNCTION distseq_peer_join(new_epoch bigint, new_epoch_id bigint,
								  new_members bigint[], proposer bigint,
								  node_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_peer_join'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Go back from a pending membership that was never decided.
CREATE FUNCTION distseq_peer_revert(epoch bigint, epoch_id bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'distseq_peer_revert'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Was this change, proposed here, decided?  Waits for a change in flight.
CREATE FUNCTION distseq_peer_decided(epoch bigint, epoch_id bigint, proposer bigint)
RETURNS boolean
AS 'MODULE_PATHNAME', 'distseq_peer_decided'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Every high-water mark, from a node that has left the old membership.
CREATE FUNCTION distseq_peer_marks(epoch bigint, epoch_id bigint,
								   OUT sequence_name text, OUT hwm bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'distseq_peer_marks'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Phase two: raise the marks and take part in the new membership.
-- node_id: the node the caller means.
CREATE FUNCTION distseq_peer_activate(epoch bigint, epoch_id bigint,
									  prev_epoch bigint, prev_epoch_id bigint,
									  members bigint[], sequence_names text[],
									  hwms bigint[], node_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_peer_activate'
LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

REVOKE ALL ON FUNCTION distseq_peer_state(),
	distseq_peer_epoch_cas(bigint, bigint, bigint, bigint, bigint[], bigint, bigint),
	distseq_peer_join(bigint, bigint, bigint[], bigint, bigint),
	distseq_peer_revert(bigint, bigint), distseq_peer_decided(bigint, bigint, bigint),
	distseq_peer_marks(bigint, bigint),
	distseq_peer_activate(bigint, bigint, bigint, bigint, bigint[], text[], bigint[], bigint)
	FROM PUBLIC;

-- On a promoted synchronous standby of a member: take the member's place.
-- Only if every commit of the old primary waited for this standby, and the
-- old primary never comes back.
CREATE FUNCTION distseq_accept_promotion()
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_accept_promotion'
LANGUAGE C;
REVOKE ALL ON FUNCTION distseq_accept_promotion() FROM PUBLIC;

-- pending: the peer is in a membership change that is not active there yet
CREATE FUNCTION distseq_peer_status(OUT server_name name, OUT node_id bigint,
									OUT reachable boolean, OUT error text,
									OUT epoch bigint, OUT members integer,
									OUT open_windows bigint, OUT runway_seconds numeric,
									OUT pending boolean)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'distseq_peer_status'
LANGUAGE C;
REVOKE ALL ON FUNCTION distseq_peer_status() FROM PUBLIC;

CREATE VIEW distseq_peers AS SELECT * FROM distseq_peer_status();
REVOKE ALL ON distseq_peers FROM PUBLIC;
