/*-------------------------------------------------------------------------
 *
 * member.c
 *	  This node's identity and its view of the membership of its group
 *	  (distseq_node), the one majority function, and every step that
 *	  changes the membership row here: the same step whether a peer asks
 *	  for it (peer.c) or this node's proposer or settler takes it for itself
 *	  (change.c, settle.c).
 *
 * The membership in force is named by (epoch, epoch_id).  Every
 * compare-and-set of a high-water mark (agent.c) names the epoch it
 * believes in and fails on a node that has moved on, so an agent with a
 * stale view of the membership cannot win anything.
 *
 * A member in a change of membership that is not active on it yet is
 * pending, and refuses every compare-and-set; change.c says how a change
 * goes, and in which order its steps are taken on the members.
 *
 * The high-water mark each member keeps of a sequence (distseq_hwm_expr)
 * is read here for the compare-and-set and a change's marks, and by the
 * window allocator (windows.c), which sits above this file.
 *
 * Locking: distseq_node has one row.  A compare-and-set and the marks a
 * change collects hold a share lock on it (FOR SHARE), so every step that
 * updates it waits for them and makes later ones fail; a prepare locks it
 * FOR UPDATE.  distseq_change is locked in SHARE ROW EXCLUSIVE mode while
 * a change is decided here or a peer asks whether it was
 * (distseq_member_lock_changes).  Every function here runs with SPI
 * connected, in the caller's transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

/*
 * The high-water mark of a sequence row "s", in slots: at least the top of
 * its highest window, whatever the column says (a rejoin adds windows).
 */
char *
distseq_hwm_expr(const char *schema)
{
	return psprintf("GREATEST(COALESCE(s.hwm, s.start_value),"
					" COALESCE((SELECT w.window_end FROM %s.distseq_windows w"
					" WHERE w.sequence_name = s.sequence_name"
					" ORDER BY w.window_start DESC LIMIT 1), s.start_value))",
					schema);
}

/* This node's identity and membership view.  SPI must be connected. */
void
distseq_node_state(const char *schema, DistseqNodeState *st)
{
	bool		isnull;

	distseq_spi_exec(psprintf("SELECT node_id, epoch, epoch_id, members, %s FROM %s.distseq_node",
							  distseq_catalog().changes ? "pending, COALESCE(proposer, 0)" :
							  "false, 0::int8", schema), 0, NULL, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		elog(ERROR, "distseq: distseq_node must have exactly one row");
	st->node_id = distseq_spi_int8(0, 1);
	st->epoch = distseq_spi_int8(0, 2);
	st->epoch_id = distseq_spi_int8(0, 3);
	st->members = distseq_int8_values(SPI_getbinval(SPI_tuptable->vals[0],
													SPI_tuptable->tupdesc, 4, &isnull),
									  &st->nmembers);
	st->pending = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5,
											 &isnull));
	st->proposer = distseq_spi_int8(0, 6);
}

/*
 * How many of n members make a majority: any two majorities of the same
 * membership share a member, which every decision by majority relies on
 * (the agent's windows, membership changes and their settling).
 */
int
distseq_majority(int n)
{
	return n / 2 + 1;
}

bool
distseq_is_member(DistseqNodeState *st, int64 node_id)
{
	for (int i = 0; i < st->nmembers; i++)
		if (st->members[i] == node_id)
			return true;
	return false;
}

/*
 * This node has been left out of its group: by a change it took part in,
 * or by one it learned of when it was back (distseq_change_learn).  Out of
 * a change, "proposer" names the member that made it or said so.  SPI
 * connected.
 */
void
distseq_not_member_error(const char *schema, DistseqNodeState *st)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(st->proposer)};
	char	   *who = NULL;

	if (st->proposer != 0)
	{
		distseq_spi_exec(psprintf("SELECT server_name::text FROM %s.distseq_peer WHERE node_id = $1",
								  schema), 1, types, values, SPI_OK_SELECT);
		who = SPI_processed == 1 ?
			psprintf("distseq peer \"%s\"",
					 SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1)) :
			psprintf("node " INT64_FORMAT, st->proposer);
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("this server is no longer a member of the distseq group"),
			 who ?
			 errdetail("Membership " INT64_FORMAT " of the group does not include it, as %s said. It serves the windows it has and opens no other.",
					   st->epoch, who) :
			 errdetail("Membership " INT64_FORMAT " of the group does not include it. It serves the windows it has and opens no other.",
					   st->epoch),
			 errhint("Run distseq_add_peer() for this server on a member of the group to let it take part again.")));
}

