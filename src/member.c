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
 * A member in a change of membership that is not active on it yet is
 * pending, and refuses every compare-and-set; change.c changes the
 * membership.
 *
 * Functions peers call run with the extension owner's rights, each in its
 * own transaction on the callee, committed synchronously.
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

/* The high-water mark of a sequence row "s" in the catalog, in slots */
#define HWM_EXPR(schema) distseq_hwm_expr(schema)

/* This node's identity and membership view.  SPI must be connected. */
void
distseq_node_state(const char *schema, DistseqNodeState *st)
{
	bool		isnull;

	distseq_spi_exec(psprintf("SELECT node_id, epoch, epoch_id, members, %s FROM %s.distseq_node",
							  distseq_catalog_minor() >= 4 ? "pending, COALESCE(proposer, 0)" :
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

PG_FUNCTION_INFO_V1(distseq_accept_promotion);

/*
 * Let a promoted synchronous standby of a member take the member's place.
 * The administrator vouches for what this node cannot see: that every
 * commit of the old primary waited for this standby (so it holds all the
 * member promised), and that the old primary never comes back.  Only the
 * timeline may differ from where the member was made.
 */
Datum
distseq_accept_promotion(PG_FUNCTION_ARGS)
{
	const char *schema;
	Oid			types[3] = {INT8OID, INT8OID, INT8OID};
	Datum		values[3];

	distseq_check_loaded();
	distseq_check_writable("distseq_accept_promotion()");
	distseq_spi_connect();
	schema = distseq_catalog_schema();
	values[0] = Int64GetDatum((int64) GetSystemIdentifier());
	values[1] = Int64GetDatum((int64) distseq_timeline());
	values[2] = Int64GetDatum((int64) MyDatabaseId);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET origin_timeline = $2"
							  " WHERE origin_system = $1 AND origin_database = $3::oid"
							  "   AND origin_timeline < $2 AND (epoch > 0 OR cardinality(members) > 1)",
							  schema), 3, types, values, SPI_OK_UPDATE);
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this distseq node is not a promoted standby of a member"),
				 errdetail("Only a member found on a newer timeline of the server and database it was made on can take its own place.")));
	/* its sequences are the member's too: no rejoin for them */
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences SET origin_timeline = $2"
							  " WHERE origin_system = $1 AND origin_database = $3::oid"
							  "   AND origin_timeline < $2", schema),
					 3, types, values, SPI_OK_UPDATE);
	SPI_finish();
	distseq_worker_wake(MyDatabaseId);
	PG_RETURN_VOID();
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

/*
 * The connection to a peer, with the user mapping of the role that added
 * it, only while that role may use the server: as a refill checks the
 * sequence owner's right at each refill, and dblink at each connection.
 */
RemoteConn *
distseq_peer_connect(DistseqPeer *peer)
{
	if (distseq_foreign_server_aclcheck(peer->serverid, peer->added_by, ACL_USAGE) != ACLCHECK_OK)
	{
		char	   *role = GetUserNameFromId(peer->added_by, true);

		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\", which added distseq peer \"%s\", may no longer use its server",
						role ? role : psprintf("%u", peer->added_by), peer->name),
				 errhint("Grant USAGE on the server to that role again, or run distseq_add_peer() again as a role that may use it.")));
	}
	return distseq_remote_get(peer->serverid, peer->added_by);
}

/* One statement on a peer, in distseq_remote_try() */
typedef struct PeerCall
{
	DistseqPeer *peer;
	const char *sql;
	int			nparams;
	const char **params;
	const char *columns;		/* NULL: the answer does not matter */
	int			nrows;
	DistseqRemoteResult *res;
} PeerCall;

static void
peer_call(void *arg)
{
	PeerCall   *c = arg;
	RemoteConn *rc = distseq_peer_connect(c->peer);
	char	   *sql = psprintf(c->sql, distseq_remote_schema(rc));

	if (c->columns)
		c->res = distseq_remote_query(rc, sql, c->nparams, c->params, c->columns,
									  c->nrows);
	else
		distseq_remote_command(rc, sql, c->nparams, c->params);
}

/*
 * Run "sql" (%s stands for the peer's schema) on a peer, in a
 * subtransaction, and return its answer checked as distseq_remote_query()
 * does; NULL, with the message in *error, on failure or a bad answer.
 */
