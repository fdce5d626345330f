/*-------------------------------------------------------------------------
 *
 * refill.c
 *	  Refills, as the worker (worker.c) serves them: which ones and when,
 *	  segment sizing, the reservation from this node's own windows (a call
 *	  to other servers, for a sequence that draws from them, is sources.c's),
 *	  and the agent passes that open windows when a refill finds none.
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
 * them (sources.c), made outside any transaction: while the worker waits
 * on it, it serves the refills of the database's other sequences from
 * their own windows (distseq_refill_between_steps), and puts off those
 * that would call a server or the agent until the call ends, so one remote
 * call at most is in flight.  Between the steps of an agent pass, it
 * serves the refills that backends wait for, and one other -- also the
 * refill that runs the pass, once the pass has opened its window, which
 * then reserves nothing more after the pass.
 *
 * A value is always either in shared memory or unreserved in the catalog,
 * never both: segments are committed before they are published.
 *
 * Locking: seq->lock (shared) to read an entry's identity and refill
 * state (looked at without it first, distseq_refill_serve), (exclusive) to
 * size the segment and to publish it or record the failure, never across a
 * transaction or a remote call; the catalog rows a reservation updates are
 * locked by windows.c.  DistseqShared->lock, to read and answer an agent
 * pass request (mailbox.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "utils/memutils.h"

static TimestampTz last_agent_run = 0;
static bool in_agent_pass = false;	/* refills are served between its steps */
static bool serving_meanwhile = false;	/* serving while it waits */
static List *remote_deferred = NIL; /* refills put off meanwhile */
static bool serve_again = false;	/* some were put off: serve before sleeping */
static int	between_next = 0;	/* entry to serve next between agent steps */

static TimestampTz last_work = 0;	/* when the last refill began */
static bool has_peers = true;	/* the agent has work on a timer */

static bool refill_agent_pass(const char *focus, ErrorData **focus_error);
static void refill_defer(DistseqSeq *seq);
static bool refill_if_pending(DistseqSeq *seq);
static void refill_serve_waited(bool always);

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
	char	   *m = distseq_clean_text(message,
										 sizeof(((DistseqFailure *) NULL)->message));
	char	   *d = distseq_clean_text(detail ? detail : "",
										 sizeof(((DistseqFailure *) NULL)->detail));

	LWLockAcquire(seq->lock, LW_EXCLUSIVE);
	if (pg_atomic_read_u64(&seq->gen) == gen)
	{
		distseq_pool_failed(seq, m, d);
		seq->refill_pending = false;
		seq->refill_waited = false;
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
								block * DISTSEQ_SEGMENT_BLOCKS);
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
 * failure, when no segment could be had, and also when the refill was
 * served between the steps of that agent pass.
 */
static bool
refill_local(DistseqSeq *seq, Oid relid, uint64 gen, int64 count,
			 bool account, int64 *issued, int64 *lost, int64 *skipped,
			 DistseqRange *r)
{
	bool		need_windows = false;
	char		name[NAMEDATALEN];
	ErrorData  *why = NULL;
	int64		refills;
	bool		served;

	LWLockAcquire(seq->lock, LW_SHARED);
	strlcpy(name, seq->name, NAMEDATALEN);
	refills = seq->refills;
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
		if (in_agent_pass || distseq_sources_waiting())
		{
			if (distseq_sources_waiting())
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

		/*
		 * Between the pass's steps, the refill may have been served once its
		 * window was open (distseq_refill_between_steps): a second segment
		 * now would be more than was asked for, in a fragment when the first
		 * went to the prefetch, and "account" would count the first one lost.
		 * A request made since is served afresh.
		 */
		LWLockAcquire(seq->lock, LW_SHARED);
		served = !distseq_seq_is(seq, MyDatabaseId, relid, gen) ||
			!seq->refill_pending || seq->refills != refills;
		LWLockRelease(seq->lock);
		if (served)
		{
			serve_again = true;
			return false;
		}
	}
}

/*
 * Refill from the servers a sequence draws from (sources.c).  Returns
 * false, having recorded the failure, when no server gave a segment.
 */
