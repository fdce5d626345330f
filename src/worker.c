/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The refill worker: one background worker per database that uses
 *	  distseq, started on demand, restarted by the postmaster if it dies.
 *
 * Backends never reserve values themselves.  When a pool runs low, the
 * backend sets refill_pending on the entry and sets this worker's latch
 * (registering the worker first if the database has none).  The worker
 * reserves a segment in a transaction of its own, commits it with
 * synchronous_commit at least "on" -- so the reservation is flushed, and
 * acknowledged by synchronous standbys and, with distseq.standby_ack = all,
 * by every streaming standby (standby.c), before any value of it is used --
 * and only then publishes the segment into the pool and wakes the waiters.
 * One worker per database and one flag per sequence keep at most one
 * refill per sequence in flight.
 *
 * A sequence that draws from other servers is refilled by a call to one of
 * them, made outside any transaction: while the worker waits on it (up to
 * distseq.remote_timeout), it serves the refills of the database's other
 * sequences from their own windows (distseq_worker_serve_refills), and puts
 * off those that would call a server or the agent until the call ends, so
 * one remote call at most is in flight.  A server that did not answer rests
 * a while (remote.c): a hung one costs only its own sequence, a timeout now
 * and then.
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
 * that a clean restart skips no value.  A
 * value is always either in shared memory or unreserved in the catalog,
 * never both: segments are committed before they are published, and
 * removed from shared memory before they are written back.
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
 * DistseqShared->lock guards the DistseqDbWorker table.
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
#include "utils/acl.h"
#include "commands/dbcommands.h"
#include "common/hashfn.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

static TimestampTz last_agent_run = 0;
static bool in_agent_pass = false;	/* refills are served between its steps */
static DistseqSeq *remote_waiting = NULL;	/* its refill waits on a peer */
static bool serving_meanwhile = false;	/* serving while it waits */
static List *remote_deferred = NIL; /* refills put off meanwhile */
static bool serve_again = false;	/* some were put off: serve before sleeping */

static TimestampTz last_work = 0;	/* for distseq.worker_idle_timeout */
static bool has_peers = true;	/* the agent has work on a timer */
static bool left_idle = false;	/* our slot is no longer ours */

static bool worker_agent_pass(const char *focus, ErrorData **focus_error);
static void worker_serve(void);
static void worker_defer(DistseqSeq *seq);
static DistseqDbWorker *my_worker = NULL;

/* The database this backend's transaction is dropping, if any */
static Oid	dropping_db = InvalidOid;
static bool drop_callback_registered = false;

/* Caller holds Distseq->lock */
static DistseqDbWorker *
worker_find(Oid dboid)
{
	for (int i = 0; i < distseq_max_sequences; i++)
	{
		if (Distseq->workers[i].dboid == dboid)
			return &Distseq->workers[i];
	}
	return NULL;
}

/*
 * Wake the worker, and count it: the worker's latch is also reset by waits
 * inside what it runs (a condition variable's, an I/O's), so the count is
 * what tells it that something was asked while it was busy.  Caller holds
 * Distseq->lock exclusively.
 */
static void
worker_poke(DistseqDbWorker *w)
{
	w->pokes++;
	if (w->latch)
		SetLatch(w->latch);
}

