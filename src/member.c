/*-------------------------------------------------------------------------
 *
 * member.c
 *	  Membership of a group of nodes: this node's identity and view
 *	  (distseq_node), how it reaches the others (distseq_peer), the
 *	  functions peers call on each other, and adding or removing a member.
 *
 * The membership in force is named by (epoch, epoch_id).  Every
 * compare-and-set of a high-water mark (agent.c) names the epoch it
 * believes in and fails on a node that has moved on, so an agent with a
 * stale view of the membership cannot win anything.
 *
 * Adding or removing a member is itself a compare-and-set of the epoch, one
 * member at a time, on every member of the new membership that was a member
 * before (all of them must be reachable: it is an administrator's act).  A
 * member added is seeded with the largest high-water mark those returned,
 * so it holds every win made before it joined.  A change that fails half
 * way is reverted on the nodes that took it: high-water marks only grow, so
 * whatever was won under the reverted epoch stays on record (see
 * README, "Several servers", for the argument).
 *
 * Functions peers call run with the extension owner's rights, each in its
 * own transaction on the callee, committed synchronously.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

/* The high-water mark of a sequence row "s" in the catalog, in slots */
#define HWM_EXPR(schema) distseq_hwm_expr(schema)

/*
 * The high-water mark of a sequence row "s", in slots: at least the top of
 * its highest window, whatever the column says (a rejoin adds windows).
 */
char *
distseq_hwm_expr(const char *schema)
{
	return psprintf("GREATEST(COALESCE(s.hwm, s.start_value),"
					" COALESCE((SELECT max(w.window_end) FROM %s.distseq_windows w"
					" WHERE w.sequence_name = s.sequence_name), s.start_value))",
					schema);
}

static void
spi_connect(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

/* This node's identity and membership view.  SPI must be connected. */
void
distseq_node_state(const char *schema, DistseqNodeState *st)
{
	bool		isnull;
	ArrayType  *arr;
	Datum	   *elems;
	int			n;

	distseq_spi_exec(psprintf("SELECT node_id, epoch, epoch_id, members FROM %s.distseq_node",
					  schema), 0, NULL, NULL, SPI_OK_SELECT);
	if (SPI_processed != 1)
		elog(ERROR, "distseq: distseq_node must have exactly one row");
	st->node_id = distseq_spi_int8(0, 1);
	st->epoch = distseq_spi_int8(0, 2);
	st->epoch_id = distseq_spi_int8(0, 3);
	arr = DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[0],
										   SPI_tuptable->tupdesc, 4, &isnull));
	deconstruct_array(arr, INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, NULL, &n);
	st->nmembers = n;
	st->members = palloc(sizeof(int64) * Max(n, 1));
	for (int i = 0; i < n; i++)
		st->members[i] = DatumGetInt64(elems[i]);
}

bool
distseq_has_peers(const char *schema)
{
	DistseqNodeState st;

	distseq_node_state(schema, &st);
	return st.nmembers > 1;
}

/* How to reach a member, or NULL when this node has no server for it */
DistseqPeer *
distseq_peer_of(const char *schema, int64 node_id)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(node_id)};
	DistseqPeer *peer;
	ForeignServer *server;

	distseq_spi_exec(psprintf("SELECT server_name::text, added_by::int8 FROM %s.distseq_peer"
					  " WHERE node_id = $1", schema),
			 1, types, values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return NULL;
	peer = palloc0(sizeof(DistseqPeer));
	peer->node_id = node_id;
	strlcpy(peer->name, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1),
			NAMEDATALEN);
	peer->added_by = (Oid) distseq_spi_int8(0, 2);
	server = GetForeignServerByName(peer->name, true);
	if (server == NULL)
		return NULL;
	peer->serverid = server->serverid;
	return peer;
}

RemoteConn *
distseq_peer_connect(DistseqPeer *peer)
{
	return distseq_remote_get(peer->serverid, peer->added_by);
}

