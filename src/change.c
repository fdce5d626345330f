/*-------------------------------------------------------------------------
 *
 * change.c
 *	  Changing the membership of a group of nodes: a fresh node joins, a
 *	  member leaves.  Two phases, run by the refill worker of the node that
 *	  proposes the change, and the recovery of a change that a crash or a
 *	  lost peer left half done.  This is the proposer's side: the step each
 *	  node takes is member.c's, which peers reach through peer.c.
 *
 * A change moves the group from membership E0 to E1: the epoch number one
 * higher, with a random epoch_id so that two proposals never look alike.
 * distseq_add_peer() and distseq_remove_peer() hand it to this database's
 * worker and wait: each step below commits in a transaction of its own.
 *
 * Phase one moves members from E0 to E1, pending: a pending node refuses
 * every compare-and-set of a high-water mark, of any epoch.  A joining node
 * moves first, and only if it is fresh (never in a group, no window of its
 * own); from then on it cannot make a window on its own.  Every member of
 * E0 is asked, the leaving one too; the proposal goes on only if a
 * majority of E0 moved, so of two proposals made at once from E0 at most
 * one goes on, and no window can be won in E0 any more.  The proposer
 * moves itself last, in the transaction that also records the change in
 * its distseq_change: that commit decides the change.  A proposal that
 * fails before is put back on the members it moved; a member left pending
 * by a proposal whose proposer died asks the proposer, which answers once
 * no change is in flight there, and goes back to E0 if the change was
 * never decided.
 *
 * Phase two collects every high-water mark from members that have left
 * E0, at least as many as make any majority of E0 share a node with them:
 * every window won in E0 was won on a majority of E0, so the largest marks
 * collected lie above all of them.  Each member of E1 raises its marks to
 * those and becomes active in E1 (a member that missed phase one, or more
 * than one change, moves straight from where it is, unless that is epoch
 * 0, that of nodes never in a group).  Only active members vote, so every
 * window won in E1 lies above every window won in E0.  The proposer's worker repeats phase two until
 * every member of E1 is active, or a later change supersedes it.
 *
 * A change whose proposer is lost is settled by any member from 1.7
 * (settle.c): the changes from E0 are one instance of consensus, phase one
 * its round 0, and the member runs the two rounds of Paxos with a ballot
 * on a majority of E0, finishing the change that may have been decided or
 * abandoning them all for a no-op change.
 *
 * A member that leaves takes no part in E1: it keeps serving its open
 * windows and never wins a window again (only it is left in E0).  One that
 * could not hear of it learns it when it is back (distseq_change_learn);
 * once it knows, it may join again as a fresh node does.  The members
 * forget its server as they become active in E1.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"

/*
 * Phase one, and the decision.  Moves every member of the current
 * membership it can reach, this node last with the record of the change,
 * in this transaction; puts the others back if fewer than a majority moved.
 */
static void
change_propose(const char *schema, DistseqNodeState *st, int64 *members, int nmembers,
			   DistseqPeer *joiner)
{
	DistseqChange c;
	List	   *moved = NIL;
	int			nmoved = 1;		/* this node, at the end */
	char	   *first_error = NULL;
	ListCell   *lc;

	/* a node out of its group proposes nothing to it: it is no member */
	if (!distseq_is_member(st, st->node_id))
		distseq_not_member_error(schema, st);
	/* registering the server of a member is fine meanwhile (change_recover) */
	if (st->pending)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this distseq node is in a membership change that is not active here yet"),
				 errhint("Its proposer finishes it, or abandons it; distseq_peers shows the members.")));

	c.prev_epoch = st->epoch;
	c.prev_epoch_id = st->epoch_id;
	c.epoch = st->epoch + 1;
	do
	{
		if (!pg_strong_random(&c.epoch_id, sizeof(c.epoch_id)))
			elog(ERROR, "could not generate a random number");
		c.epoch_id &= PG_INT64_MAX;
	} while (c.epoch_id == 0);
	c.members = members;
	c.nmembers = nmembers;
	c.prev = st->members;
	c.nprev = st->nmembers;

	/* the joiner first: it must be fresh, and stays so no longer */
	if (joiner)
	{
		(void) distseq_call_join(joiner, &c, st->node_id, joiner->node_id, NULL);
		moved = lappend(moved, joiner);
	}

	for (int i = 0; i < st->nmembers; i++)
	{
		DistseqPeer *peer;
		char	   *error = NULL;

		if (st->members[i] == st->node_id)
			continue;
		peer = distseq_client_or_error(schema, st->members[i], &error);
		if (peer && distseq_call_move(peer, &c, st->node_id, st->members[i], &error))
		{
			moved = lappend(moved, peer);
			nmoved++;
		}
		else if (first_error == NULL)
			first_error = error;
	}

	if (nmoved >= distseq_majority(st->nmembers))
	{
		distseq_member_move(schema, c.prev_epoch, c.prev_epoch_id, c.epoch, c.epoch_id,
							distseq_int8_array(members, nmembers), st->node_id,
							st->node_id, false);
		distseq_member_record_change(schema, &c);
		return;
	}

	foreach(lc, moved)
	{
		char	   *ignored;

		(void) distseq_call_revert(lfirst(lc), c.epoch, c.epoch_id, &ignored);
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not change the distseq membership: %d of %d members agreed, %d needed",
					nmoved, st->nmembers, distseq_majority(st->nmembers)),
			 first_error ? errdetail_internal("%s", first_error) : 0,
			 errhint("A majority of the members must be reachable from this node, each with a server added by distseq_add_peer().")));
}

