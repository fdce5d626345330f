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
#include "access/xlog.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "funcapi.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/acl.h"
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
					" COALESCE((SELECT w.window_end FROM %s.distseq_windows w"
					" WHERE w.sequence_name = s.sequence_name"
					" ORDER BY w.window_start DESC LIMIT 1), s.start_value))",
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

/*
 * Does this node have peers?  Takes a share lock on the node row, which
 * orders window making here against a join (distseq_peer_adopt).
 */
bool
distseq_has_peers(const char *schema)
{
	bool		isnull;

	distseq_spi_exec(psprintf("SELECT cardinality(members) > 1 FROM %s.distseq_node FOR SHARE",
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
 * (each of its sequences rejoins on its own, see catalog.c).  SPI
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
	distseq_spi_exec(psprintf("SELECT cardinality(members),"
							  " (origin_system, origin_timeline, origin_database)"
							  "   IS DISTINCT FROM ($1, $2, $3::oid)"
							  " FROM %s.distseq_node", schema),
					 3, types, values, SPI_OK_SELECT);
	if (SPI_processed != 1 ||
		!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
									&isnull)))
		return;
	if (distseq_spi_int8(0, 1) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this distseq node is a copy of a member (restored, cloned or promoted) and takes no part in its group"),
				 errdetail("A copy may have promised the other members less than the member it was made from."),
				 errhint("Remove it with distseq_remove_peer() on the other members; let a fresh node join instead.")));
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET origin_system = $1,"
							  " origin_timeline = $2, origin_database = $3::oid", schema),
					 3, types, values, SPI_OK_UPDATE);
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
	MemoryContext caller = CurrentMemoryContext;
	DistseqNodeState st;
	Datum		values[4];
	bool		nulls[4] = {0};
	Datum		result;

	spi_connect();
	distseq_node_state(distseq_catalog_schema(), &st);
	values[0] = Int64GetDatum(st.node_id);
	values[1] = Int64GetDatum(st.epoch);
	values[2] = Int64GetDatum(st.epoch_id);
	/* the result must outlive SPI's memory */
	MemoryContextSwitchTo(caller);
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

	spi_connect();
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
							  HWM_EXPR(schema), schema, schema, schema),
					 1, types, values, SPI_OK_SELECT);
	nulls[0] = SPI_tuptable->vals[0] == NULL ||
		SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1) == NULL;
	values[0] = Int64GetDatum(distseq_spi_int8(0, 1));
	values[1] = Int64GetDatum(distseq_spi_int8(0, 2));
	values[2] = Int64GetDatum(distseq_spi_int8(0, 3));
	SPI_finish();
	return return_row(fcinfo, values, nulls);
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

	distseq_node_verify(schema);
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
	/*
	 * Only a fresh node joins: alone, and without a window of any sequence
	 * the agent keeps.  Checked here, under the node row's lock, which
	 * making windows takes too (distseq_has_peers), so none can appear
	 * between this check and the join.  Taking the same membership again
	 * is a no-op.
	 */
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node n SET epoch = $1, epoch_id = $2, members = $3"
							  " WHERE (n.epoch = $1 AND n.epoch_id = $2)"
							  " OR (n.epoch = 0 AND n.members = ARRAY[n.node_id]"
							  "     AND NOT EXISTS (SELECT 1 FROM %s.distseq_windows w"
							  "       JOIN %s.distseq_sequences s USING (sequence_name)"
							  "       WHERE s.stripes = 1 AND s.servers IS NULL))",
							  schema, schema, schema),
					 5, types, values, SPI_OK_UPDATE);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this distseq node cannot join: it is not fresh"),
				 errdetail("It has peers or windows of its own.")));
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences s SET hwm = GREATEST(%s, v.hwm)"
					  " FROM unnest($4, $5) AS v(name, hwm) WHERE s.sequence_name = v.name",
					  schema, HWM_EXPR(schema)),
			 5, types, values, SPI_OK_UPDATE);
	/* and for every sequence, had or not: one introduced later starts above */
	distseq_spi_exec(psprintf("INSERT INTO %s.distseq_seed (sequence_name, hwm)"
							  " SELECT name, max(hwm) FROM unnest($4, $5) AS v(name, hwm) GROUP BY name"
							  " ON CONFLICT (sequence_name)"
							  " DO UPDATE SET hwm = GREATEST(%s.distseq_seed.hwm, EXCLUDED.hwm)",
							  schema, schema),
					 5, types, values, SPI_OK_INSERT);
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
	distseq_check_name(name);
	if (PG_GETARG_INT32(5) < 1 || PG_GETARG_INT32(5) > DISTSEQ_MAX_OPEN_WINDOWS ||
		PG_GETARG_INT32(1) < 1 || PG_GETARG_INT64(2) < 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid definition of distseq sequence \"%s\"", name)));
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
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences SET hwm = GREATEST($2,"
							  " (SELECT hwm FROM %s.distseq_seed WHERE sequence_name = $1))"
							  " WHERE sequence_name = $1",
							  schema, schema), 2, types, values, SPI_OK_UPDATE);
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