static bool
worker_register(Oid dboid)
{
	BackgroundWorker bgw;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 1;
	strcpy(bgw.bgw_library_name, "distseq");
	strcpy(bgw.bgw_function_name, "distseq_worker_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "distseq worker for database %u", dboid);
	strcpy(bgw.bgw_type, "distseq worker");
	bgw.bgw_main_arg = ObjectIdGetDatum(dboid);
	bgw.bgw_notify_pid = 0;

	return RegisterDynamicBackgroundWorker(&bgw, NULL);
}

/*
 * The worker slot of a database, set up if it has none: a free slot, or
 * one left by a database whose worker exited and that nothing waits on.
 * NULL when every slot belongs to a database with a worker.  Caller holds
 * Distseq->lock exclusively.
 */
static DistseqDbWorker *
worker_slot(Oid dboid)
{
	DistseqDbWorker *w = worker_find(dboid);

	if (w != NULL)
		return w;
	for (int i = 0; i < distseq_max_sequences && w == NULL; i++)
	{
		DistseqDbWorker *old = &Distseq->workers[i];

		if (old->dboid == InvalidOid ||
			(!old->registered && old->pid == 0 && old->dropper == 0 &&
			 old->change_op == 0 && old->agent_done >= old->agent_requested &&
			 old->change_done >= old->change_requested))
			w = old;
	}
	if (w == NULL)
		return NULL;
	memset((char *) w + offsetof(DistseqDbWorker, dboid), 0,
		   sizeof(DistseqDbWorker) - offsetof(DistseqDbWorker, dboid));
	w->dboid = dboid;
	return w;
}

/*
 * Tell the worker of a database that there is work, starting it if the
 * database has none.
 */
void
distseq_worker_wake(Oid dboid)
{
	DistseqDbWorker *w;
	bool		started = true;

	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	w = worker_slot(dboid);
	if (w != NULL && w->latch)
		worker_poke(w);
	else if (w != NULL && !w->registered)
	{
		/* if it fails, the next caller tries again */
		started = worker_register(dboid);
		w->registered = started;
	}
	LWLockRelease(Distseq->lock);

	if (w == NULL)
	{
		char	   *name = distseq_database_name(dboid);

		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a distseq worker for database \"%s\"", name),
				 errdetail("Each of the %d worker slots (distseq.max_sequences) serves a database whose worker runs.",
						   distseq_max_sequences),
				 errhint("Increase distseq.max_sequences and restart the server.")));
	}
	if (!started)
	{
		char	   *name = distseq_database_name(dboid);

		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start the distseq worker for database \"%s\"", name),
				 errhint("Increase max_worker_processes.")));
	}
}

