/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The refill worker process: one background worker per database that
 *	  uses distseq, started on demand (mailbox.c), restarted by the
 *	  postmaster if it dies.  Its loop serves refills (refill.c), runs the
 *	  changes of membership (change.c) and the agent passes asked for,
 *	  writes back and parks entries, and leaves when idle or told to.
 *
 * A worker with no work for distseq.worker_idle_timeout (and no peers, for
 * which the agent runs on a timer) writes every pool back and exits for
 * good; the next session that needs a refill starts a new one.  It checks
 * for pending refills under the global lock before it gives up its slot,
 * and a session sets its refill pending before it looks for the worker
 * under that lock: one of the two sees the other.  The worker also writes
 * back and parks the entries another sequence asked for (shmem.c).
 *
 * When it is told to stop (SIGTERM, server shutdown), the worker closes the
 * streams and writes every pool of its database back to the catalog, so
 * that a clean restart skips no value.  A value is always either in shared
 * memory or unreserved in the catalog, never both: segments are committed
 * before they are published (refill.c), and removed from shared memory
 * before they are written back.
 *
 * DROP DATABASE.  The worker is connected to its database, so dropdb()'s
 * check for other sessions (CountOtherDBBackends) would refuse the drop
 * while it runs: it must leave.  But dropdb() can still fail after any
 * point an extension can hook into before that check (the database is a
 * template, in use, replicated...), and a failed drop must leave the
 * database's sequences exactly as they were -- sessions of the database
 * draw on from its entries, which must keep their pools and streams.
 * So the drop is split at its point of
 * no return, the commit:
 *
 *	- The object access hook sees the drop (OAT_DROP of the database) once
 *	  dropdb() holds the database's lock and has checked that the role may
 *	  drop it: a role that may not never gets here.  It marks the worker's
 *	  slot with its pid (dropper) and waits for the worker to disconnect.
 *	- The worker exits at once and writes nothing back: if the drop fails,
 *	  its pools must still be there, and if it succeeds they go with the
 *	  catalog.  The postmaster starts it again a second later; the new one
 *	  waits, not connected, for the drop to end.  Entries, pools and
 *	  streams are not touched; sessions of the database draw on,
 *	  and only wait for a refill while the drop runs (at most about 5 s,
 *	  which dropdb() waits for other sessions to leave).
 *	- If the drop fails, its transaction's abort clears the mark: the new
 *	  worker connects and serves what the sessions asked for meanwhile.  If
 *	  it commits, nobody is connected to the database (dropdb() checked, and
 *	  its lock, held until after our callback, keeps newcomers out): only
 *	  then are the database's entries freed and its worker told to exit for
 *	  good (stop).
 *
 * Locking: DistseqShared->lock guards the DistseqDbWorker table
 * (mailbox.c); seq->lock (exclusive) to take a pool for write-back and to
 * mark the entry parked, never across the transaction that writes it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/guc.h"

static TimestampTz last_work = 0;	/* for distseq.worker_idle_timeout, with
									 * the refills' (refill.c) */
static bool left_idle = false;	/* our slot is no longer ours */

/* The database this backend's transaction is dropping, if any */
static Oid	dropping_db = InvalidOid;
static bool drop_callback_registered = false;

/* Is the worker of a database connected to it? */
static bool
worker_connected(Oid dboid)
{
	DistseqDbWorker *w;
	int			pid;
	PGPROC	   *proc;

	LWLockAcquire(Distseq->lock, LW_SHARED);
	w = distseq_mailbox_find(dboid);
	pid = w ? w->pid : 0;
	LWLockRelease(Distseq->lock);
	if (pid == 0)
		return false;
	/* a worker waiting to connect has no database yet */
	proc = BackendPidGetProc(pid);
	return proc != NULL && proc->databaseId == dboid;
}

/*
 * The end of a transaction that went past the permission check of DROP
 * DATABASE.  Runs before the transaction's locks are released.
 */