static Datum
int8_array(int64 *vals, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(vals[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, 8, FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}

/* "{1,2,3}" for a remote parameter */
static char *
int8_array_text(int64 *vals, int n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s" INT64_FORMAT, i ? "," : "", vals[i]);
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

static Datum
return_row(FunctionCallInfo fcinfo, Datum *values, bool *nulls)
{
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	return HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls));
}

/* ---- functions peers call ---- */

PG_FUNCTION_INFO_V1(distseq_peer_state);

Datum
distseq_peer_state(PG_FUNCTION_ARGS)
{
	DistseqNodeState st;
	Datum		values[4];
	bool		nulls[4] = {0};
	Datum		result;

	spi_connect();
	distseq_node_state(distseq_catalog_schema(), &st);
	values[0] = Int64GetDatum(st.node_id);
	values[1] = Int64GetDatum(st.epoch);
	values[2] = Int64GetDatum(st.epoch_id);
	values[3] = int8_array(st.members, st.nmembers);
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
	Datum		result;

	spi_connect();
	schema = distseq_catalog_schema();
	values[0] = PG_GETARG_DATUM(0);
	distseq_spi_exec(psprintf("SELECT %s, n.epoch, n.epoch_id FROM %s.distseq_sequences s,"
					  " %s.distseq_node n WHERE s.sequence_name = $1",
					  HWM_EXPR(schema), schema, schema),
			 1, types, values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("distseq sequence \"%s\" does not exist",
						text_to_cstring(PG_GETARG_TEXT_PP(0)))));
	values[0] = Int64GetDatum(distseq_spi_int8(0, 1));
	values[1] = Int64GetDatum(distseq_spi_int8(0, 2));
	values[2] = Int64GetDatum(distseq_spi_int8(0, 3));
	result = return_row(fcinfo, values, nulls);
	SPI_finish();
	return result;
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

	values[0] = Int64GetDatum(epoch);
	values[1] = Int64GetDatum(epoch_id);
	distseq_spi_exec(psprintf("SELECT 1 FROM %s.distseq_node WHERE epoch = $1 AND epoch_id = $2"
					  " FOR SHARE", schema),
			 2, types + 1, values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		return false;

	values[0] = name;
	values[1] = Int64GetDatum(expected);
	values[2] = Int64GetDatum(new_hwm);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences s SET hwm = $3"
					  " WHERE s.sequence_name = $1 AND %s <= $2",
					  schema, HWM_EXPR(schema)),
			 3, types, values, SPI_OK_UPDATE);
	return SPI_processed == 1;
}

PG_FUNCTION_INFO_V1(distseq_peer_cas);

Datum
distseq_peer_cas(PG_FUNCTION_ARGS)
{
	bool		won;

	spi_connect();
	won = distseq_member_cas(distseq_catalog_schema(), PG_GETARG_DATUM(0),
					 PG_GETARG_INT64(1), PG_GETARG_INT64(2),
					 PG_GETARG_INT64(3), PG_GETARG_INT64(4));
	SPI_finish();
	PG_RETURN_BOOL(won);
}

/*
 * Move this node from one epoch to another and return every sequence's
 * high-water mark as it is then: no compare-and-set of the old epoch can
 * come after it here.  Fails when the node is not in the old epoch.
 */
static void
member_epoch_cas(const char *schema, int64 epoch, int64 epoch_id,
				 int64 new_epoch, int64 new_epoch_id, Datum new_members)
{
	Oid			types[5] = {INT8OID, INT8OID, INT8OID, INT8OID, INT8ARRAYOID};
	Datum		values[5];

	values[0] = Int64GetDatum(epoch);
	values[1] = Int64GetDatum(epoch_id);
	values[2] = Int64GetDatum(new_epoch);
	values[3] = Int64GetDatum(new_epoch_id);
	values[4] = new_members;
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET epoch = $3, epoch_id = $4, members = $5"
					  " WHERE epoch = $1 AND epoch_id = $2", schema),
			 5, types, values, SPI_OK_UPDATE);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("distseq membership changed concurrently"),
				 errhint("Look at distseq_peers on every node and try again.")));
}

PG_FUNCTION_INFO_V1(distseq_peer_epoch_cas);

