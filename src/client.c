/*-------------------------------------------------------------------------
 *
 * client.c
 *	  The calling side of the multi-node protocol: how this node reaches a
 *	  member (its foreign server, with the user mapping of the role that
 *	  added it), and one call of a peer's function, caught so that a peer
 *	  that fails costs its caller no more than an error message.
 *
 * Connections themselves, their bounds and the checks of every answer are
 * remote.c's.  Reads distseq_peer with SPI connected; takes no lock.
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
RemoteConn *
distseq_client_connect(DistseqPeer *peer)
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
typedef struct ClientCall
{
	DistseqPeer *peer;
	const char *sql;
	int			nparams;
	const char **params;
	const char *columns;		/* NULL: the answer does not matter */
	int			nrows;
	DistseqRemoteResult *res;
} ClientCall;

static void
client_call(void *arg)
{
	ClientCall   *c = arg;
	RemoteConn *rc = distseq_client_connect(c->peer);
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
distseq_client_exec(DistseqPeer *peer, const char *sql, int nparams, const char **params,
					const char *columns, int nrows, char **error)
{
	ClientCall	c = {peer, sql, nparams, params, columns, nrows, NULL};

	if (!distseq_remote_try(client_call, &c, error))
		return NULL;
	return c.res;
}

/* The same, for a statement whose answer does not matter */
bool
distseq_client_do(DistseqPeer *peer, const char *sql, int nparams, const char **params,
				  char **error)
{
	ClientCall	c = {peer, sql, nparams, params, NULL, 0, NULL};

	return distseq_remote_try(client_call, &c, error);
}

/* A bigint as a text parameter of a call */
char *
distseq_client_int8_text(int64 v)
{
	return psprintf(INT64_FORMAT, v);
}

/* A bigint[] as a text parameter of a call */
char *
distseq_client_int8s_text(int64 *vals, int n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s" INT64_FORMAT, i ? "," : "", vals[i]);
	appendStringInfoChar(&buf, '}');
	return buf.data;
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
