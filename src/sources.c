/*-------------------------------------------------------------------------
 *
 * sources.c
 *	  The refill of a sequence that draws from other servers (refill.c
 *	  calls it): the servers it names, and the call for a segment to the
 *	  first of them that answers, checked before any value of it is used.
 *
 * The call is made outside any transaction: while the worker waits on it
 * (up to distseq.remote_timeout), it serves the refills of the database's
 * other sequences from their own windows (refill.c,
 * distseq_refill_between_steps), which asks here which sequence waits
 * (distseq_sources_waiting).  A server that did not answer rests a while
 * (remote.c): a hung one costs only its own sequence, a timeout now and
 * then.  The servers a sequence draws from must share one id space; the
 * group they answered with is put on record in the sequence's catalog row
 * before its values are used.
 *
 * Locking: none in shared memory; the catalog row is updated by catalog.c
 * in a transaction of the worker's own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "common/int.h"
#include "foreign/foreign.h"
#include "pgstat.h"
#include "utils/acl.h"

static DistseqSeq *remote_waiting = NULL;	/* its refill waits on a peer */

/* A server a sequence draws from, as its catalog row names it */
typedef struct RemoteSource
{
	Oid			serverid;
	char	   *name;
	char	   *error;			/* why it cannot be used, or NULL */
} RemoteSource;

typedef struct RemoteReserve
{
	DistseqSeq *seq;
	RemoteSource *source;
	Oid			owner;
	const char *name;
	int64		count;
	int64		start_value;
	int64		max_value;
	MemoryContext cxt;
	DistseqRange r;
	int64	   *nodes;
	int			nnodes;
} RemoteReserve;

static bool
node_in(int64 node, int64 *nodes, int n)
{
	for (int i = 0; i < n; i++)
		if (nodes[i] == node)
			return true;
	return false;
}

/*
 * The servers a sequence draws from must share one id space: be one node,
 * or members of one group.  Check the node that answered, with the members
 * it sees, against the group seen so far, and add them to it.
 */
static void
sources_check_group(RemoteReserve *rr, int64 node_id, const int64 *members, int nmembers)
{
	bool		shared = rr->nnodes == 0 || node_in(node_id, rr->nodes, rr->nnodes);
	int64	   *nodes;
	int			n = rr->nnodes;

	for (int i = 0; i < nmembers; i++)
		shared = shared || node_in(members[i], rr->nodes, rr->nnodes);
	if (!shared)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distseq peer \"%s\" is not in the group sequence \"%s\" drew from before",
						rr->source->name, rr->name),
				 errdetail("Its values could repeat those of the other servers.")));
	nodes = palloc(sizeof(int64) * (rr->nnodes + nmembers + 1));
	memcpy(nodes, rr->nodes, sizeof(int64) * rr->nnodes);
	if (!node_in(node_id, nodes, n))
		nodes[n++] = node_id;
	for (int i = 0; i < nmembers; i++)
	{
		if (!node_in(members[i], nodes, n))
			nodes[n++] = members[i];
	}
	rr->nodes = nodes;
	rr->nnodes = n;
}

/*
 * Reserve a segment on one server.  The connection is looked up in a
 * transaction; connecting and the call itself run outside any, so that
 * the waits serve the other refills of the database meanwhile.
 */
static void
sources_reserve_one(RemoteReserve *rr)
{
	RemoteConn *rc;
	char		count[32];
	const char *params[2] = {rr->name, count};
	const char *schema;
	DistseqRemoteResult *res;
	DistseqRange r;
	const int64 *members;
	int			nmembers;
	int64		size;

	distseq_xact_begin();
	rc = distseq_remote_lookup(rr->source->serverid, rr->owner);
	distseq_xact_commit();
	MemoryContextSwitchTo(rr->cxt);

	pgstat_report_activity(STATE_RUNNING, "distseq remote refill");
	remote_waiting = rr->seq;
	distseq_remote_open(rc);
	snprintf(count, sizeof(count), INT64_FORMAT, rr->count);
	schema = distseq_remote_schema(rc);
	res = distseq_remote_query(rc,
							   psprintf("SELECT r.lo, r.hi, n.node_id, n.members"
										" FROM %s.distseq_peer_reserve($1::pg_catalog.text,"
										" $2::pg_catalog.int8) r,"
										" %s.distseq_peer_state() n",
										schema, schema),
							   2, params, "llla", 1);
	remote_waiting = NULL;
	pgstat_report_activity(STATE_IDLE, NULL);

	r.lo = distseq_remote_int8(res, 0, 0);
	r.hi = distseq_remote_int8(res, 0, 1);
	members = distseq_remote_int8s(res, 0, 3, &nmembers);
	sources_check_group(rr, distseq_remote_int8(res, 0, 2), members, nmembers);
	if (r.hi <= r.lo)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distseq peer \"%s\" has no open window of sequence \"%s\"",
						rr->source->name, rr->name)));
	/* a server with another definition of the sequence is no source */
	if (pg_sub_s64_overflow(r.hi, r.lo, &size) || size > rr->count ||
		r.lo < rr->start_value || r.hi - 1 > rr->max_value)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("distseq peer \"%s\" returned values " INT64_FORMAT " to " INT64_FORMAT " for sequence \"%s\", outside what was asked",
						rr->source->name, r.lo, r.hi - 1, rr->name)));
	rr->r = r;
}