Datum
distseq_peer_epoch_cas(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *schema;

	InitMaterializedSRF(fcinfo, 0);
	spi_connect();
	schema = distseq_catalog_schema();
	member_epoch_cas(schema, PG_GETARG_INT64(0), PG_GETARG_INT64(1),
					 PG_GETARG_INT64(2), PG_GETARG_INT64(3), PG_GETARG_DATUM(4));
	distseq_spi_exec(psprintf("SELECT s.sequence_name, %s FROM %s.distseq_sequences s",
					  HWM_EXPR(schema), schema),
			 0, NULL, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		values[2];
		bool		nulls[2] = {0};

		values[0] = CStringGetTextDatum(SPI_getvalue(SPI_tuptable->vals[i],
													 SPI_tuptable->tupdesc, 1));
		values[1] = Int64GetDatum(distseq_spi_int8(i, 2));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(distseq_peer_adopt);

/*
 * Take a membership that was agreed elsewhere, and raise high-water marks
 * to what the members held when it was agreed.  Only ever moves forward.
 */
Datum
distseq_peer_adopt(PG_FUNCTION_ARGS)
{
	const char *schema;
	Oid			types[5] = {INT8OID, INT8OID, INT8ARRAYOID, TEXTARRAYOID, INT8ARRAYOID};
	Datum		values[5];

	spi_connect();
	schema = distseq_catalog_schema();
	for (int i = 0; i < 5; i++)
		values[i] = PG_GETARG_DATUM(i);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET epoch = $1, epoch_id = $2, members = $3"
					  " WHERE epoch < $1 OR (epoch = $1 AND epoch_id = $2)", schema),
			 5, types, values, SPI_OK_UPDATE);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("distseq node is already in a newer membership")));
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences s SET hwm = GREATEST(%s, v.hwm)"
					  " FROM unnest($4, $5) AS v(name, hwm) WHERE s.sequence_name = v.name",
					  schema, HWM_EXPR(schema)),
			 5, types, values, SPI_OK_UPDATE);
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(distseq_peer_sequences);

Datum
distseq_peer_sequences(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *schema;

	InitMaterializedSRF(fcinfo, 0);
	spi_connect();
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
	if (distseq_catalog_lookup(name, &def))
		PG_RETURN_BOOL(false);
	distseq_catalog_create(name, GetUserId(), PG_GETARG_INT32(1),
						   PG_GETARG_INT64(2), PG_GETARG_INT64(3),
						   PG_GETARG_INT64(4), PG_GETARG_INT32(5), 1, 0,
						   (Datum) 0);
	spi_connect();
	schema = distseq_catalog_schema();
	values[0] = PG_GETARG_DATUM(0);
	values[1] = PG_GETARG_DATUM(6);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences SET hwm = $2 WHERE sequence_name = $1",
					  schema), 2, types, values, SPI_OK_UPDATE);
	SPI_finish();
	PG_RETURN_BOOL(true);
}

/* ---- changing the membership ---- */

typedef struct SeqMark
{
	char	   *name;
	int64		hwm;
} SeqMark;

/* Run the epoch compare-and-set on a peer; collect its marks */
static void
remote_epoch_cas(RemoteConn *rc, DistseqNodeState *from, int64 new_epoch,
				 int64 new_epoch_id, char *new_members, List **marks)
{
	char		b[4][32];
	const char *params[5];
	PGresult   *res;

	snprintf(b[0], 32, INT64_FORMAT, from->epoch);
	snprintf(b[1], 32, INT64_FORMAT, from->epoch_id);
	snprintf(b[2], 32, INT64_FORMAT, new_epoch);
	snprintf(b[3], 32, INT64_FORMAT, new_epoch_id);
	for (int i = 0; i < 4; i++)
		params[i] = b[i];
	params[4] = new_members;
	res = distseq_remote_exec(rc,
							  psprintf("SELECT sequence_name, hwm FROM %s.distseq_peer_epoch_cas($1, $2, $3, $4, $5)",
									   distseq_remote_schema(rc)),
							  5, params);
	for (int i = 0; i < PQntuples(res); i++)
	{
		SeqMark    *m = palloc(sizeof(SeqMark));

		m->name = pstrdup(PQgetvalue(res, i, 0));
		m->hwm = strtoll(PQgetvalue(res, i, 1), NULL, 10);
		*marks = lappend(*marks, m);
	}
	PQclear(res);
}

