/*-------------------------------------------------------------------------
 *
 * client.c
 *	  The calling side of the multi-node protocol: how this node reaches a
 *	  member (its foreign server, with the user mapping of the role that
 *	  added it), and one C function per function a peer answers
 *	  (distseq_call_*), which sends its arguments and reads its answer,
 *	  checked.  Callers never see SQL.
 *
 * Each call is SELECT [columns FROM] schema.function($1::type, ...): the
 * peer's schema quoted once (distseq_remote_schema), every function and
 * parameter type qualified (see remote.c on why).  Arrays are built as
 * Datums and sent as PostgreSQL's own text form of them (array_out).
 *
 * A call given "error" runs in a subtransaction (distseq_remote_try): on
 * failure it returns false with the message there, so that a peer that
 * fails costs its caller no more than that.  Without it, a failure raises
 * its error.  Connections themselves, their bounds and the checks of every
 * answer are remote.c's.  Reads distseq_peer with SPI connected; takes no
 * lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"

/* How to reach a member, or NULL when this node has no server for it */
DistseqPeer *
distseq_client_of(const char *schema, int64 node_id)
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
static RemoteConn *
client_connect(DistseqPeer *peer)
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

/*
 * One call of a peer's function.  "args" has a letter per parameter: l
 * bigint, i integer, a bigint[], t text, T text[], b boolean.  "sql", when
 * set, builds a statement of another shape from the peer's schema.
 */
typedef struct ClientCall
{
	DistseqPeer *peer;
	const char *select;			/* the columns read from the function, or NULL */
	const char *fn;
	const char *args;
	const char *const *params;
	const char *columns;		/* of the answer; NULL: it does not matter */
	int			nrows;
	char	   *(*sql) (const char *schema);
	void		(*read) (const DistseqRemoteResult *res, void *out);	/* in the call */
	void	   *out;
	DistseqRemoteResult *res;
} ClientCall;

static const char *
client_type(char letter)
{
	switch (letter)
	{
		case 'l':
			return "pg_catalog.int8";
		case 'i':
			return "pg_catalog.int4";
		case 'a':
			return "pg_catalog.int8[]";
		case 't':
			return "pg_catalog.text";
		case 'T':
			return "pg_catalog.text[]";
		case 'b':
			return "pg_catalog.bool";
	}
	elog(ERROR, "distseq: no parameter type '%c'", letter);
	return NULL;				/* keep compiler quiet */
}

static char *
client_sql(const ClientCall *c, const char *schema)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	if (c->select)
		appendStringInfo(&sql, "%s FROM ", c->select);
	appendStringInfo(&sql, "%s.%s(", schema, c->fn);
	for (int i = 0; c->args[i]; i++)
		appendStringInfo(&sql, "%s$%d::%s", i ? ", " : "", i + 1, client_type(c->args[i]));
	appendStringInfoChar(&sql, ')');
	return sql.data;
}

static void
client_call(void *arg)
{
	ClientCall *c = arg;
	RemoteConn *rc = client_connect(c->peer);
	const char *schema = distseq_remote_schema(rc);
	char	   *sql = c->sql ? c->sql(schema) : client_sql(c, schema);
	int			nparams = strlen(c->args);

	if (c->columns)
		c->res = distseq_remote_query(rc, sql, nparams, c->params, c->columns, c->nrows);
	else
		distseq_remote_command(rc, sql, nparams, c->params);
	if (c->read)
		c->read(c->res, c->out);
}

/* Make a call: caught with "error", raising without */
static bool
client_run(ClientCall *c, char **error)
{
	if (error == NULL)
	{
		client_call(c);
		return true;
	}
	return distseq_remote_try(client_call, c, error);
}

static char *
int8_param(int64 v)
{
	return psprintf(INT64_FORMAT, v);
}

/* An array Datum as a text parameter, in PostgreSQL's own text form */
static char *
array_param(Datum array)
{
	return OidOutputFunctionCall(F_ARRAY_OUT, array);
}

static char *
int8s_param(const int64 *vals, int n)
{
	return array_param(distseq_int8_array((int64 *) vals, n));
}

/* How to reach a member, or NULL with the reason in *error */
DistseqPeer *
distseq_client_or_error(const char *schema, int64 node_id, char **error)
{
	DistseqPeer *peer = distseq_client_of(schema, node_id);

	if (peer == NULL)
		*error = psprintf("no distseq peer is registered here for node " INT64_FORMAT, node_id);
	return peer;
}

/* ---- the steps of a membership change (peer.c answers them) ---- */