/* Raise the error above on a node that is out of the group it was in */
void
distseq_check_in_group(const char *schema)
{
	DistseqNodeState st;

	distseq_node_state(schema, &st);
	if (!distseq_is_member(&st, st.node_id))
		distseq_not_member_error(schema, &st);
}

/*
 * Has this node ever been in a group?  Then windows come only from the
 * agent, even once it is the last member.  Takes a share lock on the node
 * row, which orders window making here against a join (change.c).
 */
bool
distseq_has_peers(const char *schema)
{
	bool		isnull;

	distseq_spi_exec(psprintf("SELECT epoch > 0 OR cardinality(members) > 1"
							  " FROM %s.distseq_node FOR SHARE",
							  schema), 0, NULL, NULL, SPI_OK_SELECT);
	return SPI_processed == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
								   &isnull));
}

/*
 * A member found on another server, timeline or database than it was made
 * on -- restored from a backup, cloned, a promoted standby -- may have
 * promised the others more than its copy remembers: it must not vote,
 * allocate or serve anyone.  A node without peers just notes where it is
 * (each of its sequences rejoins on its own, see windows.c).  SPI
 * connected.
 */
void
distseq_node_verify(const char *schema)
{
	Oid			types[3] = {INT8OID, INT8OID, INT8OID};
	Datum		values[3];
	bool		isnull;

	values[0] = Int64GetDatum((int64) GetSystemIdentifier());
	values[1] = Int64GetDatum((int64) distseq_timeline());
	values[2] = Int64GetDatum((int64) MyDatabaseId);
	distseq_spi_exec(psprintf("SELECT epoch > 0 OR cardinality(members) > 1,"
							  " (origin_system, origin_timeline, origin_database)"
							  "   IS DISTINCT FROM ($1, $2, $3::oid)"
							  " FROM %s.distseq_node", schema),
					 3, types, values, SPI_OK_SELECT);
	if (SPI_processed != 1 ||
		!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
									&isnull)))
		return;
	if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this distseq node is a copy of a member (restored, cloned or promoted) and takes no part in its group"),
				 errdetail("A copy may have promised the other members less than the member it was made from."),
				 errhint("Remove it with distseq_remove_peer() on the other members; let a fresh node join instead.")));
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET origin_system = $1,"
							  " origin_timeline = $2, origin_database = $3::oid", schema),
					 3, types, values, SPI_OK_UPDATE);
}

/*
 * Raise a high-water mark from at most "expected" to "new_hwm", if this
 * node is in the epoch the caller believes in.  The share lock on the node
 * row orders this against a change of membership here.  SPI connected.
 */
bool
distseq_member_cas(const char *schema, Datum name, int64 epoch, int64 epoch_id,
				   int64 expected, int64 new_hwm)
{
	Oid			types[3] = {TEXTOID, INT8OID, INT8OID};
	Datum		values[3];

	distseq_node_verify(schema);
	values[0] = Int64GetDatum(epoch);
	values[1] = Int64GetDatum(epoch_id);
	distseq_spi_exec(psprintf("SELECT 1 FROM %s.distseq_node WHERE epoch = $1 AND epoch_id = $2"
							  "%s FOR SHARE", schema,
							  distseq_catalog().changes ? " AND NOT pending" : ""),
			 2, types + 1, values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return false;

	values[0] = name;
	values[1] = Int64GetDatum(expected);
	values[2] = Int64GetDatum(new_hwm);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences s SET hwm = $3"
					  " WHERE s.sequence_name = $1 AND %s <= $2",
					  schema, distseq_hwm_expr(schema)),
			 3, types, values, SPI_OK_UPDATE);
	return SPI_processed == 1;
}

