/*-------------------------------------------------------------------------
 *
 * refill.c
 *	  Refills, as the worker (worker.c) serves them: segment sizing, the
 *	  reservation from this node's own windows, the call to another server
 *	  for a sequence that draws from others, and the agent passes that open
 *	  windows when a refill finds none.
 *
 * Backends never reserve values themselves.  When a pool runs low, the
 * backend sets refill_pending on the entry and wakes the worker
 * (mailbox.c).  The worker reserves a segment in a transaction of its own,
 * commits it with synchronous_commit at least "on" -- so the reservation
 * is flushed, and acknowledged by synchronous standbys and, with
 * distseq.standby_ack = all, by every streaming standby (standby.c),
 * before any value of it is used -- and only then publishes the segment
 * into the pool and wakes the waiters.  One worker per database and one
 * flag per sequence keep at most one refill per sequence in flight.
 *
 * A sequence that draws from other servers is refilled by a call to one of
 * them, made outside any transaction: while the worker waits on it (up to
 * distseq.remote_timeout), it serves the refills of the database's other
 * sequences from their own windows (distseq_refill_between_steps), and puts
 * off those that would call a server or the agent until the call ends, so
 * one remote call at most is in flight.  A server that did not answer rests
 * a while (remote.c): a hung one costs only its own sequence, a timeout now
 * and then.
 *
 * A value is always either in shared memory or unreserved in the catalog,
 * never both: segments are committed before they are published.
 *
 * Locking: seq->lock (shared) to read an entry's identity and refill
 * state, (exclusive) to size the segment and to publish it or record the
 * failure, never across a transaction or a remote call; the catalog rows
 * a reservation updates are locked by catalog.c.  DistseqShared->lock, to
 * read and answer an agent pass request (mailbox.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "common/int.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "utils/acl.h"
#include "utils/memutils.h"

static TimestampTz last_agent_run = 0;
static bool in_agent_pass = false;	/* refills are served between its steps */
static DistseqSeq *remote_waiting = NULL;	/* its refill waits on a peer */
static bool serving_meanwhile = false;	/* serving while it waits */
static List *remote_deferred = NIL; /* refills put off meanwhile */
static bool serve_again = false;	/* some were put off: serve before sleeping */

static TimestampTz last_work = 0;	/* when the last refill began */
static bool has_peers = true;	/* the agent has work on a timer */

static bool refill_agent_pass(const char *focus, ErrorData **focus_error);
static void refill_defer(DistseqSeq *seq);

/*
 * Did the synchronous standbys acknowledge our last commit?  A cancel
 * (pg_cancel_backend) during the wait ends it with only a WARNING; values
 * of such a commit must not be used, a promoted standby might not have it.
 */
static bool
refill_acknowledged(void)
{
	int			mode;
	bool		acked;

	if (!SyncRepRequested() ||
		SyncRepStandbyNames == NULL || SyncRepStandbyNames[0] == '\0')
		return true;
	mode = (synchronous_commit >= SYNCHRONOUS_COMMIT_REMOTE_APPLY) ?
		SYNC_REP_WAIT_APPLY : SYNC_REP_WAIT_FLUSH;
	LWLockAcquire(SyncRepLock, LW_SHARED);
	acked = WalSndCtl->lsn[mode] >= XactLastCommitEnd;
	LWLockRelease(SyncRepLock);
	return acked;
}

/*
 * Record a failed refill and wake the waiters, who report it.  The text is
 * cleaned and cut before the lock is taken.
 */
static void
refill_failed(DistseqSeq *seq, uint64 gen, const char *message,
					 const char *detail)
{
	char	   *m = distseq_clean_text(message, sizeof(seq->last_error));
	char	   *d = distseq_clean_text(detail ? detail : "", sizeof(seq->last_detail));

	LWLockAcquire(seq->lock, LW_EXCLUSIVE);
	if (pg_atomic_read_u64(&seq->gen) == gen)
	{
		seq->failures++;
		strlcpy(seq->last_error, m, sizeof(seq->last_error));
		strlcpy(seq->last_detail, d, sizeof(seq->last_detail));
		seq->refill_pending = false;
	}
	LWLockRelease(seq->lock);
	ConditionVariableBroadcast(&seq->cv);
	pfree(m);
	pfree(d);
}