/* Is the worker of a database connected to it? */
static bool
worker_connected(Oid dboid)
{
	DistseqDbWorker *w;
	int			pid;
	PGPROC	   *proc;

	LWLockAcquire(Distseq->lock, LW_SHARED);
	w = worker_find(dboid);
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
	w = worker_find(dboid);
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
		worker_poke(w);
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
	w = worker_slot(dboid);
	if (w != NULL)
	{
		w->dropper = MyProcPid;
		worker_poke(w);
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

/* Should a long wait (on a peer) give up now? */
bool
distseq_worker_stopping(void)
{
	return ShutdownRequestPending ||
		(my_worker != NULL && (my_worker->stop || my_worker->dropper != 0));
}

static void
worker_detach(int code, Datum arg)
{
	if (left_idle)
		return;
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	my_worker->pid = 0;
	my_worker->latch = NULL;
	if (my_worker->stop)
		my_worker->dboid = InvalidOid;
	LWLockRelease(Distseq->lock);
}

/*
 * Every PG_CATCH of the worker: take the error, abort the transaction it
 * broke, and carry on in "cxt" (where the PG_TRY began).  The caller logs
 * the error, hands it on or frees it.
 */
static ErrorData *
worker_catch(MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	pgstat_report_activity(STATE_IDLE, NULL);
	return edata;
}

/*
 * Is the character at s (len bytes, valid in the encoding) one of the C1
 * controls, U+0080 to U+009F?  CSI (U+009B) starts an escape sequence as
 * ESC [ does, NEL (U+0085) is a line break.  They are two bytes in UTF-8,
 * and the bytes 0x80 to 0x9F in the ISO 8859 encodings.
 */
static bool
text_is_c1(int encoding, const char *s, int len)
{
	unsigned char c = (unsigned char) s[0];

	if (encoding == PG_UTF8)
		return len == 2 && c == 0xc2 && (unsigned char) s[1] <= 0x9f;
	if ((encoding >= PG_LATIN1 && encoding <= PG_LATIN10) ||
		(encoding >= PG_ISO_8859_5 && encoding <= PG_ISO_8859_8))
		return len == 1 && c >= 0x80 && c <= 0x9f;
	return false;
}

/*
 * A message fit for a client's error, a view or the log, from text that may
 * come from a peer: at most size - 1 bytes, cut between characters and
 * ending in "..." when cut; every control character, C0 or C1 (a line
 * break would forge log lines, an escape sequence drive a terminal) made a
 * space, and
 * every byte that starts no valid character of the database's encoding a
 * "?".  Palloc'd.
 */
char *
distseq_clean_text(const char *src, int size)
{
	int			encoding = GetDatabaseEncoding();
	int			srclen = strlen(src);
	int			room = srclen < size ? size - 1 : size - 4;
	char	   *dst = palloc(size);
	int			n = 0;

	Assert(size > 4);
	for (int i = 0; i < srclen;)
	{
		unsigned char c = (unsigned char) src[i];
		int			len = 1;

		if (IS_HIGHBIT_SET(c))
			len = pg_encoding_verifymbchar(encoding, src + i, srclen - i);
		if (n + Max(len, 1) > room)
			break;
		if (len < 1)
		{
			dst[n++] = '?';
			len = 1;
		}
		else if (c < 0x20 || c == 0x7f || text_is_c1(encoding, src + i, len))
			dst[n++] = ' ';
		else
		{
			memcpy(dst + n, src + i, len);
			n += len;
		}
		i += len;
	}
	if (srclen >= size)
	{
		memcpy(dst + n, "...", 3);
		n += 3;
	}
	dst[n] = '\0';
	return dst;
}

/* Copy a message into a fixed field of shared memory, cleaned and cut */
static void
worker_copy_message(char *dst, const char *src, int size)
{
	char	   *clean = distseq_clean_text(src, size);

	strlcpy(dst, clean, size);
	pfree(clean);
}

/* Set a reply; caller holds Distseq->lock.  NULL texts are empty. */
static void
worker_reply_set(DistseqWorkerReply *reply, int elevel, int sqlstate,
				 const char *message, const char *detail, const char *hint)
{
	reply->elevel = elevel;
	reply->sqlstate = sqlstate;
	worker_copy_message(reply->message, message ? message : "",
						sizeof(reply->message));
	worker_copy_message(reply->detail, detail ? detail : "",
						sizeof(reply->detail));
	worker_copy_message(reply->hint, hint ? hint : "", sizeof(reply->hint));
}

/* Raise the error a reply carries, if it carries one */
static void
worker_reply_raise(const DistseqWorkerReply *reply)
{
	if (reply->elevel == ERROR)
		ereport(ERROR,
				(errcode(reply->sqlstate),
				 errmsg_internal("%s", reply->message),
				 reply->detail[0] ? errdetail_internal("%s", reply->detail) : 0,
				 reply->hint[0] ? errhint("%s", reply->hint) : 0));
}

/*
 * The worker's log lines that repeat -- a refill failing for every session
 * of a minority node, an agent pass failing at each of its intervals -- are
 * written once per DISTSEQ_LOG_REPEAT_SECS for the same message (which
 * names the sequence, and the peer where one is at fault); the next line
 * of that message after the interval says how many were left out.  The
 * table is this worker's own and bounded: past LOG_REPEAT_MAX messages, the
 * ones outside their interval are forgotten, and if that is not enough a
 * line is written untracked.
 */
#define DISTSEQ_LOG_REPEAT_SECS	10
#define LOG_REPEAT_MAX			1024

typedef struct LogRepeat
{
	uint64		key;			/* hash of the message */
	TimestampTz logged;			/* when it was last written */
	int64		suppressed;		/* left out since */
} LogRepeat;

static HTAB *log_repeats = NULL;
static MemoryContext log_cxt = NULL;

static void worker_log(const char *detail, const char *fmt,...) pg_attribute_printf(2, 3);

static void
worker_log(const char *detail, const char *fmt,...)
{
	TimestampTz now = GetCurrentTimestamp();
	MemoryContext oldcxt;
	StringInfoData message;
	char	   *clean;
	uint64		key;
	LogRepeat  *r = NULL;
	int64		suppressed = 0;
	bool		found;

	if (log_repeats == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(LogRepeat);
		log_repeats = hash_create("distseq log repeats", 64, &ctl,
								  HASH_ELEM | HASH_BLOBS);
		log_cxt = AllocSetContextCreate(TopMemoryContext, "distseq log",
										ALLOCSET_SMALL_SIZES);
	}
	oldcxt = MemoryContextSwitchTo(log_cxt);
	initStringInfo(&message);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&message, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&message, needed);
	}
	clean = distseq_clean_text(message.data, 1024);
	key = hash_bytes_extended((const unsigned char *) clean, strlen(clean), 0);

	if (hash_get_num_entries(log_repeats) >= LOG_REPEAT_MAX &&
		hash_search(log_repeats, &key, HASH_FIND, NULL) == NULL)
	{
		HASH_SEQ_STATUS scan;
		LogRepeat  *old;

		hash_seq_init(&scan, log_repeats);
		while ((old = hash_seq_search(&scan)) != NULL)
		{
			if (TimestampDifferenceExceeds(old->logged, now,
										   DISTSEQ_LOG_REPEAT_SECS * 1000))
				hash_search(log_repeats, &old->key, HASH_REMOVE, NULL);
		}
	}
	if (hash_get_num_entries(log_repeats) < LOG_REPEAT_MAX ||
		hash_search(log_repeats, &key, HASH_FIND, NULL) != NULL)
	{
		r = hash_search(log_repeats, &key, HASH_ENTER, &found);
		if (found && !TimestampDifferenceExceeds(r->logged, now,
												 DISTSEQ_LOG_REPEAT_SECS * 1000))
		{
			r->suppressed++;
			MemoryContextSwitchTo(oldcxt);
			MemoryContextReset(log_cxt);
			return;
		}
		suppressed = found ? r->suppressed : 0;
		r->logged = now;
		r->suppressed = 0;
	}

	detail = (detail && detail[0]) ? distseq_clean_text(detail, 2048) : NULL;
	if (suppressed > 0)
		ereport(LOG,
				(errmsg_internal("%s", clean),
				 errdetail_internal("%s%sThe same message came " INT64_FORMAT " more times in the %d seconds before and was not logged.",
									detail ? detail : "", detail ? " " : "",
									suppressed, DISTSEQ_LOG_REPEAT_SECS)));
	else
		ereport(LOG,
				(errmsg_internal("%s", clean),
				 detail ? errdetail_internal("%s", detail) : 0));
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(log_cxt);
}