/* Serialize changes made here, and answers about them (distseq_peer_decided) */
void
distseq_member_lock_changes(const char *schema)
{
	distseq_spi_exec(psprintf("LOCK TABLE %s.distseq_change IN SHARE ROW EXCLUSIVE MODE", schema),
					 0, NULL, NULL, SPI_OK_UTILITY);
}

/* Version 1.7 keeps ballots: any member can settle a change (settle.c) */
bool
distseq_member_settles(void)
{
	return distseq_catalog().ballots;
}

/* Version 1.4 keeps what a change needs: earlier ones cannot take part */
void
distseq_member_check_changes(void)
{
	if (!distseq_catalog().changes)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("membership changes need version 1.4 of extension \"distseq\""),
				 errhint("Run ALTER EXTENSION distseq UPDATE on every node.")));
}

/*
 * Phase one on this node: move from (epoch, epoch_id), active, to the new
 * membership, pending.  Taking the same step again is a no-op.  The update
 * of the node row waits for compare-and-sets in flight here (they hold a
 * share lock on it) and makes every later one fail.
 *
 * A node that joins ("join") moves instead from being fresh: alone, never
 * in a group, and never having made a window of a sequence the agent
 * keeps.  From then on it can no longer make one on its own (it has been in
 * a group, distseq_has_peers).  Making windows alone updates the node row
 * (distseq_note_windows): a join that waited for that row checks the flag
 * again when it goes on, which a check of distseq_windows would not do.
 * Or it moves from being out of the group it was in, not pending: every
 * window it ever won was won in a membership before the one that left it
 * out, so lies below the marks phase two gives it, and it can win no other
 * (distseq_not_member_error).  A member removed while it could not hear of
 * it is not out here until it has learned so (distseq_change_learn).
 */
void
distseq_member_move(const char *schema, int64 epoch, int64 epoch_id, int64 new_epoch,
					int64 new_epoch_id, Datum members, int64 proposer, int64 node_id,
					bool join)
{
	Oid			types[7] = {INT8OID, INT8OID, INT8OID, INT8OID, INT8ARRAYOID, INT8OID,
	INT8OID};
	Datum		values[7];
	bool		settle = distseq_member_settles();

	distseq_node_verify(schema);
	values[0] = Int64GetDatum(epoch);
	values[1] = Int64GetDatum(epoch_id);
	values[2] = Int64GetDatum(new_epoch);
	values[3] = Int64GetDatum(new_epoch_id);
	values[4] = members;
	values[5] = Int64GetDatum(proposer);
	values[6] = Int64GetDatum(node_id);

	/*
	 * The node must be the one the proposer means, not another installed at
	 * its address; and a repeated step must have come from the same place.
	 */
	/*
	 * From 1.7 this is round 0 of settling the change from E0 (see
	 * distseq_settle_run): a node that promised a ballot takes no step of it.
	 */
	distseq_spi_exec(psprintf("SELECT 1 FROM %s.distseq_node"
							  " WHERE node_id = $7 AND epoch = $3 AND epoch_id = $4 AND pending"
							  "   AND proposer = $6 AND prev_epoch = $1 AND prev_epoch_id = $2%s",
							  schema, settle ? " AND promised_round = 0" : ""),
					 7, types, values, SPI_OK_SELECT);
	if (SPI_processed == 1)
		return;
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node n SET epoch = $3, epoch_id = $4,"
							  " members = $5, pending = true, proposer = $6, prev_epoch = epoch,"
							  " prev_epoch_id = epoch_id, prev_members = members%s"
							  " WHERE n.node_id = $7 AND %s",
							  schema,
							  !settle ? "" : join ?
							  ", promised_round = 0, promised_node = 0, accepted_round = 0, accepted_node = 0" :
							  ", accepted_round = 0, accepted_node = 0",
							  join ?
							  "NOT n.pending AND ((n.epoch = 0 AND n.members = ARRAY[n.node_id]"
							  " AND NOT n.made_windows) OR (n.epoch > 0 AND n.node_id <> ALL (n.members)))" :
							  settle ?
							  "n.epoch = $1 AND n.epoch_id = $2 AND NOT n.pending AND n.promised_round = 0" :
							  "n.epoch = $1 AND n.epoch_id = $2 AND NOT n.pending"),
					 7, types, values, SPI_OK_UPDATE);
	if (SPI_processed != 1 && join)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this distseq node cannot join: it is not fresh"),
				 errdetail("A node joins only before it has peers or windows of its own, or once it knows it is no longer a member of its group, so that no value it issued can collide.")));
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("distseq membership changed concurrently"),
				 errhint("Look at distseq_peers on every node and try again.")));
}