/*
 * Size the next segment after how long the last one lasted.  Caller holds
 * seq->lock.
 */
static void
refill_adapt_segment(DistseqSeq *seq)
{
	int64		block = seq->block_size;
	long		lasted_ms;

	if (seq->last_refill == 0)
		return;
	lasted_ms = (long) ((GetCurrentTimestamp() - seq->last_refill) / 1000);
	/* the rate at which the last segment went, for the runway estimate */
	seq->rate = (seq->rate + seq->segment_size * 1000.0 / Max(lasted_ms, 1)) / 2;
	if (lasted_ms < distseq_segment_lifetime / 4)
		seq->segment_size = Min(seq->segment_size * 2,
								block * DISTSEQ_SEGMENT_MAX_BLOCKS);
	else if (lasted_ms > (long) distseq_segment_lifetime * 4)
		seq->segment_size = Max(seq->segment_size / 2,
								block * DISTSEQ_SEGMENT_MIN_BLOCKS);
}

/*
 * A reservation committed, and then not acknowledged: none of its values
 * is used.  Count them lost, with what a rejoin skipped in it, unless the
 * entry has no totals yet (the next reservation counts them from the
 * catalog, where they show as reserved and never given back).
 */
static void
refill_reservation_lost(DistseqSeq *seq, uint64 gen, bool account,
						DistseqRange r, int64 skipped)
{
	if (account)
		return;
	LWLockAcquire(seq->lock, LW_EXCLUSIVE);
	if (pg_atomic_read_u64(&seq->gen) == gen)
		seq->lost += RANGE_SIZE(r) + skipped;
	LWLockRelease(seq->lock);
}

/*
 * Reserve a segment in a transaction of our own and make sure it is
 * durable, and acknowledged by synchronous standbys and, with
 * distseq.standby_ack = all, by every streaming standby, before it is
 * used.  Returns false, having recorded the failure, on error.
 */
static bool
refill_reserve(DistseqSeq *seq, Oid relid, uint64 gen, int64 count,
			   bool account, int64 *issued, int64 *lost, int64 *skipped,
			   bool *need_windows, DistseqRange *r)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool committed = false;

	PG_TRY();
	{
		distseq_xact_begin();
		pgstat_report_activity(STATE_RUNNING, "distseq refill");
		*r = distseq_catalog_reserve(relid, gen, count, account, issued, lost,
									 skipped, need_windows);
		/* durable from here on, and only from here on */
		distseq_xact_commit();
		committed = true;
		pgstat_report_activity(STATE_IDLE, NULL);
		if (!refill_acknowledged())
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("the reservation was not acknowledged by the synchronous standbys"),
					 errdetail("Its values are given up.")));
		if (RANGE_SIZE(*r) > 0)
			distseq_standby_ack(XactLastCommitEnd);
	}
	PG_CATCH();
	{
		ErrorData  *edata = distseq_worker_catch(oldcxt);

		distseq_worker_log(edata->detail, "distseq worker could not refill sequence with relation %u: %s",
				   relid, edata->message);
		if (committed)
			refill_reservation_lost(seq, gen, account, *r, *skipped);
		refill_failed(seq, gen, edata->message, edata->detail);
		FreeErrorData(edata);
		return false;
	}
	PG_END_TRY();

	return true;
}

/*
 * Reserve from this node's own windows; on a node with peers, an empty
 * reservation calls the agent, once.  Returns false, having recorded the
 * failure, when no segment could be had.
 */
static bool
refill_local(DistseqSeq *seq, Oid relid, uint64 gen, int64 count,
					bool account, int64 *issued, int64 *lost, int64 *skipped,
					DistseqRange *r)
{
	bool		need_windows = false;
	char		name[NAMEDATALEN];
	ErrorData  *why = NULL;

	LWLockAcquire(seq->lock, LW_SHARED);
	strlcpy(name, seq->name, NAMEDATALEN);
	LWLockRelease(seq->lock);

	for (int attempt = 0;; attempt++)
	{
		if (!refill_reserve(seq, relid, gen, count, account, issued, lost,
							skipped, &need_windows, r))
			return false;
		if (!need_windows)
			return true;
		/*
		 * Served between the steps of an agent pass, or while a remote
		 * refill waits: no agent pass now, serve it again after
		 */
		if (in_agent_pass || remote_waiting)
		{
			if (remote_waiting)
				refill_defer(seq);
			serve_again = true;
			return false;
		}
		if (attempt > 0)
		{
			/* not exhausted: the windows are just not there yet */
			refill_failed(seq, gen,
								 "no open window left here, and the agent has not opened one yet",
								 NULL);
			return false;
		}
		/* the agent's reason for this very sequence, if it failed */
		(void) refill_agent_pass(name, &why);
		if (why)
		{
			refill_failed(seq, gen, why->message, why->detail);
			return false;
		}
	}
}