/* Collect marks from one member; false if it could not give them */
static bool
collect_marks(const char *schema, DistseqNodeState *st, int64 node_id, DistseqChange *c,
			  List **marks, char **error)
{
	DistseqPeer *peer;

	if (node_id == st->node_id)
	{
		*marks = list_concat(*marks, distseq_member_marks(schema, c->epoch, c->epoch_id,
														  CurrentMemoryContext));
		return true;
	}
	return (peer = distseq_client_or_error(schema, node_id, error)) != NULL &&
		distseq_call_marks(peer, c->epoch, c->epoch_id, marks, error);
}

/* The largest mark of each sequence, as a text[] of names and a bigint[] */
static void
marks_arrays(List *marks, Datum *name_array, Datum *hwm_array)
{
	List	   *merged = NIL;
	ListCell   *lc;
	Datum	   *nd;
	int64	   *hv;
	int			k = 0;

	foreach(lc, marks)
	{
		DistseqMark *m = lfirst(lc);
		ListCell   *lc2;
		bool		found = false;

		foreach(lc2, merged)
		{
			DistseqMark *g = lfirst(lc2);

			if (strcmp(g->name, m->name) == 0)
			{
				g->hwm = Max(g->hwm, m->hwm);
				found = true;
				break;
			}
		}
		if (!found)
		{
			DistseqMark *g = palloc(sizeof(DistseqMark));

			*g = *m;
			merged = lappend(merged, g);
		}
	}

	nd = palloc(sizeof(Datum) * Max(list_length(merged), 1));
	hv = palloc(sizeof(int64) * Max(list_length(merged), 1));
	foreach(lc, merged)
	{
		DistseqMark *m = lfirst(lc);

		nd[k] = CStringGetTextDatum(m->name);
		hv[k] = m->hwm;
		k++;
	}
	*name_array = PointerGetDatum(construct_array(nd, k, TEXTOID, -1, false, TYPALIGN_INT));
	*hwm_array = distseq_int8_array(hv, k);
}

/*
 * Phase two of the change decided here that is not finished, if any.
 * Returns NULL when there is none left, or why it is not finished.  SPI
 * connected.
 */