/*
 * Did the synchronous standbys acknowledge our last commit?  A cancel
 * (pg_cancel_backend) during the wait ends it with only a WARNING; values
 * of such a commit must not be used, a promoted standby might not have it.
 */
static bool
worker_commit_acknowledged(void)
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
worker_refill_failed(DistseqSeq *seq, uint64 gen, const char *message,
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
worker_adapt_segment(DistseqSeq *seq)
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
worker_reservation_lost(DistseqSeq *seq, uint64 gen, bool account,
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
worker_reserve(DistseqSeq *seq, Oid relid, uint64 gen, int64 count,
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
		if (!worker_commit_acknowledged())
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("the reservation was not acknowledged by the synchronous standbys"),
					 errdetail("Its values are given up.")));
		if (RANGE_SIZE(*r) > 0)
			distseq_standby_ack(XactLastCommitEnd);
	}
	PG_CATCH();
	{
		ErrorData  *edata = worker_catch(oldcxt);

		worker_log(edata->detail, "distseq worker could not refill sequence with relation %u: %s",
				   relid, edata->message);
		if (committed)
			worker_reservation_lost(seq, gen, account, *r, *skipped);
		worker_refill_failed(seq, gen, edata->message, edata->detail);
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
worker_local_refill(DistseqSeq *seq, Oid relid, uint64 gen, int64 count,
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
		if (!worker_reserve(seq, relid, gen, count, account, issued, lost,
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
				worker_defer(seq);
			serve_again = true;
			return false;
		}
		if (attempt > 0)
		{
			/* not exhausted: the windows are just not there yet */
			worker_refill_failed(seq, gen,
								 "no open window left here, and the agent has not opened one yet",
								 NULL);
			return false;
		}
		/* the agent's reason for this very sequence, if it failed */
		(void) worker_agent_pass(name, &why);
		if (why)
		{
			worker_refill_failed(seq, gen, why->message, why->detail);
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
worker_check_group(RemoteReserve *rr, int64 node_id, const int64 *members, int nmembers)
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
worker_remote_reserve_one(RemoteReserve *rr)
{
	RemoteConn *rc;
	char		count[32];
	const char *params[2] = {rr->name, count};
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
	res = distseq_remote_query(rc,
							   psprintf("SELECT r.lo, r.hi, n.node_id, n.members"
										" FROM %1$s.distseq_peer_reserve($1::pg_catalog.text,"
										" $2::pg_catalog.int8) r,"
										" %1$s.distseq_peer_state() n",
										distseq_remote_schema(rc)),
							   2, params, "llla", 1);
	remote_waiting = NULL;
	pgstat_report_activity(STATE_IDLE, NULL);

	r.lo = distseq_remote_int8(res, 0, 0);
	r.hi = distseq_remote_int8(res, 0, 1);
	members = distseq_remote_int8s(res, 0, 3, &nmembers);
	worker_check_group(rr, distseq_remote_int8(res, 0, 2), members, nmembers);
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
worker_sources(DistseqSeq *seq, Oid relid, uint64 gen, MemoryContext cxt,
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
		ErrorData  *edata = worker_catch(oldcxt);

		worker_refill_failed(seq, gen, edata->message, edata->detail);
		FreeErrorData(edata);
		return false;
	}
	PG_END_TRY();
	return true;
}

/*
 * A sequence that draws from other servers: reserve a segment on the first
 * that answers, in that server's own transaction (committed synchronously
 * there before we see the result), failing over to the next on any error
 * or timeout.  A server that did not answer rests a while: meanwhile it is
 * passed over at once.  Returns false, having recorded the failure, when
 * no server gave a segment.
 */
static bool
worker_remote_refill(DistseqSeq *seq, Oid relid, uint64 gen, int64 count,
					 RefillSources *src, MemoryContext cxt, DistseqRange *r)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	RemoteReserve rr = {0};
	volatile bool ok = false;
	char	   *volatile failure = NULL;
	StringInfoData errors;
	ListCell   *lc;

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
	foreach(lc, src->sources)
	{
		RemoteSource *s = lfirst(lc);
		const char *why;

		/* the reason it rests, for who wonders why it is not tried */
		if (s->error == NULL && distseq_remote_resting(s->serverid, &why))
			s->error = why[0] ? psprintf("%s (a moment ago)", why) :
				psprintf("distseq peer \"%s\" did not answer a moment ago", s->name);
		if (s->error)
		{
			appendStringInfo(&errors, "%s%s", errors.len ? "; " : "", s->error);
			continue;
		}
		rr.source = s;
		PG_TRY();
		{
			worker_remote_reserve_one(&rr);
			ok = true;
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			remote_waiting = NULL;
			edata = worker_catch(cxt);
			if (distseq_remote_unanswered(edata->sqlerrcode))
				distseq_remote_rest(s->serverid, edata->message);
			appendStringInfo(&errors, "%s%s", errors.len ? "; " : "", edata->message);
			FreeErrorData(edata);
		}
		PG_END_TRY();
		if (ok)
			break;
	}
	if (ok && rr.nnodes != src->nnodes)
	{
		PG_TRY();
		{
			distseq_xact_begin();
			distseq_catalog_set_server_nodes(relid, rr.nodes, rr.nnodes);
			distseq_xact_commit();
		}
		PG_CATCH();
		{
			ErrorData  *edata = worker_catch(cxt);

			/* the group must be on record before its values are used */
			ok = false;
			failure = pstrdup(edata->message);
			FreeErrorData(edata);
		}
		PG_END_TRY();
	}
	MemoryContextSwitchTo(cxt);
	if (!ok)
		worker_refill_failed(seq, gen, failure ? failure :
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
worker_defer(DistseqSeq *seq)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);

	remote_deferred = lappend(remote_deferred, seq);
	MemoryContextSwitchTo(oldcxt);
}

static void
worker_refill(DistseqSeq *seq)
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
	if (!worker_sources(seq, relid, gen, cxt, &src))
		return;
	if (src.sources != NIL && remote_waiting)
	{
		worker_defer(seq);
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
	worker_adapt_segment(seq);
	count = seq->segment_size;
	account = !seq->accounted;
	issued = seq->issued;
	lost = seq->lost;
	LWLockRelease(seq->lock);

	if (src.sources != NIL)
	{
		if (!worker_remote_refill(seq, relid, gen, count, &src, cxt, &r))
			return;
	}
	else if (!worker_local_refill(seq, relid, gen, count, account, &issued,
								  &lost, &skipped, &r))
		return;

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

/*
 * One pass of the agent, in transactions of its own.  Returns false, and
 * logs why, when it failed for any sequence (no majority reachable, say):
 * one line per failing sequence, each rate-limited (worker_log).  "focus",
 * a sequence whose refill waits for the pass, goes first, and why it
 * failed for that sequence -- or for all of them -- comes back in
 * *focus_error (NULL if it did not fail), in the caller's memory.
 */
static bool
worker_agent_pass(const char *focus, ErrorData **focus_error)
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

	LWLockAcquire(Distseq->lock, LW_SHARED);
	requested = my_worker->agent_requested;
	asked = requested > my_worker->agent_done;
	LWLockRelease(Distseq->lock);

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
		ErrorData  *edata = worker_catch(failure_cxt);
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

		worker_log(f->error->detail, "distseq agent: %s", f->error->message);
		if (first == NULL)
			first = f->error;
		if (focus && focus_error && *focus_error == NULL &&
			(f->sequence_name == NULL || strcmp(f->sequence_name, focus) == 0))
			*focus_error = f->error;
		ok = false;
	}
	/* tell whoever asked for this pass how it went */
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	if (first)
		worker_reply_set(&my_worker->agent_reply, ERROR,
						 ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
						 first->message, first->detail, NULL);
	else
		worker_reply_set(&my_worker->agent_reply, 0, 0, NULL, NULL, NULL);
	my_worker->agent_done = Max(my_worker->agent_done, requested);
	LWLockRelease(Distseq->lock);
	ConditionVariableBroadcast(&my_worker->agent_cv);
	return ok;
}

/*
 * Serve the refills asked for meanwhile: between the steps of an agent
 * pass, which may wait on peers, and while a remote refill waits on one
 * outside any transaction (remote.c calls this then).  While a remote
 * refill waits, only refills from this node's own windows are served: the
 * others, and those that would need an agent pass, are put off until it
 * ends (worker_defer), so at most one remote call is in flight and no
 * connection is used twice at once.
 */
void
distseq_worker_serve_refills(void)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	if (my_worker == NULL || IsTransactionState() || serving_meanwhile)
		return;
	if (remote_waiting)
	{
		serving_meanwhile = true;
		PG_TRY();
		{
			worker_serve();
		}
		PG_FINALLY();
		{
			serving_meanwhile = false;
		}
		PG_END_TRY();
		pgstat_report_activity(STATE_RUNNING, "distseq remote refill");
	}
	else if (in_agent_pass)
		worker_serve();
	MemoryContextSwitchTo(oldcxt);
}

/*
 * Sleep on a worker's condition variable until "ready", called under
 * Distseq->lock, says what was asked is done; wake the worker meanwhile
 * (it may have been restarted).  Raises "message" after timeout_ms.
 */
static void
worker_wait(Oid dboid, DistseqDbWorker *w, long timeout_ms,
			bool (*ready) (DistseqDbWorker *w, void *arg), void *arg,
			const char *message, const char *hint)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	ConditionVariablePrepareToSleep(&w->agent_cv);
	for (;;)
	{
		bool		done;

		LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
		/* an idle slot may go to another database if all slots are taken */
		if (w->dboid != dboid)
		{
			char	   *name;

			LWLockRelease(Distseq->lock);
			ConditionVariableCancelSleep();
			name = distseq_database_name(dboid);
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the distseq worker of database \"%s\" went away", name),
					 errhint("Try again.")));
		}
		done = ready(w, arg);
		LWLockRelease(Distseq->lock);
		if (done)
			break;
		if (GetCurrentTimestamp() >= deadline)
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg_internal("%s", message),
					 errhint("%s", hint)));
		}
		(void) ConditionVariableTimedSleep(&w->agent_cv, 1000, PG_WAIT_EXTENSION);
		distseq_worker_wake(dboid);
	}
	ConditionVariableCancelSleep();
}