static bool
is_member(DistseqNodeState *st, int64 node_id)
{
	for (int i = 0; i < st->nmembers; i++)
		if (st->members[i] == node_id)
			return true;
	return false;
}

/*
 * Change the membership to "members" on every node in "voters" (members
 * before and after), this one included; seed "joiner", if any, with the
 * largest marks.  Reverts the nodes that took the change if one refuses.
 */
static void
member_change(const char *schema, DistseqNodeState *st, int64 *members, int nmembers,
			  DistseqPeer *joiner)
{
	int64		new_epoch = st->epoch + 1;
	int64		new_epoch_id;
	char	   *members_text = int8_array_text(members, nmembers);
	char	   *old_members_text = int8_array_text(st->members, st->nmembers);
	List	   *accepted = NIL;
	List	   *marks = NIL;
	ListCell   *lc;
	DistseqNodeState next = *st;

	do
	{
		if (!pg_strong_random(&new_epoch_id, sizeof(new_epoch_id)))
			elog(ERROR, "could not generate a random number");
		new_epoch_id &= PG_INT64_MAX;
	} while (new_epoch_id == 0);
	next.epoch = new_epoch;
	next.epoch_id = new_epoch_id;

	PG_TRY();
	{
		for (int i = 0; i < nmembers; i++)
		{
			DistseqPeer *peer;
			RemoteConn *rc;

			if (members[i] == st->node_id || !is_member(st, members[i]))
				continue;
			peer = distseq_peer_of(schema, members[i]);
			if (peer == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("no distseq peer is registered here for member " INT64_FORMAT,
								members[i]),
						 errhint("Every member must be reachable from this node to change the membership: add its server with distseq_add_peer() first.")));
			rc = distseq_peer_connect(peer);
			remote_epoch_cas(rc, st, new_epoch, new_epoch_id, members_text, &marks);
			accepted = lappend(accepted, peer);
		}
		/* this node last, in the caller's transaction */
		member_epoch_cas(schema, st->epoch, st->epoch_id, new_epoch, new_epoch_id,
						 int8_array(members, nmembers));
	}
	PG_CATCH();
	{
		/* put the nodes that moved back where they were; see the header */
		foreach(lc, accepted)
		{
			List	   *ignored = NIL;

			PG_TRY();
			{
				remote_epoch_cas(distseq_peer_connect(lfirst(lc)), &next,
								 st->epoch, st->epoch_id, old_members_text, &ignored);
			}
			PG_CATCH();
			{
				FlushErrorState();
			}
			PG_END_TRY();
		}
		PG_RE_THROW();
	}
	PG_END_TRY();

	if (joiner)
	{
		/* the joiner gets the largest mark of each sequence, ours included */
		StringInfoData names;
		StringInfoData hwms;
		const char *params[5];
		char		b[2][32];
		PGresult   *res;

		distseq_spi_exec(psprintf("SELECT s.sequence_name, %s FROM %s.distseq_sequences s",
						  HWM_EXPR(schema), schema), 0, NULL, NULL, SPI_OK_SELECT);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			SeqMark    *m = palloc(sizeof(SeqMark));

			m->name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
			m->hwm = distseq_spi_int8(i, 2);
			marks = lappend(marks, m);
		}
		initStringInfo(&names);
		initStringInfo(&hwms);
		appendStringInfoChar(&names, '{');
		appendStringInfoChar(&hwms, '{');
		foreach(lc, marks)
		{
			SeqMark    *m = lfirst(lc);

			appendStringInfo(&names, "%s%s", foreach_current_index(lc) ? "," : "",
							 quote_identifier(m->name));
			appendStringInfo(&hwms, "%s" INT64_FORMAT,
							 foreach_current_index(lc) ? "," : "", m->hwm);
		}
		appendStringInfoChar(&names, '}');
		appendStringInfoChar(&hwms, '}');
		snprintf(b[0], 32, INT64_FORMAT, new_epoch);
		snprintf(b[1], 32, INT64_FORMAT, new_epoch_id);
		params[0] = b[0];
		params[1] = b[1];
		params[2] = members_text;
		params[3] = names.data;
		params[4] = hwms.data;
		res = distseq_remote_exec(distseq_peer_connect(joiner),
								  psprintf("SELECT %s.distseq_peer_adopt($1, $2, $3, $4, $5)",
										   distseq_remote_schema(distseq_peer_connect(joiner))),
								  5, params);
		PQclear(res);
	}
}

