/*-------------------------------------------------------------------------
 *
 * peer.c
 *	  Every function a peer calls on this node (the callee side of the
 *	  multi-node protocol): its state and marks for the agent (agent.c),
 *	  the steps of a membership change for a proposer or a settler
 *	  (change.c, settle.c), the sequences a peer introduces, and a member's
 *	  part of distseq_setval() and distseq_alter() (whose work is
 *	  redefine.c's, shared with the local call).  The prefix distseq_peer_
 *	  means this: called by a peer, over a connection of remote.c, never by
 *	  this node itself.  distseq_peer_reserve (catalog.c) is a peer's too,
 *	  kept with the window allocator it shares with local refills.
 *
 * Functions peers call run with the extension owner's rights, each in its
 * own transaction on the callee, committed synchronously.  Each connects
 * SPI, checks this server may answer (a primary, writable where it writes),
 * and leaves the work to member.c's steps, which this node's own proposer
 * takes too: the locking rules are theirs (member.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"


static Datum
return_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

PG_FUNCTION_INFO_V1(distseq_peer_state);

Datum
distseq_peer_state(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	DistseqNodeState st;
	Datum		values[5];
	bool		nulls[5] = {0};
	Datum		result;

	distseq_check_primary("distseq_peer_state()");
	distseq_spi_connect();
	distseq_node_state(distseq_catalog_schema(), &st);
	/* a restarted node's worker, which finishes changes, starts on demand */
	if (st.pending)
		distseq_worker_wake(MyDatabaseId);
	values[0] = Int64GetDatum(st.node_id);
	values[1] = Int64GetDatum(st.epoch);
	values[2] = Int64GetDatum(st.epoch_id);
	values[4] = BoolGetDatum(st.pending);	/* not in version 1.3's row */
	/* the result must outlive SPI's memory */
	MemoryContextSwitchTo(caller);
	values[3] = distseq_int8_array(st.members, st.nmembers);
	result = return_row(fcinfo, values, nulls);
	SPI_finish();
	return result;
}

PG_FUNCTION_INFO_V1(distseq_peer_hwm);

Datum
distseq_peer_hwm(PG_FUNCTION_ARGS)
{
	const char *schema;
	Oid			types[1] = {TEXTOID};
	Datum		values[3];
	bool		nulls[3] = {0};

	distseq_check_primary("distseq_peer_hwm()");
	distseq_spi_connect();
	schema = distseq_catalog_schema();
	values[0] = PG_GETARG_DATUM(0);

	/*
	 * A node without the sequence answers with the seed it was given when
	 * it joined (NULL if none): that is all it may have promised.
	 */
	distseq_spi_exec(psprintf("SELECT COALESCE((SELECT %s FROM %s.distseq_sequences s"
							  "                 WHERE s.sequence_name = $1),"
							  "                (SELECT hwm FROM %s.distseq_seed WHERE sequence_name = $1)),"
							  " n.epoch, n.epoch_id FROM %s.distseq_node n",
							  distseq_hwm_expr(schema), schema, schema, schema),
					 1, types, values, SPI_OK_SELECT);
	nulls[0] = SPI_tuptable->vals[0] == NULL ||
		SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1) == NULL;
	values[0] = Int64GetDatum(distseq_spi_int8(0, 1));
	values[1] = Int64GetDatum(distseq_spi_int8(0, 2));
	values[2] = Int64GetDatum(distseq_spi_int8(0, 3));
	SPI_finish();
	return return_row(fcinfo, values, nulls);
}

PG_FUNCTION_INFO_V1(distseq_peer_cas);

Datum
distseq_peer_cas(PG_FUNCTION_ARGS)
{
	bool		won;

	distseq_check_writable("distseq_peer_cas()");
	distseq_spi_connect();
	won = distseq_member_cas(distseq_catalog_schema(), PG_GETARG_DATUM(0),
					 PG_GETARG_INT64(1), PG_GETARG_INT64(2),
					 PG_GETARG_INT64(3), PG_GETARG_INT64(4));
	SPI_finish();
	PG_RETURN_BOOL(won);
}