typedef struct AgentWait
{
	uint64		ticket;
	DistseqWorkerReply reply;
} AgentWait;

static bool
agent_pass_done(DistseqDbWorker *w, void *arg)
{
	AgentWait  *aw = arg;

	if (w->agent_done < aw->ticket)
		return false;
	aw->reply = w->agent_reply;
	return true;
}

/*
 * Ask the worker of a database for an agent pass and wait for it to end;
 * raise its error, if it failed.  For distseq_maintain().
 */
void
distseq_worker_agent_pass(Oid dboid)
{
	DistseqDbWorker *w;
	AgentWait	aw;

	distseq_worker_wake(dboid);
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	w = worker_find(dboid);
	if (w == NULL)
		elog(ERROR, "distseq worker slot of database %u is gone", dboid);
	aw.ticket = ++w->agent_requested;
	worker_poke(w);
	LWLockRelease(Distseq->lock);
	/* it may have left, idle, since it was woken: it stays for a request */
	distseq_worker_wake(dboid);

	worker_wait(dboid, w, Max(distseq_refill_timeout, distseq_remote_timeout * 10),
				agent_pass_done, &aw, _("timed out waiting for the distseq agent"),
				_("Check the server log for errors of the distseq worker."));
	worker_reply_raise(&aw.reply);
}