static bool
refill_from_sources(DistseqSeq *seq, Oid relid, uint64 gen, int64 count,
					RefillSources *src, MemoryContext cxt, DistseqRange *r)
{
	char	   *failure;
	bool		ok = distseq_sources_reserve(seq, relid, count, src, cxt, r,
											 &failure);

	if (!ok)
		refill_failed(seq, gen, failure, NULL);

	/* refills put off while waiting: serve them next */
	if (remote_deferred != NIL)
	{
		list_free(remote_deferred);
		remote_deferred = NIL;
		serve_again = true;
	}
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
		seq->refill_waited = false;
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
	ErrorData  *error;

	/* a refill served while a remote one waits has memory of its own */
	if (top_cxt == NULL)
	{
		top_cxt = AllocSetContextCreate(TopMemoryContext, "distseq refill",
										ALLOCSET_DEFAULT_SIZES);
		nested_cxt = AllocSetContextCreate(TopMemoryContext, "distseq refill meanwhile",
										   ALLOCSET_DEFAULT_SIZES);
	}
	cxt = distseq_sources_waiting() ? nested_cxt : top_cxt;
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
	if (!distseq_sources_read(relid, cxt, &src, &error))
	{
		refill_failed(seq, gen, error->message, error->detail);
		FreeErrorData(error);
		return;
	}
	if (src.sources != NIL && distseq_sources_waiting())
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
		if (!refill_from_sources(seq, relid, gen, count, &src, cxt, &r))
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
 * one line per failing sequence, each rate-limited (distseq_worker_log).
 * "focus", a sequence whose refill waits for the pass, goes first, and why
 * it failed for that sequence -- or for all of them -- comes back in
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
 *
 * Between the steps of an agent pass, the refills that backends wait for
 * are served, and one other, each step the next in entry order: a whole
 * pass here would make a waited refill that started the agent pass, to
 * open its windows, wait for every other pending refill (TAP 085).
 */
void
distseq_refill_between_steps(void)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	if (MyDistseqWorker == NULL || IsTransactionState() || serving_meanwhile)
		return;
	if (distseq_sources_waiting())
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
	{
		refill_serve_waited(true);
		for (int n = 0; n < distseq_max_sequences; n++)
		{
			DistseqSeq *seq = &Distseq->seqs[between_next];

			between_next = (between_next + 1) % distseq_max_sequences;
			if (refill_if_pending(seq))
			{
				/* others may be left: serve them after the pass */
				serve_again = true;
				break;
			}
		}
	}
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
		distseq_spi_connect();
		peers = distseq_catalog().peers && distseq_has_peers(distseq_catalog_schema());
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

/*
 * Refill an entry if its refill is pending here and not put off.  Returns
 * whether it tried.
 */
static bool
refill_if_pending(DistseqSeq *seq)
{
	bool		pending;

	if (!seq->refill_pending || seq->dboid != MyDatabaseId ||
		pg_atomic_read_u64(&seq->gen) == 0)
		return false;
	/* the one waiting on a peer, and those put off meanwhile */
	if (seq == distseq_sources_waiting() || list_member_ptr(remote_deferred, seq))
		return false;
	LWLockAcquire(seq->lock, LW_SHARED);
	pending = pg_atomic_read_u64(&seq->gen) != 0 &&
		seq->dboid == MyDatabaseId && seq->refill_pending;
	LWLockRelease(seq->lock);
	if (pending)
		refill_sequence(seq);
	return pending;
}

/*
 * If a backend began to wait for a refill since we last looked, or
 * "always", serve the refills that backends wait for.  Most refills are
 * asked for ahead of need; with thousands of sequences asking at once, a
 * hot one that ran dry would otherwise wait for all of those before it --
 * longer than distseq.refill_timeout.  A backend sets refill_waited under
 * seq->lock, then ticks the count, so reading the count first shows the
 * flag.
 */
static void
refill_serve_waited(bool always)
{
	static uint32 waits_seen = 0;
	uint32		waits = pg_atomic_read_u32(&Distseq->refill_waits);

	if (waits == waits_seen && !always)
		return;
	waits_seen = waits;
	pg_read_barrier();
	for (int i = 0; i < distseq_max_sequences; i++)
	{
		if (Distseq->seqs[i].refill_waited)
			refill_if_pending(&Distseq->seqs[i]);
	}
}

/*
 * Serve every refill requested for this database, those that backends wait
 * for first, before each of the others.
 *
 * Entries are looked at without their lock first, so that a wake costs a
 * pass over the table, not a lock per entry.  A request this misses is
 * still served: a backend sets refill_pending under seq->lock, then pokes
 * us under Distseq->lock (distseq_mailbox_poke).  If that poke came before
 * the worker's loop read the count of pokes (under Distseq->lock, before
 * this pass), the flag was set before that read and this pass sees it; if
 * it came after, the loop sees the count changed and serves again, or its
 * latch wakes it.
 */
void
distseq_refill_serve(void)
{
	for (int i = 0; i < distseq_max_sequences; i++)
	{
		refill_serve_waited(false);
		refill_if_pending(&Distseq->seqs[i]);
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