DistseqRemoteResult *
distseq_peer_exec(DistseqPeer *peer, const char *sql, int nparams, const char **params,
				  const char *columns, int nrows, char **error)
{
	PeerCall	c = {peer, sql, nparams, params, columns, nrows, NULL};

	if (!distseq_remote_try(peer_call, &c, error))
		return NULL;
	return c.res;
}

/* The same, for a statement whose answer does not matter */
bool
distseq_peer_do(DistseqPeer *peer, const char *sql, int nparams, const char **params,
				char **error)
{
	PeerCall	c = {peer, sql, nparams, params, NULL, 0, NULL};

	return distseq_remote_try(peer_call, &c, error);
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
							  "%s FOR SHARE", schema,
							  distseq_catalog_minor() >= 4 ? " AND NOT pending" : ""),
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

typedef struct PeerProbe
{
	DistseqPeer *peer;
	int64		epoch;
	int32		members;
	bool		has_windows;	/* false when the peer has no sequence */
	int64		open_windows;
	Datum		runway;			/* numeric, or 0 for NULL */
	bool		has_pending;	/* false from version 1.3 */
	bool		pending;
} PeerProbe;

static void
peer_probe(void *arg)
{
	PeerProbe  *p = arg;
	RemoteConn *rc = distseq_peer_connect(p->peer);
	const char *schema = distseq_remote_schema(rc);
	DistseqRemoteResult *res;

	/* from 1.5 on, not through the view: see distseq_peer_runway() */
	res = distseq_remote_query(rc,
							   psprintf(strcmp(schema, "distseq") == 0 ?
										"SELECT n.epoch, pg_catalog.array_length(n.members, 1),"
										" r.open_windows, r.runway_seconds, n.pending"
										" FROM %1$s.distseq_peer_state() n,"
										" %1$s.distseq_peer_runway() r" :
										"SELECT n.epoch, pg_catalog.array_length(n.members, 1),"
										" (SELECT pg_catalog.sum(open_windows) FROM %1$s.distseq_status),"
										" (SELECT pg_catalog.min(runway_seconds) FROM %1$s.distseq_status),"
										" (pg_catalog.to_jsonb(n) OPERATOR(pg_catalog.->>) 'pending')::pg_catalog.bool"
										" FROM %1$s.distseq_peer_state() n",
										schema),
							   0, NULL, "li?l?n?b?", 1);
	p->epoch = distseq_remote_int8(res, 0, 0);
	p->members = distseq_remote_isnull(res, 0, 1) ? 0 :
		(int32) distseq_remote_int8(res, 0, 1);
	p->has_windows = !distseq_remote_isnull(res, 0, 2);
	if (p->has_windows)
		p->open_windows = distseq_remote_int8(res, 0, 2);
	p->runway = distseq_remote_isnull(res, 0, 3) ? (Datum) 0 :
		DirectFunctionCall3(numeric_in, CStringGetDatum(distseq_remote_text(res, 0, 3)),
							ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
	p->has_pending = !distseq_remote_isnull(res, 0, 4);
	if (p->has_pending)
		p->pending = distseq_remote_bool(res, 0, 4);
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
	distseq_spi_connect();
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
		Datum		values[9];
		bool		nulls[9] = {0};

		values[0] = CStringGetDatum(peers[i].name);
		values[1] = Int64GetDatum(peers[i].node_id);
		nulls[3] = nulls[4] = nulls[5] = nulls[6] = nulls[7] = nulls[8] = true;
		{
			PeerProbe	probe = {&peers[i]};
			char	   *error = NULL;

			if (peers[i].serverid != InvalidOid &&
				distseq_remote_try(peer_probe, &probe, &error))
			{
				values[2] = BoolGetDatum(true);
				values[4] = Int64GetDatum(probe.epoch);
				values[5] = Int32GetDatum(probe.members);
				nulls[4] = nulls[5] = false;
				if (probe.has_windows)
				{
					values[6] = Int64GetDatum(probe.open_windows);
					nulls[6] = false;
				}
				if (probe.runway)
				{
					values[7] = probe.runway;
					nulls[7] = false;
				}
				if (probe.has_pending)
				{
					values[8] = BoolGetDatum(probe.pending);
					nulls[8] = false;
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