/* Lock out a concurrent change started on this node */
static void
member_lock(const char *schema)
{
	distseq_spi_exec(psprintf("LOCK TABLE %s.distseq_peer IN SHARE ROW EXCLUSIVE MODE", schema),
			 0, NULL, NULL, SPI_OK_UTILITY);
}

PG_FUNCTION_INFO_V1(distseq_add_peer);

/*
 * Make a foreign server of the distseq wrapper a peer of this node.  If its
 * node is not a member yet, it joins: it must be fresh (no window of its
 * own), and every member must be reachable.  Run it on every node for
 * every other node, so each can reach all the others.
 */
Datum
distseq_add_peer(PG_FUNCTION_ARGS)
{
	char	   *server_name = NameStr(*PG_GETARG_NAME(0));
	ForeignServer *server;
	ForeignDataWrapper *fdw;
	DistseqPeer peer;
	DistseqNodeState st;
	RemoteConn *rc;
	PGresult   *res;
	int64		peer_node;
	int64		peer_epoch;
	int			peer_members;
	const char *schema;
	Oid			types[3] = {TEXTOID, INT8OID, INT8OID};
	Datum		values[3];

	distseq_check_loaded();
	PreventInTransactionBlock(true, "distseq_add_peer()");
	server = GetForeignServerByName(server_name, false);
	fdw = GetForeignDataWrapper(server->fdwid);
	if (strcmp(fdw->fdwname, "distseq") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" does not use the distseq foreign-data wrapper",
						server_name)));

	memset(&peer, 0, sizeof(peer));
	peer.serverid = server->serverid;
	peer.added_by = GetUserId();
	strlcpy(peer.name, server_name, NAMEDATALEN);
	rc = distseq_peer_connect(&peer);
	res = distseq_remote_exec(rc,
							  psprintf("SELECT node_id, epoch, array_length(members, 1),"
									   " (SELECT count(*) FROM %s.distseq_peer_sequences() WHERE has_windows)"
									   " FROM %s.distseq_peer_state()",
									   distseq_remote_schema(rc), distseq_remote_schema(rc)),
							  0, NULL);
	peer_node = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	peer_epoch = strtoll(PQgetvalue(res, 0, 1), NULL, 10);
	peer_members = atoi(PQgetvalue(res, 0, 2));
	peer.node_id = peer_node;
	{
		bool		has_windows = strcmp(PQgetvalue(res, 0, 3), "0") != 0;

		PQclear(res);
		spi_connect();
		schema = distseq_catalog_schema();
		member_lock(schema);
		distseq_node_state(schema, &st);
		if (peer_node == st.node_id)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("server \"%s\" is this node itself", server_name)));

		values[0] = CStringGetTextDatum(server_name);
		values[1] = Int64GetDatum(peer_node);
		values[2] = Int64GetDatum((int64) GetUserId());
		distseq_spi_exec(psprintf("INSERT INTO %s.distseq_peer (server_name, node_id, added_by)"
						  " VALUES ($1, $2, $3::oid)"
						  " ON CONFLICT (server_name) DO UPDATE"
						  " SET node_id = EXCLUDED.node_id, added_by = EXCLUDED.added_by",
						  schema),
				 3, types, values, SPI_OK_INSERT);

		if (!is_member(&st, peer_node))
		{
			int64	   *members;

			if (peer_epoch != 0 || peer_members != 1 || has_windows)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("server \"%s\" cannot join: it is not a fresh node", server_name),
						 errdetail("A node joins only before it has peers or windows of its own, so that no value it issued can collide.")));
			members = palloc(sizeof(int64) * (st.nmembers + 1));
			memcpy(members, st.members, sizeof(int64) * st.nmembers);
			members[st.nmembers] = peer_node;
			member_change(schema, &st, members, st.nmembers + 1, &peer);
		}
		SPI_finish();
	}
	distseq_worker_wake(MyDatabaseId);
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(distseq_remove_peer);