typedef struct EpochStep
{
	const char *schema;
	DistseqPeer *peer;			/* NULL: this node */
	DistseqNodeState *from;
	DistseqNodeState *to;
	int64	   *members;
	int			nmembers;
	char	   *members_text;
	List	   *marks;
	/* for the joiner's adopt */
	char	   *names;
	char	   *hwms;
} EpochStep;

static void
step_remote_epoch_cas(void *arg)
{
	EpochStep  *es = arg;

	remote_epoch_cas(distseq_peer_connect(es->peer), es->from, es->to->epoch,
					 es->to->epoch_id, es->members_text, &es->marks);
}

static void
step_local_epoch_cas(void *arg)
{
	EpochStep  *es = arg;

	member_epoch_cas(es->schema, es->from->epoch, es->from->epoch_id,
					 es->to->epoch, es->to->epoch_id,
					 int8_array(es->members, es->nmembers));
}

static void
step_adopt(void *arg)
{
	EpochStep  *es = arg;
	RemoteConn *rc = distseq_peer_connect(es->peer);
	char		b[2][32];
	const char *params[5];
	PGresult   *res;

	snprintf(b[0], 32, INT64_FORMAT, es->to->epoch);
	snprintf(b[1], 32, INT64_FORMAT, es->to->epoch_id);
	params[0] = b[0];
	params[1] = b[1];
	params[2] = es->members_text;
	params[3] = es->names;
	params[4] = es->hwms;
	res = distseq_remote_exec(rc,
							  psprintf("SELECT %s.distseq_peer_adopt($1, $2, $3, $4, $5)",
									   distseq_remote_schema(rc)),
							  5, params);
	PQclear(res);
}

/* The largest mark of each sequence, as array literals for adopt */
static void
marks_text(const char *schema, List *marks, char **names, char **hwms)
{
	StringInfoData n;
	StringInfoData h;
	ListCell   *lc;

	distseq_spi_exec(psprintf("SELECT s.sequence_name, %s FROM %s.distseq_sequences s",
							  HWM_EXPR(schema), schema), 0, NULL, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		SeqMark    *m = palloc(sizeof(SeqMark));

		m->name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		m->hwm = distseq_spi_int8(i, 2);
		marks = lappend(marks, m);
	}
	initStringInfo(&n);
	initStringInfo(&h);
	appendStringInfoChar(&n, '{');
	appendStringInfoChar(&h, '{');
	foreach(lc, marks)
	{
		SeqMark    *m = lfirst(lc);
		const char *sep = foreach_current_index(lc) ? "," : "";

		/* an array literal: quote the element, escape quotes and backslashes */
		appendStringInfo(&n, "%s\"", sep);
		for (const char *c = m->name; *c; c++)
		{
			if (*c == '"' || *c == '\\')
				appendStringInfoChar(&n, '\\');
			appendStringInfoChar(&n, *c);
		}
		appendStringInfoChar(&n, '"');
		appendStringInfo(&h, "%s" INT64_FORMAT, sep, m->hwm);
	}
	appendStringInfoChar(&n, '}');
	appendStringInfoChar(&h, '}');
	*names = n.data;
	*hwms = h.data;
}

/*
 * Change the membership to "members" on every voter (members before and
 * after), this node last, in the caller's transaction; then seed "joiner",
 * if any, with the largest marks.  Each step runs in a subtransaction; if
 * one fails, every voter tried is put back (the compare-and-set back only
 * applies to a node that did move) and the caller's transaction, with this
 * node's change, is aborted by the error.
 */