/* Phase one on a fresh node that joins the change "c" */
bool
distseq_call_join(DistseqPeer *peer, const DistseqChange *c, int64 proposer, int64 node_id,
				  char **error)
{
	const char *params[5] = {int8_param(c->epoch), int8_param(c->epoch_id),
	int8s_param(c->members, c->nmembers), int8_param(proposer), int8_param(node_id)};
	ClientCall	call = {peer, NULL, "distseq_peer_join", "llall", params};

	return client_run(&call, error);
}

/* Phase one on a member: from c's membership before to c's, pending */
bool
distseq_call_move(DistseqPeer *peer, const DistseqChange *c, int64 proposer, int64 node_id,
				  char **error)
{
	const char *params[7] = {int8_param(c->prev_epoch), int8_param(c->prev_epoch_id),
		int8_param(c->epoch), int8_param(c->epoch_id), int8s_param(c->members, c->nmembers),
	int8_param(proposer), int8_param(node_id)};
	ClientCall	call = {peer, NULL, "distseq_peer_epoch_cas", "llllall", params};

	return client_run(&call, error);
}

/* Back from a pending membership whose change was not decided */
bool
distseq_call_revert(DistseqPeer *peer, int64 epoch, int64 epoch_id, char **error)
{
	const char *params[2] = {int8_param(epoch), int8_param(epoch_id)};
	ClientCall	call = {peer, NULL, "distseq_peer_revert", "ll", params};

	return client_run(&call, error);
}

/* A member's marks once it is in the given membership, added to *marks */
bool
distseq_call_marks(DistseqPeer *peer, int64 epoch, int64 epoch_id, List **marks,
				   char **error)
{
	const char *params[2] = {int8_param(epoch), int8_param(epoch_id)};
	ClientCall	call = {peer, "sequence_name, hwm", "distseq_peer_marks", "ll", params,
	"tl", -1};

	if (!client_run(&call, error))
		return false;
	for (int i = 0; i < distseq_remote_ntuples(call.res); i++)
	{
		DistseqMark *m = palloc(sizeof(DistseqMark));

		m->name = pstrdup(distseq_remote_text(call.res, i, 0));
		m->hwm = distseq_remote_int8(call.res, i, 1);
		*marks = lappend(*marks, m);
	}
	return true;
}

/* Phase two on a member: marks raised to names/hwms (text[], bigint[]) */
bool
distseq_call_activate(DistseqPeer *peer, const DistseqChange *c, Datum names, Datum hwms,
					  int64 node_id, char **error)
{
	const char *params[8] = {int8_param(c->epoch), int8_param(c->epoch_id),
		int8_param(c->prev_epoch), int8_param(c->prev_epoch_id),
		int8s_param(c->members, c->nmembers), array_param(names), array_param(hwms),
	int8_param(node_id)};
	ClientCall	call = {peer, NULL, "distseq_peer_activate", "llllaTal", params};

	return client_run(&call, error);
}

/* Was the change to (epoch, epoch_id) decided on its proposer? */
bool
distseq_call_decided(DistseqPeer *peer, int64 epoch, int64 epoch_id, int64 proposer,
					 bool *decided, char **error)
{
	const char *params[3] = {int8_param(epoch), int8_param(epoch_id), int8_param(proposer)};
	ClientCall	call = {peer, NULL, "distseq_peer_decided", "lll", params, "b", 1};

	if (!client_run(&call, error))
		return false;
	*decided = distseq_remote_bool(call.res, 0, 0);
	return true;
}

/* The epoch a member is in */
bool
distseq_call_epoch(DistseqPeer *peer, int64 *epoch, char **error)
{
	ClientCall	call = {peer, "epoch", "distseq_peer_state", "", NULL, "l", 1};

	if (!client_run(&call, error))
		return false;
	*epoch = distseq_remote_int8(call.res, 0, 0);
	return true;
}