/*
 * Run the change of membership a backend handed over, if any, and report
 * how it went.
 */
static void
worker_change_pass(void)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	char		op;
	char		server[NAMEDATALEN];
	Oid			userid;
	uint64		ticket;
	char	   *volatile unfinished = NULL;
	ErrorData  *volatile edata = NULL;

	LWLockAcquire(Distseq->lock, LW_SHARED);
	op = my_worker->change_op;
	strlcpy(server, my_worker->change_server, sizeof(server));
	userid = my_worker->change_user;
	ticket = my_worker->change_requested;
	LWLockRelease(Distseq->lock);
	if (op == 0)
		return;

	last_work = GetCurrentTimestamp();
	pgstat_report_activity(STATE_RUNNING, "distseq membership change");
	PG_TRY();
	{
		unfinished = distseq_change_run(op, server, userid, oldcxt);
	}
	PG_CATCH();
	{
		edata = worker_catch(oldcxt);
		ereport(LOG,
				(errmsg("distseq membership change failed: %s", edata->message)));
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);

	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	if (edata)
		worker_reply_set(&my_worker->change_reply, ERROR, edata->sqlerrcode,
						 edata->message, edata->detail, edata->hint);
	else
		worker_reply_set(&my_worker->change_reply, unfinished ? WARNING : 0,
						 0, unfinished, NULL, NULL);
	my_worker->change_op = 0;
	my_worker->change_done = ticket;
	LWLockRelease(Distseq->lock);
	ConditionVariableBroadcast(&my_worker->agent_cv);
	if (edata)
		FreeErrorData(edata);
	if (unfinished)
		pfree(unfinished);

	/* a new member needs windows: run the agent next */
	last_agent_run = 0;
}