static char *
change_finish(const char *schema)
{
	DistseqNodeState st;
	DistseqChange c;
	bool		isnull;
	List	   *marks = NIL;
	int			got = 0;
	char	   *error = NULL;
	Datum		args[8];
	int			failed = 0;

	distseq_spi_exec(psprintf("SELECT epoch, epoch_id, prev_epoch, prev_epoch_id, members,"
							  " prev_members FROM %s.distseq_change WHERE NOT finished", schema),
					 0, NULL, NULL, SPI_OK_SELECT);
	if (SPI_processed == 0)
		return NULL;
	c.epoch = distseq_spi_int8(0, 1);
	c.epoch_id = distseq_spi_int8(0, 2);
	c.prev_epoch = distseq_spi_int8(0, 3);
	c.prev_epoch_id = distseq_spi_int8(0, 4);
	c.members = distseq_int8_values(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5,
										   &isnull), &c.nmembers);
	c.prev = distseq_int8_values(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6,
										&isnull), &c.nprev);
	distseq_node_state(schema, &st);

	/* another node's change has moved this one on: nothing left to do */
	if (st.epoch != c.epoch || st.epoch_id != c.epoch_id)
	{
		distseq_member_changes_finished(schema);
		return NULL;
	}

	/* enough marks that every majority of the former membership is seen */
	for (int i = 0; i < c.nprev; i++)
	{
		if (collect_marks(schema, &st, c.prev[i], &c, &marks, &error))
			got++;
	}
	if (got < c.nprev - distseq_majority(c.nprev) + 1)
		return psprintf("only %d of the %d former members gave their high-water marks%s%s",
						got, c.nprev, error ? ": " : "", error ? error : "");
	marks_arrays(marks, &args[5], &args[6]);

	for (int i = 0; i < c.nmembers; i++)
	{
		DistseqPeer *peer;

		if (c.members[i] == st.node_id)
			continue;
		if ((peer = distseq_client_or_error(schema, c.members[i], &error)) == NULL ||
			!distseq_call_activate(peer, &c, args[5], args[6], c.members[i], &error))
			failed++;
	}
	args[0] = Int64GetDatum(c.epoch);
	args[1] = Int64GetDatum(c.epoch_id);
	args[2] = Int64GetDatum(c.prev_epoch);
	args[3] = Int64GetDatum(c.prev_epoch_id);
	args[4] = distseq_int8_array(c.members, c.nmembers);
	args[7] = Int64GetDatum(st.node_id);
	distseq_member_activate(schema, args);
	if (failed > 0)
		return psprintf("%d of the %d members are not active in the new membership yet: %s",
						failed, c.nmembers, error);
	distseq_member_changes_finished(schema);
	return NULL;
}

/*
 * Out of a decided change that left this node out: active in nothing, it
 * keeps the membership that left it out, and in "proposer" who said so
 * (distseq_not_member_error).  SPI connected.
 */
static void
change_left_out(const char *schema, DistseqNodeState *st)
{
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(st->epoch), Int64GetDatum(st->epoch_id)};

	distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET pending = false, prev_epoch = NULL,"
							  " prev_epoch_id = NULL, prev_members = NULL"
							  " WHERE epoch = $1 AND epoch_id = $2 AND pending"
							  "   AND node_id <> ALL (members)", schema),
					 2, types, values, SPI_OK_UPDATE);
	if (SPI_processed == 1)
		ereport(LOG,
				(errmsg("distseq membership " INT64_FORMAT " proposed by node " INT64_FORMAT " was decided without this server; it is no longer a member of the group",
						st->epoch, st->proposer)));
}

/*
 * A member left pending by a change another node proposed: if the proposer
 * says the change was never decided, go back.  If it was decided, the
 * proposer activates this node; or, if the change left this node out, it
 * is out for good and waits for no one: no longer pending, so that the
 * members do not show it pending, and so that it may join again.  Returns
 * why nothing could be done, or NULL.  SPI connected.
 */
static char *
change_recover(const char *schema, DistseqNodeState *st)
{
	DistseqPeer *peer;
	char	   *error = NULL;
	bool		decided;

	if (!st->pending || st->proposer == st->node_id)
		return NULL;
	/* a change taken on by a settling member waits for it, or another */
	if (distseq_member_settles())
	{
		distseq_spi_exec(psprintf("SELECT 1 FROM %s.distseq_node WHERE accepted_round > 0", schema),
						 0, NULL, NULL, SPI_OK_SELECT);
		if (SPI_processed == 1)
			return NULL;
	}
	if ((peer = distseq_client_or_error(schema, st->proposer, &error)) == NULL ||
		!distseq_call_decided(peer, st->epoch, st->epoch_id, st->proposer, &decided, &error))
		return psprintf("could not ask the proposer of membership " INT64_FORMAT ": %s",
						st->epoch, error);
	if (decided && !distseq_is_member(st, st->node_id))
	{
		change_left_out(schema, st);
		return NULL;
	}
	if (decided)
		return NULL;
	if (distseq_member_revert(schema, st->epoch, st->epoch_id))
		ereport(LOG,
				(errmsg("distseq membership " INT64_FORMAT " proposed by node " INT64_FORMAT " was abandoned; this node is back in the membership before it",
						st->epoch, st->proposer)));
	return NULL;
}

/*
 * A member removed while it could not hear of it learns so when it is
 * back: the agent (agent.c) found a majority of the members it knows
 * active in later memberships that leave it out.  A member is active in a
 * membership only once its change was decided, and nothing makes this node
 * a member again but a join, which would have changed this row: so it is
 * out.  A stale member is in no later membership, and fewer than a
 * majority of them, hostile or not, cannot say so.  This node takes the
 * newest of those memberships, as a member removed while reachable holds
 * the one that left it out, with the member that answered with it in
 * "proposer" (distseq_not_member_error).  Returns false if this node's
 * view changed meanwhile.  SPI connected.
 */