/* A prepare of membership (epoch, epoch_id) at ballot (round, settler) */
bool
distseq_call_prepare(DistseqPeer *peer, int64 epoch, int64 epoch_id, int64 round,
					 int64 settler, int64 node_id, DistseqPromise *p, char **error)
{
	const char *params[5] = {int8_param(epoch), int8_param(epoch_id), int8_param(round),
	int8_param(settler), int8_param(node_id)};
	ClientCall	call = {peer, "answer, promised_round, promised_node, accepted_round,"
		" accepted_node, pending, change_epoch, change_epoch_id, members",
	"distseq_peer_prepare", "lllll", params, "tllllblla", 1};
	const char *a;

	if (!client_run(&call, error))
		return false;
	a = distseq_remote_text(call.res, 0, 0);
	p->answer = strcmp(a, "promise") == 0 ? 'p' : strcmp(a, "decided") == 0 ? 'd' :
		strcmp(a, "refused") == 0 ? 'r' : 'e';
	p->promised_round = distseq_remote_int8(call.res, 0, 1);
	p->promised_node = distseq_remote_int8(call.res, 0, 2);
	p->accepted_round = distseq_remote_int8(call.res, 0, 3);
	p->accepted_node = distseq_remote_int8(call.res, 0, 4);
	p->pending = distseq_remote_bool(call.res, 0, 5);
	p->epoch = distseq_remote_int8(call.res, 0, 6);
	p->epoch_id = distseq_remote_int8(call.res, 0, 7);
	p->members = (int64 *) distseq_remote_int8s(call.res, 0, 8, &p->nmembers);
	return true;
}

/* An accept of change "c" from (epoch, epoch_id) at ballot (round, settler) */
bool
distseq_call_accept(DistseqPeer *peer, int64 epoch, int64 epoch_id, int64 round,
					int64 settler, const DistseqChange *c, int64 node_id, bool *accepted,
					char **error)
{
	const char *params[8] = {int8_param(epoch), int8_param(epoch_id), int8_param(round),
		int8_param(settler), int8_param(c->epoch), int8_param(c->epoch_id),
	int8s_param(c->members, c->nmembers), int8_param(node_id)};
	ClientCall	call = {peer, NULL, "distseq_peer_accept", "llllllal", params, "b", 1};

	if (!client_run(&call, error))
		return false;
	*accepted = distseq_remote_bool(call.res, 0, 0);
	return true;
}

static char *
candidate_sql(const char *schema)
{
	return psprintf("SELECT node_id, epoch, members, pending, EXISTS"
					"  (SELECT 1 FROM %s.distseq_peer_sequences() WHERE has_windows)"
					" FROM %s.distseq_peer_state()", schema, schema);
}

/*
 * How a server to be added sees itself: its node, epoch and members,
 * whether it is pending, and whether it has a window of a sequence peers
 * share.
 */
void
distseq_call_candidate(DistseqPeer *peer, DistseqNodeState *st, bool *has_windows)
{
	ClientCall	call = {peer, NULL, NULL, "", NULL, "llabb", 1, candidate_sql};

	(void) client_run(&call, NULL);
	st->node_id = distseq_remote_int8(call.res, 0, 0);
	st->epoch = distseq_remote_int8(call.res, 0, 1);
	st->members = (int64 *) distseq_remote_int8s(call.res, 0, 2, &st->nmembers);
	st->pending = distseq_remote_bool(call.res, 0, 3);
	*has_windows = distseq_remote_bool(call.res, 0, 4);
}

/* ---- the agent's calls (agent.c) ---- */

static char *
view_sql(const char *schema)
{
	/* "pending" through jsonb: not in version 1.3's row */
	return psprintf("SELECT s.sequence_name IS NOT NULL, n.epoch, n.epoch_id, n.members,"
					" (pg_catalog.to_jsonb(n) OPERATOR(pg_catalog.->>) 'pending')::pg_catalog.bool"
					" FROM %s.distseq_peer_state() n"
					" LEFT JOIN %s.distseq_peer_sequences() s"
					" ON s.sequence_name OPERATOR(pg_catalog.=) $1::pg_catalog.text",
					schema, schema);
}

/* A member's membership, and whether it has sequence "name" */
bool
distseq_call_view(DistseqPeer *peer, const char *name, DistseqMemberView *v, char **error)
{
	const char *params[1] = {name};
	ClientCall	call = {peer, NULL, NULL, "t", params, "bllab?", 1, view_sql};

	if (!client_run(&call, error))
		return false;
	v->has_sequence = distseq_remote_bool(call.res, 0, 0);
	v->epoch = distseq_remote_int8(call.res, 0, 1);
	v->epoch_id = distseq_remote_int8(call.res, 0, 2);
	v->members = distseq_remote_int8s(call.res, 0, 3, &v->nmembers);
	v->active = !distseq_remote_isnull(call.res, 0, 4) && !distseq_remote_bool(call.res, 0, 4);
	return true;
}