/* Go back from a pending membership whose change was not decided */
bool
distseq_member_revert(const char *schema, int64 epoch, int64 epoch_id)
{
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(epoch), Int64GetDatum(epoch_id)};

	/* from 1.7, only a step of round 0: a change settling took on stays */
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET epoch = prev_epoch,"
							  " epoch_id = prev_epoch_id, members = prev_members, pending = false,"
							  " proposer = NULL, prev_epoch = NULL, prev_epoch_id = NULL,"
							  " prev_members = NULL"
							  " WHERE epoch = $1 AND epoch_id = $2 AND pending%s", schema,
							  distseq_member_settles() ? " AND accepted_round = 0" : ""),
					 2, types, values, SPI_OK_UPDATE);
	return SPI_processed == 1;
}

/*
 * Every mark this node holds, with the seeds of sequences it does not
 * have, once it is in the given membership: no compare-and-set of the one
 * before can reach it then.  SPI connected; in the caller's memory.
 */
List *
distseq_member_marks(const char *schema, int64 epoch, int64 epoch_id, MemoryContext cxt)
{
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(epoch), Int64GetDatum(epoch_id)};
	List	   *marks = NIL;

	distseq_node_verify(schema);
	distseq_spi_exec(psprintf("SELECT 1 FROM %s.distseq_node WHERE epoch = $1 AND epoch_id = $2"
							  " FOR SHARE", schema), 2, types, values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this distseq node is not in membership " INT64_FORMAT " (" INT64_FORMAT ")",
						epoch, epoch_id)));
	distseq_spi_exec(psprintf("SELECT name, max(hwm) FROM"
							  " (SELECT s.sequence_name, %s FROM %s.distseq_sequences s"
							  "  UNION ALL SELECT sequence_name, hwm FROM %s.distseq_seed) m(name, hwm)"
							  " GROUP BY name", distseq_hwm_expr(schema), schema, schema),
					 0, NULL, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		DistseqMark *m = MemoryContextAlloc(cxt, sizeof(DistseqMark));

		m->name = MemoryContextStrdup(cxt, SPI_getvalue(SPI_tuptable->vals[i],
														SPI_tuptable->tupdesc, 1));
		m->hwm = distseq_spi_int8(i, 2);
		marks = lappend(marks, m);
	}
	return marks;
}


/*
 * Phase two on this node: raise the marks and take part in the new
 * membership.
 */