bool
distseq_change_learn(const char *schema, DistseqNodeState *st, int64 epoch, int64 epoch_id,
					 const int64 *members, int nmembers, int64 informant)
{
	Oid			types[6] = {INT8OID, INT8OID, INT8OID, INT8OID, INT8ARRAYOID, INT8OID};
	Datum		values[6];

	/* version 1.3 keeps no more than the membership: nothing to learn */
	if (!distseq_catalog().changes)
		return false;
	distseq_node_verify(schema);
	values[0] = Int64GetDatum(st->epoch);
	values[1] = Int64GetDatum(st->epoch_id);
	values[2] = Int64GetDatum(epoch);
	values[3] = Int64GetDatum(epoch_id);
	values[4] = distseq_int8_array((int64 *) members, nmembers);
	values[5] = Int64GetDatum(informant);
	/* the update waits for compare-and-sets in flight here, as a change's */
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET epoch = $3, epoch_id = $4, members = $5,"
							  " pending = false, proposer = $6, prev_epoch = NULL,"
							  " prev_epoch_id = NULL, prev_members = NULL"
							  " WHERE epoch = $1 AND epoch_id = $2 AND NOT pending AND $3 > epoch"
							  "   AND node_id = ANY (members) AND node_id <> ALL ($5)", schema),
					 6, types, values, SPI_OK_UPDATE);
	if (SPI_processed != 1)
		return false;
	ereport(LOG,
			(errmsg("distseq: this server is no longer a member of its group: a majority of the members of membership " INT64_FORMAT " are in later ones without it, node " INT64_FORMAT " in membership " INT64_FORMAT,
					st->epoch, informant, epoch)));
	return true;
}

/*
 * Finish what a change left undone here: phase two of one this node
 * decided, or going back from one that was abandoned.  In the worker, at
 * the start of every agent pass; problems are logged, and retried at the
 * next pass.
 */
typedef struct FinishTry
{
	char	   *problem;
} FinishTry;

static void
finish_try(void *arg)
{
	((FinishTry *) arg)->problem = change_finish(distseq_catalog_schema());
}

static void
resume_finish(void *arg)
{
	char	   *problem = change_finish(distseq_catalog_schema());

	if (problem)
		ereport(LOG, (errmsg("distseq membership change not finished: %s", problem)));
}

static void
resume_recover(void *arg)
{
	const char *schema = distseq_catalog_schema();
	DistseqNodeState st;
	char	   *problem;

	distseq_node_state(schema, &st);
	if ((problem = change_recover(schema, &st)) != NULL)
		ereport(LOG, (errmsg("distseq: %s", problem)));
}

void
distseq_change_resume(void)
{
	char	   *error = NULL;

	distseq_xact_begin();
	distseq_spi_connect();
	if (distseq_catalog().changes)
	{
		/* one failing does not keep the other, nor the agent, from its work */
		if (!distseq_remote_try(resume_finish, NULL, &error))
			ereport(LOG, (errmsg("distseq membership change not finished: %s", error)));
		if (!distseq_remote_try(resume_recover, NULL, &error))
			ereport(LOG, (errmsg("distseq: %s", error)));
	}
	SPI_finish();
	distseq_xact_commit();
}