/* A server a sequence draws from, as its catalog row names it */
typedef struct RemoteSource
{
	Oid			serverid;
	char	   *name;
	char	   *error;			/* why it cannot be used, or NULL */
} RemoteSource;

/* Where a sequence's refills come from: its own windows if no sources */
typedef struct RefillSources
{
	List	   *sources;		/* RemoteSource, in the catalog's order */
	Oid			owner;
	int64		start_value;
	/* the group the sequence drew from before: grows with what answers */
	int64	   *nodes;
	int			nnodes;
} RefillSources;

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
refill_check_group(RemoteReserve *rr, int64 node_id, const int64 *members, int nmembers)
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
refill_remote_reserve_one(RemoteReserve *rr)
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
	refill_check_group(rr, distseq_remote_int8(res, 0, 2), members, nmembers);
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
 * having recorded the failure, on error.
 */
static bool
refill_sources(DistseqSeq *seq, Oid relid, uint64 gen, MemoryContext cxt,
			   RefillSources *src)
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
		ErrorData  *edata = distseq_worker_catch(oldcxt);

		refill_failed(seq, gen, edata->message, edata->detail);
		FreeErrorData(edata);
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
refill_remote_first(RemoteReserve *rr, List *sources, StringInfo errors)
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
			refill_remote_reserve_one(rr);
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
refill_record_group(Oid relid, RemoteReserve *rr)
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
 * or timeout.  Returns false, having recorded the failure, when no server
 * gave a segment.
 */
static bool
refill_remote(DistseqSeq *seq, Oid relid, uint64 gen, int64 count,
			  RefillSources *src, MemoryContext cxt, DistseqRange *r)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	RemoteReserve rr = {0};
	bool		ok;
	char	   *failure = NULL;
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
	ok = refill_remote_first(&rr, src->sources, &errors);
	if (ok && rr.nnodes != src->nnodes)
	{
		failure = refill_record_group(relid, &rr);
		ok = failure == NULL;
	}
	MemoryContextSwitchTo(cxt);
	if (!ok)
		refill_failed(seq, gen, failure ? failure :
					  psprintf("no server answered: %s", errors.data), NULL);
	pgstat_report_activity(STATE_IDLE, NULL);

	/* refills put off while waiting: serve them next */
	if (remote_deferred != NIL)
	{
		list_free(remote_deferred);
		remote_deferred = NIL;
		serve_again = true;
	}
	MemoryContextSwitchTo(oldcxt);
	*r = rr.r;
	return ok;
}

/*
 * Put a refill off until the remote refill being waited on ends (the
 * sequence draws from other servers too, or needs the agent)
 */
static void
refill_defer(DistseqSeq *seq)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);

	remote_deferred = lappend(remote_deferred, seq);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * Publish a durable segment into the pool, with the totals the first
 * reservation read, and wake the waiters
 */
static void
refill_publish(DistseqSeq *seq, Oid relid, uint64 gen, bool account,
			   int64 issued, int64 lost, int64 skipped, DistseqRange r)
{
	LWLockAcquire(seq->lock, LW_EXCLUSIVE);
	if (distseq_seq_is(seq, MyDatabaseId, relid, gen))
	{
		if (account)
		{
			/* a sequence drawing from others keeps no totals here */
			seq->issued = Max(issued, 0);
			seq->lost = Max(lost, 0);
			seq->accounted = true;
		}
		else
			seq->lost += skipped;
		distseq_pool_publish(seq, r);
		seq->last_refill = GetCurrentTimestamp();
		seq->refills++;
		seq->exhausted = RANGE_SIZE(r) == 0;
		seq->refill_pending = false;
	}
	LWLockRelease(seq->lock);
	ConditionVariableBroadcast(&seq->cv);
}

