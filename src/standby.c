/*-------------------------------------------------------------------------
 *
 * standby.c
 *	  Reservations acknowledged by the standbys (distseq.standby_ack = all):
 *	  the values of a reservation are used only once every standby that
 *	  streams from this server when it committed has flushed its commit.
 *
 * An asynchronous standby may lack its primary's last reservations;
 * promoted, it would reserve those values again.  Synchronous replication
 * closes that gap for the standbys it names, but makes every commit wait.
 * Here only reservations wait, after their commit: the refill worker before
 * it publishes a segment, and a backend answering a peer's
 * distseq_peer_reserve() before its answer leaves (a WARNING then tells the
 * peer, which uses no value of a command that warned).  Nobody else's
 * commit waits, and no lock is held while waiting.
 *
 * Waited for are the WAL senders of physical replication that are
 * catching up, streaming or stopping when the wait begins and have
 * reported a flush position: standbys, and pg_receivewal with a slot or
 * --synchronous.  Unlike synchronous replication, which takes its standbys
 * among those streaming, a standby still catching up counts: it is
 * connected and may be promoted, and synchronous replication would make
 * commits wait for a synchronous standby until one streams.  Not
 * logical subscribers (they can never take this server's place), nor
 * pg_basebackup's WAL stream without a slot (it reports no flush
 * position), nor standbys of standbys.  Each one's flush position is read
 * under its spinlock, as pg_stat_get_wal_senders() does, by polling: WAL
 * senders wake only the backends queued for synchronous replication.  A
 * WAL sender that exits before its standby acknowledged fails the wait at
 * once; the timeout, cancel and shutdown fail it too.  The values are then
 * given up.
 *
 * A standby whose WAL sender has gone (after wal_sender_timeout, or at once
 * when the connection broke) is not waited for: it may lack reservations
 * made meanwhile.  README, "Failover, restores and upgrades", says what
 * that leaves.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

/*
 * How often the flush positions are read while waiting: a standby nearby
 * acknowledges within a millisecond or so, so every 100 us for the first
 * 2 ms, then every millisecond.
 */
#define STANDBY_ACK_FAST_POLL_US	100
#define STANDBY_ACK_FAST_POLLS		20
#define STANDBY_ACK_POLL_MS			1

typedef enum AckOutcome
{
	ACK_DONE,
	ACK_TIMEOUT,				/* distseq.standby_ack_timeout ran out */
	ACK_GONE,					/* a WAL sender exited before it acked */
	ACK_CANCELED,				/* cancel, termination, shutdown */
} AckOutcome;

/* A WAL sender waited for: its slot, the process in it then, and its flush */
typedef struct AckSender
{
	int			slot;
	pid_t		pid;
	XLogRecPtr	flush;
} AckSender;

/* a reservation made for a peer in this transaction waits at its commit */
static bool ack_at_commit = false;
static bool ack_callbacks = false;

#if PG_VERSION_NUM < 160000
/* Is this WAL sender process one of physical replication? */
static bool
sender_is_physical(pid_t pid)
{
	/* a logical WAL sender is connected to a database, a physical one not */
	PGPROC	   *proc = BackendPidGetProc(pid);

	return proc != NULL && !OidIsValid(proc->databaseId);
}
#endif

/*
 * The WAL senders to wait for: of physical replication, catching up,
 * streaming or stopping, with a flush position, and not there yet.
 * Returns how many.
 */