void
distseq_member_activate(const char *schema, Datum *args)
{
	Oid			types[8] = {INT8OID, INT8OID, INT8OID, INT8OID, INT8ARRAYOID,
	TEXTARRAYOID, INT8ARRAYOID, INT8OID};

	/*
	 * Taken from the new membership, or from any older one of this group (a
	 * member that missed phase one, or more than one change): every member
	 * active in a membership holds marks above all windows won before it,
	 * and those collected for this one lie above all windows won in the one
	 * before.  Not from epoch 0, that of every node never in a group (a
	 * joiner took the new membership in phase one).  And the node must be
	 * the one the proposer knows, not another installed at its address.
	 */
	distseq_node_verify(schema);

	/*
	 * From 1.7 also from pending in another change from the membership
	 * before: one settling abandoned, never decided as this one was.  In a
	 * new membership, what it promised and took is of the instance before.
	 */
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node n SET epoch = $1, epoch_id = $2, members = $5,"
							  " pending = false, proposer = NULL, prev_epoch = NULL,"
							  " prev_epoch_id = NULL, prev_members = NULL%s"
							  " WHERE n.node_id = $8 AND"
							  " ((n.epoch = $1 AND n.epoch_id = $2) OR (n.epoch > 0 AND n.epoch < $1)%s)",
							  schema,
							  !distseq_member_settles() ? "" :
							  ", promised_round = CASE WHEN n.pending OR n.epoch <> $1 OR n.epoch_id <> $2"
							  "   THEN 0 ELSE n.promised_round END,"
							  " promised_node = CASE WHEN n.pending OR n.epoch <> $1 OR n.epoch_id <> $2"
							  "   THEN 0 ELSE n.promised_node END,"
							  " accepted_round = 0, accepted_node = 0",
							  !distseq_member_settles() ? "" :
							  " OR (n.pending AND n.prev_epoch = $3 AND n.prev_epoch_id = $4 AND $3 > 0)"),
					 8, types, args, SPI_OK_UPDATE);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this distseq node cannot take membership " INT64_FORMAT,
						DatumGetInt64(args[0])),
				 errdetail("It is neither in that membership nor in an older one of its group.")));
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences s SET hwm = GREATEST(%s, v.hwm)"
							  " FROM (SELECT name, max(hwm) AS hwm FROM unnest($6, $7) AS u(name, hwm)"
							  "       GROUP BY name) v WHERE s.sequence_name = v.name",
							  schema, distseq_hwm_expr(schema)),
					 8, types, args, SPI_OK_UPDATE);
	/* and for every sequence, had or not: one introduced later starts above */
	distseq_spi_exec(psprintf("INSERT INTO %s.distseq_seed (sequence_name, hwm)"
							  " SELECT name, max(hwm) FROM unnest($6, $7) AS v(name, hwm) GROUP BY name"
							  " ON CONFLICT (sequence_name)"
							  " DO UPDATE SET hwm = GREATEST(%s.distseq_seed.hwm, EXCLUDED.hwm)",
							  schema, schema),
					 8, types, args, SPI_OK_INSERT);
}

/*
 * A prepare of the instance of membership (epoch, epoch_id) at ballot
 * (round, settler) on this node, which must be node_id: a promise, if it
 * is in that instance (active in it, or pending from it) and promised no
 * ballot as high.  The row lock waits for a change in flight here and for
 * the compare-and-sets.  SPI connected; the answer in SPI's memory.
 */
void
distseq_member_promise(const char *schema, int64 epoch, int64 epoch_id, int64 round,
					   int64 settler, int64 node_id, DistseqPromise *p)
{
	bool		isnull;
	int64		prev_epoch;
	int64		prev_epoch_id;
	bool		in;

	distseq_node_verify(schema);
	distseq_spi_exec(psprintf("SELECT node_id, epoch, epoch_id, members, pending,"
							  " COALESCE(prev_epoch, -1), COALESCE(prev_epoch_id, -1),"
							  " promised_round, promised_node, accepted_round, accepted_node"
							  " FROM %s.distseq_node FOR UPDATE", schema),
					 0, NULL, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		elog(ERROR, "distseq: distseq_node must have exactly one row");
	if (distseq_spi_int8(0, 1) != node_id)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this distseq node is not node " INT64_FORMAT, node_id)));
	p->epoch = distseq_spi_int8(0, 2);
	p->epoch_id = distseq_spi_int8(0, 3);
	p->members = distseq_int8_values(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
												   4, &isnull), &p->nmembers);
	p->pending = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5,
											&isnull));
	prev_epoch = distseq_spi_int8(0, 6);
	prev_epoch_id = distseq_spi_int8(0, 7);
	p->promised_round = distseq_spi_int8(0, 8);
	p->promised_node = distseq_spi_int8(0, 9);
	p->accepted_round = distseq_spi_int8(0, 10);
	p->accepted_node = distseq_spi_int8(0, 11);
	in = p->pending ? (prev_epoch == epoch && prev_epoch_id == epoch_id) :
		(p->epoch == epoch && p->epoch_id == epoch_id);
	if (!in)
	{
		p->answer = !p->pending && p->epoch == epoch + 1 ? 'd' : 'e';
		return;
	}
	if (round < p->promised_round ||
		(round == p->promised_round && settler <= p->promised_node))
	{
		p->answer = 'r';
		return;
	}
	{
		Oid			types[2] = {INT8OID, INT8OID};
		Datum		values[2] = {Int64GetDatum(round), Int64GetDatum(settler)};

		distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET promised_round = $1, promised_node = $2",
								  schema), 2, types, values, SPI_OK_UPDATE);
	}
	p->promised_round = round;
	p->promised_node = settler;
	p->answer = 'p';
}