/*
 * Read where a sequence's refills come from, in "cxt".  Returns false,
 * with the error in the caller's memory, when that failed.
 */
bool
distseq_sources_read(Oid relid, MemoryContext cxt, RefillSources *src,
					 ErrorData **error)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	memset(src, 0, sizeof(RefillSources));
	PG_TRY();
	{
		List	   *names;
		ListCell   *lc;
		MemoryContext xcxt;

		distseq_xact_begin();
		names = distseq_catalog_servers(relid, &src->owner, &src->start_value,
										&src->nodes, &src->nnodes, cxt);
		foreach(lc, names)
		{
			ForeignServer *server = GetForeignServerByName(lfirst(lc), true);
			RemoteSource *s = MemoryContextAllocZero(cxt, sizeof(RemoteSource));

			s->name = lfirst(lc);
			if (server == NULL)
				s->error = MemoryContextStrdup(cxt,
											   psprintf("server \"%s\" does not exist", s->name));
			else if (distseq_foreign_server_aclcheck(server->serverid, src->owner,
													 ACL_USAGE) != ACLCHECK_OK)
				s->error = MemoryContextStrdup(cxt,
											   psprintf("the owner may not use server \"%s\"", s->name));
			else
				s->serverid = server->serverid;
			xcxt = MemoryContextSwitchTo(cxt);
			src->sources = lappend(src->sources, s);
			MemoryContextSwitchTo(xcxt);
		}
		distseq_xact_commit();
		MemoryContextSwitchTo(oldcxt);
	}
	PG_CATCH();
	{
		*error = distseq_worker_catch(oldcxt);
		return false;
	}
	PG_END_TRY();
	return true;
}

/*
 * Reserve on the first source that answers.  A server that did not answer
 * rests a while: meanwhile it is passed over at once.  Why each one failed
 * goes to "errors".
 */
static bool
sources_first(RemoteReserve *rr, List *sources, StringInfo errors)
{
	volatile bool ok = false;
	ListCell   *lc;

	foreach(lc, sources)
	{
		RemoteSource *s = lfirst(lc);
		const char *why;

		/* the reason it rests, for who wonders why it is not tried */
		if (s->error == NULL && distseq_remote_resting(s->serverid, &why))
			s->error = why[0] ? psprintf("%s (a moment ago)", why) :
				psprintf("distseq peer \"%s\" did not answer a moment ago", s->name);
		if (s->error)
		{
			appendStringInfo(errors, "%s%s", errors->len ? "; " : "", s->error);
			continue;
		}
		rr->source = s;
		PG_TRY();
		{
			sources_reserve_one(rr);
			ok = true;
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			remote_waiting = NULL;
			edata = distseq_worker_catch(rr->cxt);
			if (distseq_remote_unanswered(edata->sqlerrcode))
				distseq_remote_rest(s->serverid, edata->message);
			appendStringInfo(errors, "%s%s", errors->len ? "; " : "", edata->message);
			FreeErrorData(edata);
		}
		PG_END_TRY();
		if (ok)
			break;
	}
	return ok;
}

/*
 * Put the group the sequence now draws from on record, before its values
 * are used.  Returns why it could not be, or NULL.
 */
static char *
sources_record_group(Oid relid, RemoteReserve *rr)
{
	char	   *volatile failure = NULL;

	PG_TRY();
	{
		distseq_xact_begin();
		distseq_catalog_set_server_nodes(relid, rr->nodes, rr->nnodes);
		distseq_xact_commit();
	}
	PG_CATCH();
	{
		ErrorData  *edata = distseq_worker_catch(rr->cxt);

		failure = pstrdup(edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return failure;
}

/*
 * A sequence that draws from other servers: reserve a segment on the first
 * that answers, in that server's own transaction (committed synchronously
 * there before we see the result), failing over to the next on any error
 * or timeout.  Returns false, and why in *failure (in "cxt"), when no
 * server gave a segment.
 */
bool
distseq_sources_reserve(DistseqSeq *seq, Oid relid, int64 count,
						RefillSources *src, MemoryContext cxt, DistseqRange *r,
						char **failure)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	RemoteReserve rr = {0};
	bool		ok;
	StringInfoData errors;

	MemoryContextSwitchTo(cxt);
	initStringInfo(&errors);
	rr.seq = seq;
	rr.owner = src->owner;
	rr.name = seq->name;
	rr.count = count;
	rr.start_value = src->start_value;
	rr.max_value = seq->max_value;
	rr.cxt = cxt;
	rr.nodes = src->nodes;
	rr.nnodes = src->nnodes;
	*failure = NULL;
	ok = sources_first(&rr, src->sources, &errors);
	if (ok && rr.nnodes != src->nnodes)
	{
		*failure = sources_record_group(relid, &rr);
		ok = *failure == NULL;
	}
	MemoryContextSwitchTo(cxt);
	if (!ok && *failure == NULL)
		*failure = psprintf("no server answered: %s", errors.data);
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(oldcxt);
	*r = rr.r;
	return ok;
}

/* The sequence whose refill waits on a peer now, or NULL */
DistseqSeq *
distseq_sources_waiting(void)
{
	return remote_waiting;
}