static int
senders_to_wait_for(XLogRecPtr lsn, AckSender *senders)
{
	int			n = 0;

	for (int i = 0; i < max_wal_senders; i++)
	{
		WalSnd	   *walsnd = &WalSndCtl->walsnds[i];
		bool		wait;

		SpinLockAcquire(&walsnd->mutex);
		wait = walsnd->pid != 0 &&
			(walsnd->state == WALSNDSTATE_CATCHUP ||
			 walsnd->state == WALSNDSTATE_STREAMING ||
			 walsnd->state == WALSNDSTATE_STOPPING) &&
			!XLogRecPtrIsInvalid(walsnd->flush) && walsnd->flush < lsn;
#if PG_VERSION_NUM >= 160000
		wait = wait && walsnd->kind == REPLICATION_KIND_PHYSICAL;
#endif
		senders[n].slot = i;
		senders[n].pid = walsnd->pid;
		senders[n].flush = walsnd->flush;
		SpinLockRelease(&walsnd->mutex);
#if PG_VERSION_NUM < 160000
		/* not under the spinlock: it looks at the process array */
		wait = wait && sender_is_physical(senders[n].pid);
#endif
		if (wait)
			n++;
	}
	return n;
}

/*
 * Wait until every standby streaming now has flushed "lsn", for at most
 * distseq.standby_ack_timeout.  Never raises an error: a backend answering
 * a peer waits inside its commit, where none may be raised, and checks
 * cancel and termination itself, as synchronous replication does.  On
 * failure, *failed is the WAL sender that failed it.
 */
static AckOutcome
standby_ack_wait(XLogRecPtr lsn, AckSender *failed)
{
	AckSender  *senders = palloc(sizeof(AckSender) * Max(max_wal_senders, 1));
	int			n = senders_to_wait_for(lsn, senders);
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   distseq_standby_ack_timeout);
	AckOutcome	outcome = ACK_DONE;
	int			polls = 0;
	bool		latch_set = false;

	while (n > 0)
	{
		int			rc;

		/* forget the senders that acknowledged; fail on one that left */
		for (int i = n - 1; i >= 0 && outcome == ACK_DONE; i--)
		{
			WalSnd	   *walsnd = &WalSndCtl->walsnds[senders[i].slot];
			pid_t		pid;

			SpinLockAcquire(&walsnd->mutex);
			pid = walsnd->pid;
			if (pid == senders[i].pid)
				senders[i].flush = walsnd->flush;
			SpinLockRelease(&walsnd->mutex);
			if (pid != senders[i].pid)
			{
				*failed = senders[i];
				outcome = ACK_GONE;
			}
			else if (senders[i].flush >= lsn)
				senders[i] = senders[--n];
		}
		if (outcome != ACK_DONE || n == 0)
			break;

		*failed = senders[0];
		if (ProcDiePending || QueryCancelPending || distseq_worker_stopping())
		{
			outcome = ACK_CANCELED;
			break;
		}
		if (GetCurrentTimestamp() >= deadline)
		{
			outcome = ACK_TIMEOUT;
			break;
		}

		if (polls++ < STANDBY_ACK_FAST_POLLS)
		{
			pgstat_report_wait_start(PG_WAIT_EXTENSION);
			pg_usleep(STANDBY_ACK_FAST_POLL_US);
			pgstat_report_wait_end();
			continue;
		}
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH,
					   STANDBY_ACK_POLL_MS, PG_WAIT_EXTENSION);
		if (rc & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			latch_set = true;
		}
		if (rc & WL_POSTMASTER_DEATH)
		{
			/* no answer may leave: the postmaster is gone, and so are we */
			ProcDiePending = true;
			whereToSendOutput = DestNone;
			outcome = ACK_CANCELED;
			break;
		}
	}
	pfree(senders);
	/* the latch is the worker's to-do signal: leave it set for its loop */
	if (latch_set)
		SetLatch(MyLatch);
	return outcome;
}