/* Add a peer; true if a fresh node is joining */
static bool
change_add(const char *schema, DistseqNodeState *st, const char *server_name, Oid userid)
{
	ForeignServer *server = GetForeignServerByName(server_name, false);
	DistseqPeer peer;
	DistseqNodeState its;
	bool		has_windows;
	bool		fresh;
	bool		in_own;
	int64	   *members;
	Oid			types[3] = {TEXTOID, INT8OID, INT8OID};
	Datum		values[3];

	memset(&peer, 0, sizeof(peer));
	peer.serverid = server->serverid;
	peer.added_by = userid;
	strlcpy(peer.name, server_name, NAMEDATALEN);
	distseq_call_candidate(&peer, &its, &has_windows);
	peer.node_id = its.node_id;
	in_own = distseq_is_member(&its, peer.node_id);
	/* never in a group and no window; or out of the group it was in */
	fresh = !its.pending &&
		((its.epoch == 0 && its.nmembers == 1 && in_own && !has_windows) ||
		 (its.epoch > 0 && !in_own));
	if (peer.node_id == st->node_id)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("server \"%s\" is this node itself", server_name)));

	values[0] = CStringGetTextDatum(server_name);
	values[1] = Int64GetDatum(peer.node_id);
	values[2] = Int64GetDatum((int64) userid);
	distseq_spi_exec(psprintf("INSERT INTO %s.distseq_peer (server_name, node_id, added_by)"
							  " VALUES ($1, $2, $3::oid)"
							  " ON CONFLICT (server_name) DO UPDATE"
							  " SET node_id = EXCLUDED.node_id, added_by = EXCLUDED.added_by",
							  schema),
					 3, types, values, SPI_OK_INSERT);
	if (distseq_is_member(st, peer.node_id))
		return false;

	if (!fresh)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("server \"%s\" cannot join: it is not a fresh node", server_name),
				 errdetail("A node joins only before it has peers or windows of its own, or once it knows it is no longer a member of its group, so that no value it issued can collide."),
				 errhint("A member removed while it was unreachable learns it when it is back and reaches a majority of the members it knew; its distseq_maintain() then says it is no longer a member.")));
	members = palloc(sizeof(int64) * (st->nmembers + 1));
	memcpy(members, st->members, sizeof(int64) * st->nmembers);
	members[st->nmembers] = peer.node_id;
	change_propose(schema, st, members, st->nmembers + 1, &peer);
	return true;
}

/* Remove a peer; true if a member is leaving */
static bool
change_remove(const char *schema, DistseqNodeState *st, const char *server_name)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(server_name)};
	int64		node_id;
	int64	   *members;
	int			n = 0;

	distseq_spi_exec(psprintf("SELECT node_id FROM %s.distseq_peer WHERE server_name = $1", schema),
					 1, types, values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("server \"%s\" is not a distseq peer of this node", server_name)));
	node_id = distseq_spi_int8(0, 1);
	/* out of its group, a node has no members to remove: it forgets */
	if (distseq_is_member(st, node_id) && distseq_is_member(st, st->node_id))
	{
		members = palloc(sizeof(int64) * st->nmembers);
		for (int i = 0; i < st->nmembers; i++)
			if (st->members[i] != node_id)
				members[n++] = st->members[i];
		change_propose(schema, st, members, n, NULL);
		/* its server is forgotten when the change is finished */
		return true;
	}
	distseq_spi_exec(psprintf("DELETE FROM %s.distseq_peer WHERE server_name = $1", schema),
					 1, types, values, SPI_OK_DELETE);
	return false;
}

/*
 * Run a change that distseq_add_peer() or distseq_remove_peer() asked for,
 * in the worker, outside any transaction.  Returns NULL, or (in "cxt") why
 * the change is decided but not active on every member yet.
 */
char *
distseq_change_run(char op, const char *server_name, Oid userid, MemoryContext cxt)
{
	const char *schema;
	DistseqNodeState st;
	bool		changed;
	char	   *unfinished = NULL;
	bool		settle;
	char	   *problem;

	/* a change from this membership left half done: settle it first */
	distseq_xact_begin();
	distseq_spi_connect();
	distseq_member_check_changes();
	distseq_node_state(distseq_catalog_schema(), &st);
	settle = distseq_settle_needed(distseq_catalog_schema(), &st);
	SPI_finish();
	distseq_xact_commit();
	if (settle && (problem = distseq_settle_run(cxt)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not settle the distseq membership change this node is in: %s", problem),
				 errhint("A majority of the members of the membership it was proposed from must be reachable from this node, each with a server added by distseq_add_peer().")));

	distseq_xact_begin();
	distseq_spi_connect();
	schema = distseq_catalog_schema();
	distseq_member_lock_changes(schema);
	/* members an earlier change left pending could not move: finish it */
	(void) distseq_remote_try(resume_finish, NULL, NULL);
	distseq_node_state(schema, &st);
	distseq_node_verify(schema);
	if (op == 'a')
		changed = change_add(schema, &st, server_name, userid);
	else
		changed = change_remove(schema, &st, server_name);
	SPI_finish();
	/* decided, if changed: flushed at commit, as the worker commits */
	distseq_xact_commit();

	if (changed)
	{
		FinishTry	ft = {NULL};
		char	   *error = NULL;

		/* decided: from here on a failure only leaves phase two to the agent */
		distseq_xact_begin();
		distseq_spi_connect();
		if (!distseq_remote_try(finish_try, &ft, &error))
			ft.problem = error;
		if (ft.problem)
			unfinished = MemoryContextStrdup(cxt, ft.problem);
		SPI_finish();
		distseq_xact_commit();
	}
	return unfinished;
}