/* Refill one sequence whose refill is pending */
static void
refill_sequence(DistseqSeq *seq)
{
	static MemoryContext top_cxt = NULL;
	static MemoryContext nested_cxt = NULL;
	MemoryContext cxt;
	RefillSources src;
	Oid			relid;
	uint64		gen;
	int64		count;
	int64		issued;
	int64		lost;
	int64		skipped = 0;
	bool		account;
	DistseqRange r;

	/* a refill served while a remote one waits has memory of its own */
	if (top_cxt == NULL)
	{
		top_cxt = AllocSetContextCreate(TopMemoryContext, "distseq refill",
										ALLOCSET_DEFAULT_SIZES);
		nested_cxt = AllocSetContextCreate(TopMemoryContext, "distseq refill meanwhile",
										   ALLOCSET_DEFAULT_SIZES);
	}
	cxt = remote_waiting ? nested_cxt : top_cxt;
	MemoryContextReset(cxt);

	last_work = GetCurrentTimestamp();
	LWLockAcquire(seq->lock, LW_SHARED);
	gen = pg_atomic_read_u64(&seq->gen);
	relid = seq->relid;
	if (seq->dboid != MyDatabaseId)
		gen = 0;
	LWLockRelease(seq->lock);
	if (gen == 0)
		return;
	if (!refill_sources(seq, relid, gen, cxt, &src))
		return;
	if (src.sources != NIL && remote_waiting)
	{
		refill_defer(seq);
		return;
	}

	LWLockAcquire(seq->lock, LW_EXCLUSIVE);
	if (!distseq_seq_is(seq, MyDatabaseId, relid, gen))
	{
		/* dropped meanwhile: the entry may serve another sequence now */
		LWLockRelease(seq->lock);
		serve_again = true;
		return;
	}
	refill_adapt_segment(seq);
	count = seq->segment_size;
	account = !seq->accounted;
	issued = seq->issued;
	lost = seq->lost;
	LWLockRelease(seq->lock);

	if (src.sources != NIL)
	{
		if (!refill_remote(seq, relid, gen, count, &src, cxt, &r))
			return;
	}
	else if (!refill_local(seq, relid, gen, count, account, &issued,
								  &lost, &skipped, &r))
		return;

	refill_publish(seq, relid, gen, account, issued, lost, skipped, r);
}

/*
 * One pass of the agent, in transactions of its own.  Returns false, and
 * logs why, when it failed for any sequence (no majority reachable, say):
 * one line per failing sequence, each rate-limited (distseq_worker_log).  "focus",
 * a sequence whose refill waits for the pass, goes first, and why it
 * failed for that sequence -- or for all of them -- comes back in
 * *focus_error (NULL if it did not fail), in the caller's memory.
 */
static bool
refill_agent_pass(const char *focus, ErrorData **focus_error)
{
	static MemoryContext failure_cxt = NULL;
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool ok = true;
	uint64		requested;
	bool		asked;
	List	   *volatile failed = NIL;
	ErrorData  *volatile first = NULL;

	if (focus_error)
		*focus_error = NULL;
	/* a failure of the whole pass lives until the next pass, as the others */
	if (failure_cxt == NULL)
		failure_cxt = AllocSetContextCreate(TopMemoryContext, "distseq agent failure",
											ALLOCSET_SMALL_SIZES);
	MemoryContextReset(failure_cxt);

	asked = distseq_mailbox_asked(DISTSEQ_REQUEST_AGENT, &requested, NULL);

	last_agent_run = GetCurrentTimestamp();
	pgstat_report_activity(STATE_RUNNING, "distseq agent");
	in_agent_pass = true;
	PG_TRY();
	{
		failed = distseq_agent_run(asked, focus);
	}
	PG_CATCH();
	{
		/* the pass failed as a whole: that is every sequence's reason */
		ErrorData  *edata = distseq_worker_catch(failure_cxt);
		DistseqAgentFailure *f = palloc0(sizeof(DistseqAgentFailure));

		f->error = edata;
		failed = list_make1(f);
	}
	PG_END_TRY();
	in_agent_pass = false;
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(oldcxt);

	for (int i = 0; i < list_length(failed); i++)
	{
		DistseqAgentFailure *f = list_nth(failed, i);

		distseq_worker_log(f->error->detail, "distseq agent: %s", f->error->message);
		if (first == NULL)
			first = f->error;
		if (focus && focus_error && *focus_error == NULL &&
			(f->sequence_name == NULL || strcmp(f->sequence_name, focus) == 0))
			*focus_error = f->error;
		ok = false;
	}
	/* tell whoever asked for this pass how it went */
	if (first)
		distseq_mailbox_answer(DISTSEQ_REQUEST_AGENT, requested, ERROR,
							   ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
							   first->message, first->detail, NULL);
	else
		distseq_mailbox_answer(DISTSEQ_REQUEST_AGENT, requested, 0, 0,
							   NULL, NULL, NULL);
	return ok;
}