/* A member's high-water mark of sequence "name" (its seed without it) */
bool
distseq_call_hwm(DistseqPeer *peer, const char *name, bool *has_hwm, int64 *hwm,
				 char **error)
{
	const char *params[1] = {name};
	ClientCall	call = {peer, "hwm", "distseq_peer_hwm", "t", params, "l?", 1};

	if (!client_run(&call, error))
		return false;
	*has_hwm = !distseq_remote_isnull(call.res, 0, 0);
	if (*has_hwm)
		*hwm = distseq_remote_int8(call.res, 0, 0);
	return true;
}

/* Introduce sequence "name" on a member, seeded with mark "top" */
bool
distseq_call_create(DistseqPeer *peer, const char *name, int32 block_size, int64 window_size,
					int64 start_value, int64 max_value, int32 min_open, int64 top,
					char **error)
{
	const char *params[7] = {name, psprintf("%d", block_size), int8_param(window_size),
		int8_param(start_value), int8_param(max_value), psprintf("%d", min_open),
	int8_param(top)};
	ClientCall	call = {peer, NULL, "distseq_peer_create", "tilllil", params, "b", 1};

	return client_run(&call, error);
}

/* Raise a member's mark of "name" from at most "expected" to "new_hwm" */
bool
distseq_call_cas(DistseqPeer *peer, const char *name, int64 epoch, int64 epoch_id,
				 int64 expected, int64 new_hwm, bool *won, char **error)
{
	const char *params[5] = {name, int8_param(epoch), int8_param(epoch_id),
	int8_param(expected), int8_param(new_hwm)};
	ClientCall	call = {peer, NULL, "distseq_peer_cas", "tllll", params, "b", 1};

	if (!client_run(&call, error))
		return false;
	*won = distseq_remote_bool(call.res, 0, 0);
	return true;
}

/* ---- distseq_setval() and distseq_alter() on a member (redefine.c) ---- */

static bool
redefine_top(ClientCall *call, bool *has_top, int64 *top, char **error)
{
	if (!client_run(call, error))
		return false;
	*has_top = !distseq_remote_isnull(call->res, 0, 0);
	if (*has_top)
		*top = distseq_remote_int8(call->res, 0, 0);
	return true;
}

/* How far a member reserved "name", and with "apply", the floor set first */
bool
distseq_call_setval(DistseqPeer *peer, const char *name, int64 value, bool apply,
					bool *has_top, int64 *top, char **error)
{
	const char *params[3] = {name, int8_param(value), apply ? "true" : "false"};
	ClientCall	call = {peer, NULL, "distseq_peer_setval", "tlb", params, "l?", 1};

	return redefine_top(&call, has_top, top, error);
}

/* The same for new parameters of "name" */
bool
distseq_call_alter(DistseqPeer *peer, const char *name, int32 block_size, int64 window_size,
				   int64 max_value, int32 min_open, bool apply, bool *has_top, int64 *top,
				   char **error)
{
	const char *params[6] = {name, psprintf("%d", block_size), int8_param(window_size),
	int8_param(max_value), psprintf("%d", min_open), apply ? "true" : "false"};
	ClientCall	call = {peer, NULL, "distseq_peer_alter", "tllllb", params, "l?", 1};

	return redefine_top(&call, has_top, top, error);
}

/* ---- distseq_peers (group.c) ---- */

static char *
probe_sql(const char *schema)
{
	/* from 1.5 on, not through the view: see distseq_peer_runway() */
	if (strcmp(schema, "distseq") == 0)
		return psprintf("SELECT n.epoch, pg_catalog.array_length(n.members, 1),"
						" r.open_windows, r.runway_seconds, n.pending"
						" FROM %s.distseq_peer_state() n,"
						" %s.distseq_peer_runway() r", schema, schema);
	return psprintf("SELECT n.epoch, pg_catalog.array_length(n.members, 1),"
					" (SELECT pg_catalog.sum(open_windows) FROM %s.distseq_status),"
					" (SELECT pg_catalog.min(runway_seconds) FROM %s.distseq_status),"
					" (pg_catalog.to_jsonb(n) OPERATOR(pg_catalog.->>) 'pending')::pg_catalog.bool"
					" FROM %s.distseq_peer_state() n", schema, schema, schema);
}

/* Read in the call: a runway that numeric_in refuses is the call's failure */
static void
probe_read(const DistseqRemoteResult *res, void *out)
{
	DistseqProbe *p = out;

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

/* How a peer is doing, for distseq_peers */
bool
distseq_call_probe(DistseqPeer *peer, DistseqProbe *p, char **error)
{
	ClientCall	call = {peer, NULL, NULL, "", NULL, "li?l?n?b?", 1, probe_sql, probe_read, p};

	return client_run(&call, error);
}