PG_FUNCTION_INFO_V1(distseq_peer_sequences);

Datum
distseq_peer_sequences(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *schema;

	distseq_check_primary("distseq_peer_sequences()");
	InitMaterializedSRF(fcinfo, 0);
	distseq_spi_connect();
	schema = distseq_catalog_schema();
	distseq_spi_exec(psprintf("SELECT s.sequence_name, s.block_size::int8, s.window_size,"
					  " s.start_value, s.max_value, s.min_open_windows::int8,"
					  " EXISTS (SELECT 1 FROM %s.distseq_windows w"
					  "         WHERE w.sequence_name = s.sequence_name)"
					  " FROM %s.distseq_sequences s WHERE s.stripes = 1 AND s.servers IS NULL",
					  schema, schema),
			 0, NULL, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		values[7];
		bool		nulls[7] = {0};
		bool		isnull;

		values[0] = CStringGetTextDatum(SPI_getvalue(SPI_tuptable->vals[i],
													 SPI_tuptable->tupdesc, 1));
		values[1] = Int32GetDatum((int32) distseq_spi_int8(i, 2));
		values[2] = Int64GetDatum(distseq_spi_int8(i, 3));
		values[3] = Int64GetDatum(distseq_spi_int8(i, 4));
		values[4] = Int64GetDatum(distseq_spi_int8(i, 5));
		values[5] = Int32GetDatum((int32) distseq_spi_int8(i, 6));
		values[6] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 7, &isnull);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(distseq_peer_create);

/*
 * Create a sequence a peer introduced, seeded with a high-water mark at
 * least as high as every window won so far.  No window is made here: with
 * peers, windows come only from the agent.
 */
Datum
distseq_peer_create(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	DistseqDef	def;
	const char *schema;
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		values[2];

	distseq_check_loaded();
	distseq_check_writable("distseq_peer_create()");
	distseq_check_name(name);

	/*
	 * Every CHECK constraint of distseq_sequences, which the creation's
	 * insert does not run (rows.c)
	 */
	if (PG_GETARG_INT32(5) < 1 || PG_GETARG_INT32(5) > DISTSEQ_MAX_OPEN_WINDOWS ||
		PG_GETARG_INT32(1) < 1 || PG_GETARG_INT64(2) < 1 ||
		PG_GETARG_INT64(3) > PG_GETARG_INT64(4) ||
		PG_GETARG_INT64(4) == PG_INT64_MAX)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid definition of distseq sequence \"%s\"", name)));
	if (distseq_catalog_lookup(name, &def))
		PG_RETURN_BOOL(false);
	distseq_catalog_create(name, GetUserId(), PG_GETARG_INT32(1),
						   PG_GETARG_INT64(2), PG_GETARG_INT64(3),
						   PG_GETARG_INT64(4), PG_GETARG_INT32(5), 1, 0,
						   (Datum) 0);
	distseq_spi_connect();
	schema = distseq_catalog_schema();
	values[0] = PG_GETARG_DATUM(0);
	values[1] = PG_GETARG_DATUM(6);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences SET hwm = GREATEST($2,"
							  " (SELECT hwm FROM %s.distseq_seed WHERE sequence_name = $1))"
							  " WHERE sequence_name = $1",
							  schema, schema), 2, types, values, SPI_OK_UPDATE);
	SPI_finish();
	PG_RETURN_BOOL(true);
}

PG_FUNCTION_INFO_V1(distseq_peer_epoch_cas);