/* Report a failed wait at "elevel" */
static void
standby_ack_report(int elevel, AckOutcome outcome, XLogRecPtr lsn,
				   AckSender *failed)
{
	const char *hint = "Look at the standbys in pg_stat_replication; distseq.standby_ack = off uses reservations without waiting for them.";

	switch (outcome)
	{
		case ACK_DONE:
			break;
		case ACK_TIMEOUT:
			ereport(elevel,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("a standby did not acknowledge the reservation within distseq.standby_ack_timeout (%d ms)",
							distseq_standby_ack_timeout),
					 errdetail("The standby of WAL sender %d flushed up to %X/%X, the reservation's commit ends at %X/%X. Its values are given up.",
							   (int) failed->pid, LSN_FORMAT_ARGS(failed->flush),
							   LSN_FORMAT_ARGS(lsn)),
					 errhint("%s", hint)));
			break;
		case ACK_GONE:
			ereport(elevel,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("a standby disconnected before it acknowledged the reservation"),
					 errdetail("WAL sender %d exited, its standby having flushed up to %X/%X; the reservation's commit ends at %X/%X. Its values are given up.",
							   (int) failed->pid, LSN_FORMAT_ARGS(failed->flush),
							   LSN_FORMAT_ARGS(lsn)),
					 errhint("%s", hint)));
			break;
		case ACK_CANCELED:
			ereport(elevel,
					(errcode(ERRCODE_QUERY_CANCELED),
					 errmsg("canceled the wait for the standbys to acknowledge the reservation"),
					 errdetail("The reservation's commit ends at %X/%X. Its values are given up.",
							   LSN_FORMAT_ARGS(lsn))));
			break;
	}
}

/*
 * The refill worker, after the commit of a reservation that ends at "lsn":
 * return once every streaming standby has it, or raise an error, and its
 * values are not used.
 */
void
distseq_standby_ack(XLogRecPtr lsn)
{
	AckOutcome	outcome;
	AckSender	failed = {0};

	if (distseq_standby_ack_mode == DISTSEQ_STANDBY_ACK_OFF)
		return;
	pgstat_report_activity(STATE_RUNNING, "distseq refill: waiting for the standbys");
	outcome = standby_ack_wait(lsn, &failed);
	pgstat_report_activity(STATE_IDLE, NULL);
	if (outcome == ACK_CANCELED)
		QueryCancelPending = false;
	standby_ack_report(ERROR, outcome, lsn, &failed);
}

/*
 * At the commit of a transaction that reserved values for a peer, after
 * its locks are gone: wait, and warn the peer if the standbys did not
 * acknowledge it.
 */
static void
standby_ack_release(ResourceReleasePhase phase, bool isCommit, bool isTopLevel,
					void *arg)
{
	AckOutcome	outcome;
	AckSender	failed = {0};

	if (phase != RESOURCE_RELEASE_AFTER_LOCKS || !isTopLevel || !ack_at_commit)
		return;
	ack_at_commit = false;
	if (!isCommit)
		return;

	outcome = standby_ack_wait(XactLastCommitEnd, &failed);
	if (outcome == ACK_CANCELED)
		QueryCancelPending = false;
	/* the answer is on its way: a WARNING tells the peer not to use it */
	standby_ack_report(WARNING, outcome, XactLastCommitEnd, &failed);
	/* and when this backend is going away, no answer leaves at all */
	if (ProcDiePending)
		whereToSendOutput = DestNone;
}

static void
standby_ack_xact(XactEvent event, void *arg)
{
	if (!ack_at_commit)
		return;
	if (event == XACT_EVENT_PRE_PREPARE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot prepare a transaction that reserved distseq values for a peer"),
				 errdetail("Its reservation must be acknowledged by the standbys when it commits.")));
	if (event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT)
		ack_at_commit = false;
}

/*
 * distseq_peer_reserve() made a reservation in this transaction: with
 * distseq.standby_ack = all, its commit waits for the standbys before the
 * answer goes out.
 */
void
distseq_standby_ack_at_commit(void)
{
	if (distseq_standby_ack_mode == DISTSEQ_STANDBY_ACK_OFF)
		return;
	if (!ack_callbacks)
	{
		RegisterXactCallback(standby_ack_xact, NULL);
		RegisterResourceReleaseCallback(standby_ack_release, NULL);
		ack_callbacks = true;
	}
	ack_at_commit = true;
}