/*
 * Take the change from (epoch, epoch_id) to (new_epoch, new_epoch_id,
 * members), pending, at ballot (round, settler), on this node if it is
 * node_id, in that instance, and promised no higher ballot.  SPI connected.
 */
bool
distseq_member_accept(const char *schema, int64 epoch, int64 epoch_id, int64 round,
					  int64 settler, int64 new_epoch, int64 new_epoch_id, Datum members,
					  int64 node_id)
{
	Oid			types[8] = {INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID,
	INT8ARRAYOID, INT8OID};
	Datum		values[8];

	distseq_node_verify(schema);
	values[0] = Int64GetDatum(epoch);
	values[1] = Int64GetDatum(epoch_id);
	values[2] = Int64GetDatum(round);
	values[3] = Int64GetDatum(settler);
	values[4] = Int64GetDatum(new_epoch);
	values[5] = Int64GetDatum(new_epoch_id);
	values[6] = members;
	values[7] = Int64GetDatum(node_id);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node n SET"
							  " prev_epoch = CASE WHEN n.pending THEN n.prev_epoch ELSE n.epoch END,"
							  " prev_epoch_id = CASE WHEN n.pending THEN n.prev_epoch_id ELSE n.epoch_id END,"
							  " prev_members = CASE WHEN n.pending THEN n.prev_members ELSE n.members END,"
							  " epoch = $5, epoch_id = $6, members = $7, pending = true, proposer = $4,"
							  " promised_round = $3, promised_node = $4,"
							  " accepted_round = $3, accepted_node = $4"
							  " WHERE n.node_id = $8"
							  "   AND ((NOT n.pending AND n.epoch = $1 AND n.epoch_id = $2)"
							  "        OR (n.pending AND n.prev_epoch = $1 AND n.prev_epoch_id = $2))"
							  "   AND (n.promised_round, n.promised_node) <= ($3, $4)", schema),
					 8, types, values, SPI_OK_UPDATE);
	return SPI_processed == 1;
}

/* Nothing left to do for the changes decided here: forget who left */
void
distseq_member_changes_finished(const char *schema)
{
	distseq_spi_exec(psprintf("DELETE FROM %s.distseq_peer p USING %s.distseq_change c"
							  " WHERE NOT c.finished AND p.node_id = ANY (c.prev_members)"
							  "   AND p.node_id <> ALL (c.members)", schema, schema),
					 0, NULL, NULL, SPI_OK_DELETE);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_change SET finished = true", schema),
					 0, NULL, NULL, SPI_OK_UPDATE);
}

/*
 * Record the change decided here, in the transaction that decides it: a
 * change decided here before and not finished yet is superseded by it.
 */
void
distseq_member_record_change(const char *schema, const DistseqChange *c)
{
	Oid			types[6] = {INT8OID, INT8OID, INT8OID, INT8OID, INT8ARRAYOID, INT8ARRAYOID};
	Datum		values[6];

	values[0] = Int64GetDatum(c->epoch);
	values[1] = Int64GetDatum(c->epoch_id);
	values[2] = Int64GetDatum(c->prev_epoch);
	values[3] = Int64GetDatum(c->prev_epoch_id);
	values[4] = distseq_int8_array(c->members, c->nmembers);
	values[5] = distseq_int8_array(c->prev, c->nprev);
	distseq_member_changes_finished(schema);
	distseq_spi_exec(psprintf("INSERT INTO %s.distseq_change (epoch, epoch_id, prev_epoch,"
							  " prev_epoch_id, members, prev_members)"
							  " VALUES ($1, $2, $3, $4, $5, $6)", schema),
					 6, types, values, SPI_OK_INSERT);
}
