/*-------------------------------------------------------------------------
 *
 * group.c
 *	  What an administrator calls about the group of this node:
 *	  distseq_add_peer() and distseq_remove_peer(), checked here and handed
 *	  to this database's refill worker, which runs the change (change.c);
 *	  the view distseq_peers (distseq_peer_status, whose C name the install
 *	  scripts keep: no peer calls it); and distseq_accept_promotion().
 *
 * Together because each is a user's question or order about the group,
 * run in the user's backend, and none is called by a peer.
 * distseq_accept_promotion updates the node row and the origins of the
 * sequences in the caller's transaction; distseq_peers takes no lock and
 * reaches each peer through client.c, each failure caught and shown.
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
#include "utils/acl.h"
#include "utils/builtins.h"

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

/* A row of distseq_peers: the peer, and how it answered or why it did not */
static void
status_row(DistseqPeer *peer, Datum *values, bool *nulls)
{
	DistseqProbe probe = {0};
	char	   *error = NULL;

	values[0] = CStringGetDatum(peer->name);
	values[1] = Int64GetDatum(peer->node_id);
	nulls[3] = nulls[4] = nulls[5] = nulls[6] = nulls[7] = nulls[8] = true;
	if (peer->serverid == InvalidOid || !distseq_call_probe(peer, &probe, &error))
	{
		values[2] = BoolGetDatum(false);
		values[3] = CStringGetTextDatum(error ? error : "no foreign server of that name");
		nulls[3] = false;
		return;
	}
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
			DistseqPeer *p = distseq_client_of(schema, ids[i]);

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

		status_row(&peers[i], values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	distseq_unpin_search_path(search_path_level);
	distseq_remote_close_all();
	return (Datum) 0;
}

/* The checks made in the caller's backend, before the worker takes over */
static void
change_request(char op, const char *server_name, const char *funcname)
{
	distseq_check_loaded();
	distseq_check_writable(funcname);
	PreventInTransactionBlock(true, funcname);
	distseq_member_check_changes();
	if (op == 'a')
	{
		ForeignServer *server = GetForeignServerByName(server_name, false);

		if (distseq_foreign_server_aclcheck(server->serverid, GetUserId(), ACL_USAGE) != ACLCHECK_OK)
			aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FOREIGN_SERVER, server->servername);
		if (strcmp(GetForeignDataWrapper(server->fdwid)->fdwname, "distseq") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("server \"%s\" does not use the distseq foreign-data wrapper",
							server_name)));
	}
	distseq_worker_change(MyDatabaseId, op, server_name, GetUserId());
}

PG_FUNCTION_INFO_V1(distseq_add_peer);

/*
 * Make a foreign server of the distseq wrapper a peer of this node.  If its
 * node is not a member yet, it joins: it must be fresh (no window of its
 * own), and a majority of the members must be reachable.  Run it on every
 * node for every other node, so each can reach all the others.
 */
Datum
distseq_add_peer(PG_FUNCTION_ARGS)
{
	change_request('a', NameStr(*PG_GETARG_NAME(0)), "distseq_add_peer()");
	PG_RETURN_VOID();
}

PG_FUNCTION_INFO_V1(distseq_remove_peer);

/*
 * Forget a peer here; if it is a member, it leaves the group (it may be
 * down for good).  A majority of the members must be reachable, and of a
 * group of two, both.
 */
Datum
distseq_remove_peer(PG_FUNCTION_ARGS)
{
	change_request('r', NameStr(*PG_GETARG_NAME(0)), "distseq_remove_peer()");
	PG_RETURN_VOID();
}
