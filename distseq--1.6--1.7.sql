/* distseq--1.6--1.7.sql */

\echo Use "ALTER EXTENSION distseq UPDATE TO '1.7'" to load this file. \quit

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