/*
 * Serve the refills asked for meanwhile: between the steps of an agent
 * pass, which may wait on peers, and while a remote refill waits on one
 * outside any transaction.  The worker lends it to the agent and to
 * remote.c, which call it through distseq_between_steps.  While a remote
 * refill waits, only refills from this node's own windows are served: the
 * others, and those that would need an agent pass, are put off until it
 * ends (refill_defer), so at most one remote call is in flight and no
 * connection is used twice at once.
 */
void
distseq_refill_between_steps(void)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	if (MyDistseqWorker == NULL || IsTransactionState() || serving_meanwhile)
		return;
	if (remote_waiting)
	{
		serving_meanwhile = true;
		PG_TRY();
		{
			distseq_refill_serve();
		}
		PG_FINALLY();
		{
			serving_meanwhile = false;
		}
		PG_END_TRY();
		pgstat_report_activity(STATE_RUNNING, "distseq remote refill");
	}
	else if (in_agent_pass)
		distseq_refill_serve();
	MemoryContextSwitchTo(oldcxt);
}

/* Is it time for the agent?  Only nodes with peers run it on a timer. */
static void
refill_maybe_run_agent(void)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool peers = false;

	if (!TimestampDifferenceExceeds(last_agent_run, GetCurrentTimestamp(),
									distseq_agent_interval))
		return;
	last_agent_run = GetCurrentTimestamp();
	PG_TRY();
	{
		distseq_xact_begin();
		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		peers = distseq_catalog_minor() >= 3 && distseq_has_peers(distseq_catalog_schema());
		SPI_finish();
		distseq_xact_commit();
	}
	PG_CATCH();
	{
		/* no extension here (yet): nothing to do */
		FreeErrorData(distseq_worker_catch(oldcxt));
	}
	PG_END_TRY();
	has_peers = peers;
	if (peers)
		(void) refill_agent_pass(NULL, NULL);
}

/* Serve every refill requested for this database */
void
distseq_refill_serve(void)
{
	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq *seq = &Distseq->seqs[i];
		bool		pending;

		/* the one waiting on a peer, and those put off meanwhile */
		if (seq == remote_waiting || list_member_ptr(remote_deferred, seq))
			continue;
		LWLockAcquire(seq->lock, LW_SHARED);
		pending = pg_atomic_read_u64(&seq->gen) != 0 &&
			seq->dboid == MyDatabaseId && seq->refill_pending;
		LWLockRelease(seq->lock);
		if (pending)
			refill_sequence(seq);
	}
}

/*
 * An agent pass, if one was asked for (distseq_maintain), or if its
 * interval has passed on a node with peers
 */
void
distseq_refill_run_agent(void)
{
	uint64		ticket;

	if (distseq_mailbox_asked(DISTSEQ_REQUEST_AGENT, &ticket, NULL))
	{
		last_work = GetCurrentTimestamp();
		(void) refill_agent_pass(NULL, NULL);
	}
	else
		refill_maybe_run_agent();
}

/* Run the agent at the next turn of the worker's loop (a new member) */
void
distseq_refill_agent_soon(void)
{
	last_agent_run = 0;
}

/* Does the agent run on a timer here (the node has peers)? */
bool
distseq_refill_has_peers(void)
{
	return has_peers;
}

/* When the last refill, or asked agent pass, began */
TimestampTz
distseq_refill_last_work(void)
{
	return last_work;
}

/*
 * Were refills put off, or entries changed meanwhile, so that they must be
 * served again before the worker sleeps?  Clears the flag.
 */
bool
distseq_refill_serve_again(void)
{
	bool		again = serve_again;

	serve_again = false;
	return again;
}