static void
worker_drop_end(XactEvent event, void *arg)
{
	Oid			dboid = dropping_db;
	DistseqDbWorker *w;

	/* a prepared drop (dropdb() called by a function, say) counts as failed */
	if (!OidIsValid(dboid) ||
		(event != XACT_EVENT_COMMIT && event != XACT_EVENT_ABORT &&
		 event != XACT_EVENT_PREPARE))
		return;
	dropping_db = InvalidOid;

	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	w = distseq_mailbox_find(dboid);
	if (w != NULL && event == XACT_EVENT_COMMIT)
	{
		/*
		 * The database is gone: free the slot now, or when the process in it
		 * exits.  A worker the postmaster starts again finds no slot and
		 * exits for good.
		 */
		if (w->pid == 0)
			w->dboid = InvalidOid;
		else
			w->stop = true;
	}
	if (w != NULL && w->dropper == MyProcPid)
	{
		w->dropper = 0;
		distseq_mailbox_poke(w);
	}
	LWLockRelease(Distseq->lock);

	if (event == XACT_EVENT_COMMIT)
		distseq_forget_database(dboid);
}

/*
 * DROP DATABASE passed its permission check and holds the database's lock
 * (OAT_DROP of the database, from inuse.c's object access hook): make the
 * database's worker disconnect, leaving everything else as it is.
 */
void
distseq_worker_drop_database(Oid dboid)
{
	DistseqDbWorker *w;

	if (!drop_callback_registered)
	{
		RegisterXactCallback(worker_drop_end, NULL);
		drop_callback_registered = true;
	}
	dropping_db = dboid;

	/*
	 * A database whose worker left when idle gets a slot too: a worker
	 * started meanwhile (to write an entry back for another database) waits
	 * for the drop to end, not connected.
	 */
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	w = distseq_mailbox_slot(dboid);
	if (w != NULL)
	{
		w->dropper = MyProcPid;
		distseq_mailbox_poke(w);
	}
	LWLockRelease(Distseq->lock);

	/*
	 * It leaves between two refills.  One that takes long (a synchronous
	 * standby that does not answer) makes dropdb() fail, as any session
	 * would.
	 */
	for (int i = 0; i < 1000 && worker_connected(dboid); i++)
	{
		CHECK_FOR_INTERRUPTS();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

static void
worker_detach(int code, Datum arg)
{
	if (left_idle)
		return;
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	MyDistseqWorker->pid = 0;
	MyDistseqWorker->latch = NULL;
	if (MyDistseqWorker->stop)
		MyDistseqWorker->dboid = InvalidOid;
	LWLockRelease(Distseq->lock);
}

/*
 * Run the change of membership a backend handed over, if any, and report
 * how it went.
 */
static void
worker_change_pass(void)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	DistseqChangeArgs args;
	uint64		ticket;
	char	   *volatile unfinished = NULL;
	ErrorData  *volatile edata = NULL;

	if (!distseq_mailbox_asked(DISTSEQ_REQUEST_CHANGE, &ticket, &args))
		return;

	last_work = GetCurrentTimestamp();
	pgstat_report_activity(STATE_RUNNING, "distseq membership change");
	PG_TRY();
	{
		unfinished = distseq_change_run(args.op, args.server, args.userid, oldcxt);
	}
	PG_CATCH();
	{
		edata = distseq_worker_catch(oldcxt);
		ereport(LOG,
				(errmsg("distseq membership change failed: %s", edata->message)));
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);

	if (edata)
		distseq_mailbox_answer(DISTSEQ_REQUEST_CHANGE, ticket, ERROR,
							   edata->sqlerrcode, edata->message, edata->detail,
							   edata->hint);
	else
		distseq_mailbox_answer(DISTSEQ_REQUEST_CHANGE, ticket,
							   unfinished ? WARNING : 0, 0, unfinished, NULL, NULL);
	if (edata)
		FreeErrorData(edata);
	if (unfinished)
		pfree(unfinished);

	/* a new member needs windows: run the agent next */
	distseq_refill_agent_soon();
}

/*
 * Write ranges of one sequence back, with its totals, in a transaction of
 * our own.  *dropped is the number of values that could not go back;
 * returns false if nothing was written.
 */
static bool
worker_release(Oid relid, uint64 gen, DistseqRange *ranges, int nranges,
			   int64 issued, int64 lost, int64 *dropped)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	volatile bool ok = true;

	PG_TRY();
	{
		distseq_xact_begin();
		*dropped = distseq_catalog_release(relid, gen, ranges, nranges,
										   issued, lost);
		distseq_xact_commit();
	}
	PG_CATCH();
	{
		ErrorData  *edata = distseq_worker_catch(oldcxt);

		ereport(LOG,
				(errmsg("distseq worker could not write back sequence with relation %u: %s",
						relid, edata->message),
				 edata->detail ? errdetail_internal("%s", edata->detail) : 0));
		FreeErrorData(edata);
		ok = false;
		*dropped = 0;
		for (int r = 0; r < nranges; r++)
			*dropped += RANGE_SIZE(ranges[r]);
	}
	PG_END_TRY();
	return ok;
}