Datum
distseq_peer_epoch_cas(PG_FUNCTION_ARGS)
{
	distseq_check_writable("distseq_peer_epoch_cas()");
	if (PG_NARGS() != 7)
		distseq_member_check_changes();
	distseq_spi_connect();
	distseq_member_move(distseq_catalog_schema(), PG_GETARG_INT64(0), PG_GETARG_INT64(1),
				PG_GETARG_INT64(2), PG_GETARG_INT64(3), PG_GETARG_DATUM(4),
				PG_GETARG_INT64(5), PG_GETARG_INT64(6), false);
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(distseq_peer_join);

/* Phase one on a fresh node that joins */
Datum
distseq_peer_join(PG_FUNCTION_ARGS)
{
	distseq_check_writable("distseq_peer_join()");
	distseq_spi_connect();
	distseq_member_move(distseq_catalog_schema(), 0, 0, PG_GETARG_INT64(0), PG_GETARG_INT64(1),
				PG_GETARG_DATUM(2), PG_GETARG_INT64(3), PG_GETARG_INT64(4), true);
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(distseq_peer_revert);

Datum
distseq_peer_revert(PG_FUNCTION_ARGS)
{
	bool		reverted;

	distseq_check_writable("distseq_peer_revert()");
	distseq_spi_connect();
	distseq_node_verify(distseq_catalog_schema());
	reverted = distseq_member_revert(distseq_catalog_schema(), PG_GETARG_INT64(0),
							 PG_GETARG_INT64(1));
	SPI_finish();
	PG_RETURN_BOOL(reverted);
}

PG_FUNCTION_INFO_V1(distseq_peer_decided);

/*
 * Was a change proposed here decided?  The lock waits for a change in
 * flight: once it is free, a change not recorded never will be (a
 * proposal's epoch_id is never proposed twice).
 */
Datum
distseq_peer_decided(PG_FUNCTION_ARGS)
{
	const char *schema;
	Oid			types[3] = {INT8OID, INT8OID, INT8OID};
	Datum		values[3] = {PG_GETARG_DATUM(0), PG_GETARG_DATUM(1), PG_GETARG_DATUM(2)};
	bool		decided;

	distseq_check_writable("distseq_peer_decided()");
	distseq_spi_connect();
	schema = distseq_catalog_schema();
	distseq_node_verify(schema);
	/* only the proposer itself knows, not another node at its address */
	distseq_spi_exec(psprintf("SELECT 1 FROM %s.distseq_node WHERE node_id = $3", schema),
					 3, types, values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this distseq node is not node " INT64_FORMAT, PG_GETARG_INT64(2))));
	/* whoever asks waits for phase two: make sure this node's worker runs */
	distseq_worker_wake(MyDatabaseId);
	distseq_member_lock_changes(schema);
	distseq_spi_exec(psprintf("SELECT 1 FROM %s.distseq_change WHERE epoch = $1 AND epoch_id = $2",
							  schema), 3, types, values, SPI_OK_SELECT);
	decided = SPI_processed == 1;
	SPI_finish();
	PG_RETURN_BOOL(decided);
}

PG_FUNCTION_INFO_V1(distseq_peer_marks);

Datum
distseq_peer_marks(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext cxt = CurrentMemoryContext;
	List	   *marks;
	ListCell   *lc;

	distseq_check_writable("distseq_peer_marks()");
	InitMaterializedSRF(fcinfo, 0);
	distseq_spi_connect();
	marks = distseq_member_marks(distseq_catalog_schema(), PG_GETARG_INT64(0),
								 PG_GETARG_INT64(1), cxt);
	foreach(lc, marks)
	{
		DistseqMark *m = lfirst(lc);
		Datum		values[2];
		bool		nulls[2] = {0};

		values[0] = CStringGetTextDatum(m->name);
		values[1] = Int64GetDatum(m->hwm);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(distseq_peer_activate);

/*
 * On a member the proposer activates, the servers of the members the new
 * membership leaves out are forgotten with it (the proposer forgets them
 * once the change is finished, distseq_member_changes_finished), so that
 * distseq_peers does not list them for good.  Only those this node knew as
 * members: a server registered for any other node stays.
 */
Datum
distseq_peer_activate(PG_FUNCTION_ARGS)
{
	const char *schema;
	Oid			types[2] = {INT8OID, INT8ARRAYOID};
	Datum		args[8];
	Datum		values[2];

	distseq_check_writable("distseq_peer_activate()");
	for (int i = 0; i < 8; i++)
		args[i] = PG_GETARG_DATUM(i);
	values[0] = args[7];
	values[1] = args[4];
	distseq_spi_connect();
	schema = distseq_catalog_schema();
	/* before the node row is changed: it says who were members */
	distseq_spi_exec(psprintf("DELETE FROM %s.distseq_peer p USING %s.distseq_node n"
							  " WHERE n.node_id = $1 AND p.node_id <> n.node_id"
							  "   AND (p.node_id = ANY (n.members)"
							  "        OR p.node_id = ANY (COALESCE(n.prev_members, '{}')))"
							  "   AND p.node_id <> ALL ($2)", schema, schema),
					 2, types, values, SPI_OK_DELETE);
	/* an error here (not this node, not its group) undoes the delete too */
	distseq_member_activate(schema, args);
	SPI_finish();
	PG_RETURN_VOID();
}

static const char *const answer_names[] = {"promise", "decided", "refused", "elsewhere"};

static void
check_settle(void)
{
	if (!distseq_member_settles())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("settling a membership change needs version 1.7 of extension \"distseq\""),
				 errhint("Run ALTER EXTENSION distseq UPDATE on every node.")));
}

PG_FUNCTION_INFO_V1(distseq_peer_prepare);

Datum
distseq_peer_prepare(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	DistseqPromise p;
	Datum		values[10];
	bool		nulls[10] = {0};
	TupleDesc	tupdesc;
	Datum		result;
	int			k;

	distseq_check_writable("distseq_peer_prepare()");
	check_settle();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	distseq_spi_connect();
	distseq_member_promise(distseq_catalog_schema(), PG_GETARG_INT64(0), PG_GETARG_INT64(1),
				   PG_GETARG_INT64(2), PG_GETARG_INT64(3), PG_GETARG_INT64(4), &p);
	MemoryContextSwitchTo(caller);
	k = p.answer == 'p' ? 0 : p.answer == 'd' ? 1 : p.answer == 'r' ? 2 : 3;
	values[0] = CStringGetTextDatum(answer_names[k]);
	values[1] = Int64GetDatum(p.promised_round);
	values[2] = Int64GetDatum(p.promised_node);
	values[3] = Int64GetDatum(p.accepted_round);
	values[4] = Int64GetDatum(p.accepted_node);
	values[5] = BoolGetDatum(p.pending);
	values[6] = Int64GetDatum(p.epoch);
	values[7] = Int64GetDatum(p.epoch_id);
	values[8] = distseq_int8_array(p.members, p.nmembers);
	result = HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
	SPI_finish();
	return result;
}

PG_FUNCTION_INFO_V1(distseq_peer_accept);

Datum
distseq_peer_accept(PG_FUNCTION_ARGS)
{
	bool		accepted;

	distseq_check_writable("distseq_peer_accept()");
	check_settle();
	distseq_spi_connect();
	accepted = distseq_member_accept(distseq_catalog_schema(), PG_GETARG_INT64(0), PG_GETARG_INT64(1),
							 PG_GETARG_INT64(2), PG_GETARG_INT64(3), PG_GETARG_INT64(4),
							 PG_GETARG_INT64(5), PG_GETARG_DATUM(6), PG_GETARG_INT64(7));
	SPI_finish();
	PG_RETURN_BOOL(accepted);
}

PG_FUNCTION_INFO_V1(distseq_peer_adopt);

/* Version 1.3's join, kept so that its install script loads */
Datum
distseq_peer_adopt(PG_FUNCTION_ARGS)
{
	distseq_member_check_changes();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(distseq_peer_setval);

/* A member's part of distseq_setval(), in redefine.c with the rest of it */
Datum
distseq_peer_setval(PG_FUNCTION_ARGS)
{
	return distseq_redefine_peer(fcinfo, false);
}

PG_FUNCTION_INFO_V1(distseq_peer_alter);

/* A member's part of distseq_alter(), in redefine.c with the rest of it */
Datum
distseq_peer_alter(PG_FUNCTION_ARGS)
{
	return distseq_redefine_peer(fcinfo, true);
}