static void
member_change(const char *schema, DistseqNodeState *st, int64 *members, int nmembers,
			  DistseqPeer *joiner)
{
	DistseqNodeState next = *st;
	EpochStep	es = {0};
	List	   *tried = NIL;
	char	   *error = NULL;
	bool		ok = true;
	ListCell   *lc;

	next.epoch = st->epoch + 1;
	do
	{
		if (!pg_strong_random(&next.epoch_id, sizeof(next.epoch_id)))
			elog(ERROR, "could not generate a random number");
		next.epoch_id &= PG_INT64_MAX;
	} while (next.epoch_id == 0);

	es.schema = schema;
	es.from = st;
	es.to = &next;
	es.members = members;
	es.nmembers = nmembers;
	es.members_text = int8_array_text(members, nmembers);

	for (int i = 0; i < nmembers && ok; i++)
	{
		if (members[i] == st->node_id || !is_member(st, members[i]))
			continue;
		es.peer = distseq_peer_of(schema, members[i]);
		if (es.peer == NULL)
		{
			error = psprintf("no distseq peer is registered here for member " INT64_FORMAT,
							 members[i]);
			ok = false;
			break;
		}
		tried = lappend(tried, es.peer);
		ok = distseq_remote_try(step_remote_epoch_cas, &es, &error);
	}
	if (ok)
		ok = distseq_remote_try(step_local_epoch_cas, &es, &error);
	if (ok && joiner)
	{
		marks_text(schema, es.marks, &es.names, &es.hwms);
		es.peer = joiner;
		ok = distseq_remote_try(step_adopt, &es, &error);
	}
	if (ok)
		return;

	foreach(lc, tried)
	{
		EpochStep	back = es;

		back.peer = lfirst(lc);
		back.from = &next;
		back.to = st;
		back.members_text = int8_array_text(st->members, st->nmembers);
		back.marks = NIL;
		(void) distseq_remote_try(step_remote_epoch_cas, &back, NULL);
	}
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not change the distseq membership: %s", error),
			 errhint("Every member must be reachable from this node, with a server added by distseq_add_peer().")));
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
	int			search_path_level;
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
	search_path_level = distseq_pin_search_path();
	PreventInTransactionBlock(true, "distseq_add_peer()");
	server = GetForeignServerByName(server_name, false);
	if (pg_foreign_server_aclcheck(server->serverid, GetUserId(), ACL_USAGE) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FOREIGN_SERVER, server->servername);
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
	distseq_unpin_search_path(search_path_level);
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
	int			search_path_level;
	char	   *server_name = NameStr(*PG_GETARG_NAME(0));
	DistseqNodeState st;
	const char *schema;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	int64		node_id;

	distseq_check_loaded();
	search_path_level = distseq_pin_search_path();
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

	/*
	 * Removing a member can lose the record of windows it helped win (a
	 * model check found how: removes shrink the set of nodes that hold a
	 * win), and a remove from two members splits them.  Until removes seed
	 * the remaining members in a two-phase change, only servers that are not
	 * members can be removed here.
	 */
	if (is_member(&st, node_id))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("removing a member from a distseq group is not supported yet"),
				 errdetail("Server \"%s\" is a member; removing it safely needs a change that seeds every remaining member.",
						   server_name),
				 errhint("A member that is down for good costs only its vote: the others go on while a majority is up.")));
	distseq_spi_exec(psprintf("DELETE FROM %s.distseq_peer WHERE server_name = $1", schema),
			 1, types, values, SPI_OK_DELETE);
	SPI_finish();
	distseq_unpin_search_path(search_path_level);
	PG_RETURN_VOID();
}

typedef struct PeerProbe
{
	DistseqPeer *peer;
	int64		epoch;
	int			members;
	char	   *open_windows;	/* as text; NULL when the peer has none */
	char	   *runway;
} PeerProbe;

static void
peer_probe(void *arg)
{
	PeerProbe  *p = arg;
	RemoteConn *rc = distseq_peer_connect(p->peer);
	PGresult   *res = distseq_remote_exec(rc,
										  psprintf("SELECT n.epoch, array_length(n.members, 1),"
												   " (SELECT sum(open_windows) FROM %1$s.distseq_status),"
												   " (SELECT min(runway_seconds) FROM %1$s.distseq_status)"
												   " FROM %1$s.distseq_peer_state() n",
												   distseq_remote_schema(rc)),
										  0, NULL);

	p->epoch = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	p->members = atoi(PQgetvalue(res, 0, 1));
	p->open_windows = PQgetisnull(res, 0, 2) ? NULL : pstrdup(PQgetvalue(res, 0, 2));
	p->runway = PQgetisnull(res, 0, 3) ? NULL : pstrdup(PQgetvalue(res, 0, 3));
	PQclear(res);
}

PG_FUNCTION_INFO_V1(distseq_peer_status);

/* One row per registered peer: can we reach it, and how does it see us */
Datum
distseq_peer_status(PG_FUNCTION_ARGS)
{
	int			search_path_level;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext cxt = CurrentMemoryContext;
	const char *schema;
	uint64		n;
	DistseqPeer *peers;

	distseq_check_loaded();
	search_path_level = distseq_pin_search_path();
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
		Datum		values[8];
		bool		nulls[8] = {0};

		values[0] = CStringGetDatum(peers[i].name);
		values[1] = Int64GetDatum(peers[i].node_id);
		nulls[3] = nulls[4] = nulls[5] = nulls[6] = nulls[7] = true;
		{
			PeerProbe	probe = {&peers[i], 0, 0};
			char	   *error = NULL;

			if (peers[i].serverid != InvalidOid &&
				distseq_remote_try(peer_probe, &probe, &error))
			{
				values[2] = BoolGetDatum(true);
				values[4] = Int64GetDatum(probe.epoch);
				values[5] = Int32GetDatum(probe.members);
				nulls[4] = nulls[5] = false;
				if (probe.open_windows)
				{
					values[6] = DirectFunctionCall1(int8in, CStringGetDatum(probe.open_windows));
					nulls[6] = false;
				}
				if (probe.runway)
				{
					values[7] = DirectFunctionCall3(numeric_in, CStringGetDatum(probe.runway),
													ObjectIdGetDatum(InvalidOid),
													Int32GetDatum(-1));
					nulls[7] = false;
				}
			}
			else
			{
				values[2] = BoolGetDatum(false);
				values[3] = CStringGetTextDatum(error ? error : "no foreign server of that name");
				nulls[3] = false;
			}
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	distseq_unpin_search_path(search_path_level);
	distseq_remote_close_all();
	return (Datum) 0;
}