/*
 * Remove a member (which may be down for good) from the membership, and
 * forget its server here.  Every other member must be reachable.
 */
Datum
distseq_remove_peer(PG_FUNCTION_ARGS)
{
	char	   *server_name = NameStr(*PG_GETARG_NAME(0));
	DistseqNodeState st;
	const char *schema;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	int64		node_id;

	distseq_check_loaded();
	PreventInTransactionBlock(true, "distseq_remove_peer()");
	spi_connect();
	schema = distseq_catalog_schema();
	member_lock(schema);
	values[0] = CStringGetTextDatum(server_name);
	distseq_spi_exec(psprintf("SELECT node_id FROM %s.distseq_peer WHERE server_name = $1", schema),
			 1, types, values, SPI_OK_SELECT);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("server \"%s\" is not a distseq peer of this node", server_name)));
	node_id = distseq_spi_int8(0, 1);
	distseq_node_state(schema, &st);
	if (is_member(&st, node_id))
	{
		int64	   *members = palloc(sizeof(int64) * st.nmembers);
		int			n = 0;

		for (int i = 0; i < st.nmembers; i++)
			if (st.members[i] != node_id)
				members[n++] = st.members[i];
		member_change(schema, &st, members, n, NULL);
	}
	distseq_spi_exec(psprintf("DELETE FROM %s.distseq_peer WHERE server_name = $1", schema),
			 1, types, values, SPI_OK_DELETE);
	SPI_finish();
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(distseq_peer_status);

/* One row per registered peer: can we reach it, and how does it see us */
Datum
distseq_peer_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext cxt = CurrentMemoryContext;
	const char *schema;
	uint64		n;
	DistseqPeer *peers;

	distseq_check_loaded();
	InitMaterializedSRF(fcinfo, 0);
	spi_connect();
	schema = distseq_catalog_schema();
	distseq_spi_exec(psprintf("SELECT node_id FROM %s.distseq_peer ORDER BY server_name", schema),
			 0, NULL, NULL, SPI_OK_SELECT);
	n = SPI_processed;
	peers = MemoryContextAllocZero(cxt, sizeof(DistseqPeer) * Max(n, 1));
	{
		int64	   *ids = palloc(sizeof(int64) * Max(n, 1));

		for (uint64 i = 0; i < n; i++)
			ids[i] = distseq_spi_int8(i, 1);
		for (uint64 i = 0; i < n; i++)
		{
			DistseqPeer *p = distseq_peer_of(schema, ids[i]);

			if (p)
				peers[i] = *p;
			else
				peers[i].node_id = ids[i];
		}
	}
	SPI_finish();

	for (uint64 i = 0; i < n; i++)
	{
		Datum		values[6];
		bool		nulls[6] = {0};
		MemoryContext oldcxt = CurrentMemoryContext;

		values[0] = CStringGetDatum(peers[i].name);
		values[1] = Int64GetDatum(peers[i].node_id);
		nulls[3] = nulls[4] = nulls[5] = true;
		PG_TRY();
		{
			RemoteConn *rc = distseq_peer_connect(&peers[i]);
			PGresult   *res = distseq_remote_exec(rc,
												  psprintf("SELECT epoch, array_length(members, 1) FROM %s.distseq_peer_state()",
														   distseq_remote_schema(rc)),
												  0, NULL);

			values[2] = BoolGetDatum(true);
			values[4] = Int64GetDatum(strtoll(PQgetvalue(res, 0, 0), NULL, 10));
			values[5] = Int32GetDatum(atoi(PQgetvalue(res, 0, 1)));
			nulls[4] = nulls[5] = false;
			PQclear(res);
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			MemoryContextSwitchTo(oldcxt);
			edata = CopyErrorData();
			FlushErrorState();
			values[2] = BoolGetDatum(false);
			values[3] = CStringGetTextDatum(edata->message);
			nulls[3] = false;
		}
		PG_END_TRY();
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	distseq_remote_close_all();
	return (Datum) 0;
}