typedef struct ChangeWait
{
	char		op;
	const char *server_name;
	Oid			userid;
	uint64		ticket;			/* 0 until the slot was ours */
	DistseqWorkerReply reply;
} ChangeWait;

/* Hand the change over once the slot is free; then wait for its end */
static bool
change_done(DistseqDbWorker *w, void *arg)
{
	ChangeWait *cw = arg;

	if (cw->ticket == 0)
	{
		if (w->change_op != 0)
			return false;
		w->change_op = cw->op;
		strlcpy(w->change_server, cw->server_name, sizeof(w->change_server));
		w->change_user = cw->userid;
		cw->ticket = ++w->change_requested;
		worker_poke(w);
		return false;
	}
	if (w->change_done < cw->ticket)
		return false;
	cw->reply = w->change_reply;
	return true;
}

/*
 * Hand a change of membership to the worker of a database and wait for it:
 * the worker makes it in transactions of its own (change.c).  Raises what
 * the worker reported: an error, or a warning when the change is decided
 * but not active on every member yet.
 */
void
distseq_worker_change(Oid dboid, char op, const char *server_name, Oid userid)
{
	DistseqDbWorker *w;
	ChangeWait	cw = {op, server_name, userid, 0};

	distseq_worker_wake(dboid);
	LWLockAcquire(Distseq->lock, LW_SHARED);
	w = worker_find(dboid);
	LWLockRelease(Distseq->lock);
	if (w == NULL)
		elog(ERROR, "distseq worker slot of database %u is gone", dboid);

	/* a change talks to every member, twice */
	worker_wait(dboid, w, Max(distseq_refill_timeout, distseq_remote_timeout * 20),
				change_done, &cw,
				_("timed out waiting for the distseq worker to change the membership"),
				_("The change may still be made: look at distseq_peers."));
	worker_reply_raise(&cw.reply);
	if (cw.reply.elevel == WARNING)
		ereport(WARNING,
				(errmsg("the distseq membership change is decided, but not active on every member yet"),
				 errdetail_internal("%s", cw.reply.message),
				 errhint("The worker goes on as members become reachable; distseq_peers shows the pending ones.")));
}