/*
 * Write pools of this database back to their windows: every one ("all",
 * when we exit), or those another sequence asked for (park_requested).
 * An entry that no backend uses is parked as well: its totals are written
 * too, and once that committed any database may take the entry (shmem.c).
 * Any use in between makes it active again, and it is not parked.
 */
static void
worker_write_back(bool all)
{
	bool		parked_any = false;
	bool	   *held = NULL;	/* distseq_held_entries(), once needed */

	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq *seq = &Distseq->seqs[i];
		DistseqRange ranges[DISTSEQ_POOL_MAX_RANGES];
		int			nranges = 0;
		Oid			relid;
		uint64		gen;
		int64		issued = 0;
		int64		lost = 0;
		int64		dropped = 0;
		bool		park;
		bool		accounted;
		bool		ok = true;

		if (!all && !seq->park_requested)
			continue;
		LWLockAcquire(seq->lock, LW_EXCLUSIVE);
		gen = pg_atomic_read_u64(&seq->gen);
		if (gen == 0 || seq->dboid != MyDatabaseId ||
			!(all || seq->park_requested) ||
			seq->park_state != DISTSEQ_PARK_ACTIVE)
		{
			LWLockRelease(seq->lock);
			continue;
		}
		seq->park_requested = false;
		if (held == NULL)
			held = distseq_held_entries();
		park = !seq->refill_pending &&
			pg_atomic_read_u32(&seq->drop_state) == 0 &&
			!held[i];
		accounted = seq->accounted;
		if (accounted)
		{
			distseq_pool_take_all(seq, ranges, &nranges);
			issued = seq->issued;
			lost = seq->lost;
		}
		relid = seq->relid;
		if (park)
			seq->park_state = DISTSEQ_PARK_WRITING;
		LWLockRelease(seq->lock);

		if (nranges > 0 || (park && accounted))
			ok = worker_release(relid, gen, ranges, nranges, issued, lost,
								&dropped);

		LWLockAcquire(seq->lock, LW_EXCLUSIVE);
		if (distseq_seq_is(seq, MyDatabaseId, relid, gen))
		{
			seq->lost += dropped;
			/* values went back: the next refill may find some */
			if (nranges > 0)
				seq->exhausted = false;
			if (seq->park_state == DISTSEQ_PARK_WRITING)
			{
				seq->park_state = ok ? DISTSEQ_PARK_PARKED : DISTSEQ_PARK_ACTIVE;
				parked_any = parked_any || ok;
			}
		}
		LWLockRelease(seq->lock);
	}
	if (held != NULL)
		pfree(held);
	if (parked_any)
		ConditionVariableBroadcast(&Distseq->entry_cv);
}

/*
 * No work came for distseq.worker_idle_timeout: write everything back and
 * exit for good, unless something came in meanwhile.  A session that asks
 * for a refill after we checked finds our slot without a worker, and
 * starts a new one.
 */
static void
worker_leave_if_idle(void)
{
	bool		busy;

	if (distseq_worker_idle_timeout <= 0 || distseq_refill_has_peers() ||
		!TimestampDifferenceExceeds(Max(last_work, distseq_refill_last_work()),
									GetCurrentTimestamp(),
									distseq_worker_idle_timeout))
		return;
	worker_write_back(true);

	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	busy = distseq_mailbox_pending(MyDistseqWorker) ||
		MyDistseqWorker->dropper != 0 || MyDistseqWorker->stop;
	for (int i = 0; i < distseq_max_sequences && !busy; i++)
	{
		DistseqSeq *seq = &Distseq->seqs[i];

		LWLockAcquire(seq->lock, LW_SHARED);
		busy = pg_atomic_read_u64(&seq->gen) != 0 &&
			seq->dboid == MyDatabaseId &&
			(seq->refill_pending || seq->park_requested);
		LWLockRelease(seq->lock);
	}
	if (busy)
	{
		LWLockRelease(Distseq->lock);
		last_work = GetCurrentTimestamp();
		return;
	}
	MyDistseqWorker->registered = false;
	MyDistseqWorker->pid = 0;
	MyDistseqWorker->latch = NULL;
	left_idle = true;
	LWLockRelease(Distseq->lock);
	ereport(DEBUG1,
			(errmsg("distseq worker exits: no work for %d ms",
					distseq_worker_idle_timeout)));
	/* exit code 0: the postmaster does not start us again */
	proc_exit(0);
}