/* Is it time for the agent?  Only nodes with peers run it on a timer. */
static void
worker_maybe_run_agent(void)
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
		FreeErrorData(worker_catch(oldcxt));
	}
	PG_END_TRY();
	has_peers = peers;
	if (peers)
		(void) worker_agent_pass(NULL, NULL);
}

/* Serve every refill requested for this database */
static void
worker_serve(void)
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
			worker_refill(seq);
	}
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
		ErrorData  *edata = worker_catch(oldcxt);

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
		park = !seq->refill_pending &&
			pg_atomic_read_u32(&seq->drop_state) == 0 &&
			!distseq_seq_held(seq);
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

	if (distseq_worker_idle_timeout <= 0 || has_peers ||
		!TimestampDifferenceExceeds(last_work, GetCurrentTimestamp(),
									distseq_worker_idle_timeout))
		return;
	worker_write_back(true);

	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	busy = my_worker->agent_requested > my_worker->agent_done ||
		my_worker->change_op != 0 || my_worker->dropper != 0 ||
		my_worker->stop;
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
	my_worker->registered = false;
	my_worker->pid = 0;
	my_worker->latch = NULL;
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
	my_worker->registered = false;
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
		stop = my_worker->stop;
		dropping = my_worker->dropper != 0;
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

void
distseq_worker_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	bool		stop;
	bool		dropping;

	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();

	/* one worker per database: a second one, or one nobody wants, leaves */
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	my_worker = worker_find(dboid);
	if (my_worker == NULL || my_worker->pid != 0 || my_worker->stop)
	{
		if (my_worker && my_worker->stop && my_worker->pid == 0)
			my_worker->dboid = InvalidOid;
		LWLockRelease(Distseq->lock);
		proc_exit(0);
	}
	my_worker->pid = MyProcPid;
	my_worker->latch = MyLatch;
	my_worker->registered = true;
	LWLockRelease(Distseq->lock);
	before_shmem_exit(worker_detach, (Datum) 0);

	worker_wait_for_drop();

	/*
	 * A database nobody can connect to -- left invalid by a drop that failed
	 * past its point of no return, say -- would have us started again every
	 * second for good: after a few failures in a row, exit for good, until
	 * a session of the database asks for a refill.
	 */
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	if (my_worker->connect_failures >= 3)
		my_worker->stop = true;
	else
		my_worker->connect_failures++;
	stop = my_worker->stop;
	LWLockRelease(Distseq->lock);
	if (stop)
		worker_exit_for_good();
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	my_worker->connect_failures = 0;
	LWLockRelease(Distseq->lock);

	/* a reservation must be durable before any of its values is used */
	if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_FLUSH)
		SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("lock_timeout", "10s", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("statement_timeout", "0", PGC_SUSET, PGC_S_OVERRIDE);
	pgstat_report_appname("distseq worker");

	last_work = GetCurrentTimestamp();
	for (;;)
	{
		bool		asked;
		uint64		pokes;

		LWLockAcquire(Distseq->lock, LW_SHARED);
		pokes = my_worker->pokes;
		LWLockRelease(Distseq->lock);

		worker_serve();
		worker_change_pass();
		LWLockAcquire(Distseq->lock, LW_SHARED);
		asked = my_worker->agent_requested > my_worker->agent_done;
		LWLockRelease(Distseq->lock);
		if (asked)
		{
			last_work = GetCurrentTimestamp();
			(void) worker_agent_pass(NULL, NULL);
		}
		else
			worker_maybe_run_agent();
		/* entries another sequence asked for */
		worker_write_back(false);

		/*
		 * The database is being dropped: leave it as it is.  The postmaster
		 * starts us again, and we wait for the drop to end.
		 */
		LWLockAcquire(Distseq->lock, LW_SHARED);
		dropping = my_worker->dropper != 0;
		if (my_worker->pokes != pokes)
			serve_again = true;
		LWLockRelease(Distseq->lock);
		if (dropping)
			proc_exit(1);
		if (ShutdownRequestPending)
			break;
		if (serve_again)
		{
			serve_again = false;
			continue;
		}
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