/* Exit, and do not let the postmaster start us again */
static void
worker_exit_for_good(void)
{
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	MyDistseqWorker->registered = false;
	LWLockRelease(Distseq->lock);
	proc_exit(0);
}

/*
 * A worker started while its database is being dropped waits, not
 * connected, for the drop to end: connecting would wait for the drop's
 * lock anyway, and fail if the drop commits.
 */
static void
worker_wait_for_drop(void)
{
	for (;;)
	{
		bool		stop;
		bool		dropping;

		LWLockAcquire(Distseq->lock, LW_SHARED);
		stop = MyDistseqWorker->stop;
		dropping = MyDistseqWorker->dropper != 0;
		LWLockRelease(Distseq->lock);
		if (stop)
			worker_exit_for_good();
		if (!dropping)
			return;
		if (ShutdownRequestPending)
			proc_exit(1);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * Take the database's slot: one worker per database, so a second one, or
 * one nobody wants any more, leaves
 */
static void
worker_attach(Oid dboid)
{
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	MyDistseqWorker = distseq_mailbox_find(dboid);
	if (MyDistseqWorker == NULL || MyDistseqWorker->pid != 0 || MyDistseqWorker->stop)
	{
		if (MyDistseqWorker && MyDistseqWorker->stop && MyDistseqWorker->pid == 0)
			MyDistseqWorker->dboid = InvalidOid;
		LWLockRelease(Distseq->lock);
		proc_exit(0);
	}
	MyDistseqWorker->pid = MyProcPid;
	MyDistseqWorker->latch = MyLatch;
	MyDistseqWorker->registered = true;
	LWLockRelease(Distseq->lock);
	before_shmem_exit(worker_detach, (Datum) 0);
}

/* Connect to the database, and set what every refill relies on */
static void
worker_connect(Oid dboid)
{
	bool		stop;

	/*
	 * A database nobody can connect to -- left invalid by a drop that failed
	 * past its point of no return, say -- would have us started again every
	 * second for good: after a few failures in a row, exit for good, until
	 * a session of the database asks for a refill.
	 */
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	if (MyDistseqWorker->connect_failures >= 3)
		MyDistseqWorker->stop = true;
	else
		MyDistseqWorker->connect_failures++;
	stop = MyDistseqWorker->stop;
	LWLockRelease(Distseq->lock);
	if (stop)
		worker_exit_for_good();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	MyDistseqWorker->connect_failures = 0;
	LWLockRelease(Distseq->lock);

	/* a reservation must be durable before any of its values is used */
	if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
		SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("lock_timeout", "10s", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	pgstat_report_appname("distseq worker");
	/* the agent's steps and the waits on peers serve refills meanwhile */
	distseq_set_between_steps(distseq_refill_between_steps);
}

void
distseq_worker_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	bool		dropping;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	worker_attach(dboid);
	worker_wait_for_drop();
	worker_connect(dboid);

	last_work = GetCurrentTimestamp();
	for (;;)
	{
		uint64		pokes;
		bool		poked;

		LWLockAcquire(Distseq->lock, LW_SHARED);
		pokes = MyDistseqWorker->pokes;
		LWLockRelease(Distseq->lock);

		distseq_refill_serve();
		worker_change_pass();
		distseq_refill_run_agent();
		/* entries another sequence asked for */
		worker_write_back(false);

		/*
		 * The database is being dropped: leave it as it is.  The postmaster
		 * starts us again, and we wait for the drop to end.
		 */
		LWLockAcquire(Distseq->lock, LW_SHARED);
		dropping = MyDistseqWorker->dropper != 0;
		poked = MyDistseqWorker->pokes != pokes;
		LWLockRelease(Distseq->lock);
		if (dropping)
			proc_exit(1);
		if (ShutdownRequestPending)
			break;
		if (distseq_refill_serve_again() || poked)
			continue;
		worker_leave_if_idle();

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 1000L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
				SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);
		}
	}

	worker_write_back(true);

	/* exit code 1: the postmaster starts us again unless it is shutting down */
	proc_exit(1);
}
