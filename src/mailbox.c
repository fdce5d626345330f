/*-------------------------------------------------------------------------
 *
 * mailbox.c
 *	  The worker slots of shared memory (DistseqDbWorker, one per database
 *	  with a refill worker), seen from both ends: a backend finds its
 *	  database's slot, starts or wakes the worker, posts a request (an agent
 *	  pass, a change of membership) and waits for the reply; the worker
 *	  process finds its own slot here (MyDistseqWorker) and tells long waits
 *	  when to give up (distseq_worker_stopping) and what to do between their
 *	  steps (distseq_between_steps).
 *
 * Locking: DistseqShared->lock guards every field of every slot; a slot's
 * agent_cv is where backends sleep for a reply, never holding the lock.
 * A slot goes to another database only when no worker runs in it and no
 * request in it is outstanding (distseq_mailbox_slot).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/latch.h"
#include "utils/timestamp.h"

/* The slot of this process, when it is a refill worker (worker.c) */
DistseqDbWorker *MyDistseqWorker = NULL;

/* Caller holds Distseq->lock */
DistseqDbWorker *
distseq_mailbox_find(Oid dboid)
{
	for (int i = 0; i < max_worker_processes; i++)
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
void
distseq_mailbox_poke(DistseqDbWorker *w)
{
	w->pokes++;
	if (w->latch)
		SetLatch(w->latch);
}

static bool
mailbox_register(Oid dboid)
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
DistseqDbWorker *
distseq_mailbox_slot(Oid dboid)
{
	DistseqDbWorker *w = distseq_mailbox_find(dboid);

	if (w != NULL)
		return w;
	for (int i = 0; i < max_worker_processes && w == NULL; i++)
	{
		DistseqDbWorker *old = &Distseq->workers[i];

		if (old->dboid == InvalidOid ||
			(!old->registered && old->pid == 0 && old->dropper == 0 &&
			 !distseq_mailbox_pending(old)))
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
	w = distseq_mailbox_slot(dboid);
	if (w != NULL && w->latch)
		distseq_mailbox_poke(w);
	else if (w != NULL && !w->registered)
	{
		/* if it fails, the next caller tries again */
		started = mailbox_register(dboid);
		w->registered = started;
	}
	LWLockRelease(Distseq->lock);

	if (w == NULL)
	{
		char	   *name = distseq_database_name(dboid);

		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("could not start a distseq worker for database \"%s\"", name),
				 errdetail("Each of the %d worker slots (max_worker_processes) serves a database whose worker runs.",
						   max_worker_processes),
				 errhint("Increase max_worker_processes and restart the server.")));
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

/*
 * What a long wait of this process does between its steps (the agent's
 * sequences, remote.c's wake-ups while it waits on a peer): the refill
 * worker serves the refills asked for meanwhile (it sets refill.c's
 * function here); a backend does nothing.
 */
static void (*between_steps) (void) = NULL;

void
distseq_set_between_steps(void (*fn) (void))
{
	between_steps = fn;
}

void
distseq_between_steps(void)
{
	if (between_steps != NULL)
		between_steps();
}

/* Should a long wait (on a peer) give up now? */
bool
distseq_worker_stopping(void)
{
	return ShutdownRequestPending ||
		(MyDistseqWorker != NULL &&
		 (MyDistseqWorker->stop || MyDistseqWorker->dropper != 0));
}

/* Copy a message into a fixed field of shared memory, cleaned and cut */
static void
mailbox_copy_message(char *dst, const char *src, int size)
{
	char	   *clean = distseq_clean_text(src, size);

	strlcpy(dst, clean, size);
	pfree(clean);
}

/* Set a reply; caller holds Distseq->lock.  NULL texts are empty. */
static void
mailbox_reply_set(DistseqWorkerReply *reply, int elevel, int sqlstate,
				  const char *message, const char *detail, const char *hint)
{
	reply->elevel = elevel;
	reply->sqlstate = sqlstate;
	mailbox_copy_message(reply->message, message ? message : "",
						 sizeof(reply->message));
	mailbox_copy_message(reply->detail, detail ? detail : "",
						 sizeof(reply->detail));
	mailbox_copy_message(reply->hint, hint ? hint : "", sizeof(reply->hint));
}

/* Raise the error a reply carries, if it carries one */
static void
mailbox_reply_raise(const DistseqWorkerReply *reply)
{
	if (reply->elevel == ERROR)
		ereport(ERROR,
				(errcode(reply->sqlstate),
				 errmsg_internal("%s", reply->message),
				 reply->detail[0] ? errdetail_internal("%s", reply->detail) : 0,
				 reply->hint[0] ? errhint("%s", reply->hint) : 0));
}

/*
 * Is any request of a slot not answered yet?  Caller holds Distseq->lock.
 */
bool
distseq_mailbox_pending(DistseqDbWorker *w)
{
	for (int kind = 0; kind < DISTSEQ_NREQUESTS; kind++)
	{
		if (w->requests[kind].done < w->requests[kind].requested)
			return true;
	}
	return false;
}

/*
 * Post a request and wake the worker; returns its ticket.  Agent passes
 * asked for meanwhile share one pass; a change (args) takes the mailbox
 * alone, so 0 comes back, and nothing is posted, while the one before it
 * is not answered.  Caller holds Distseq->lock exclusively.
 */
static uint64
mailbox_post(DistseqDbWorker *w, DistseqRequestKind kind,
			 const DistseqChangeArgs *args)
{
	DistseqRequest *req = &w->requests[kind];

	if (args != NULL)
	{
		if (req->done < req->requested)
			return 0;
		w->change = *args;
	}
	distseq_mailbox_poke(w);
	return ++req->requested;
}

/*
 * Post a request to the worker of a database and sleep on the slot's
 * condition variable until it is answered; wake the worker meanwhile (it
 * may have been restarted).  Raises "message" after timeout_ms.
 */
static void
mailbox_request(Oid dboid, DistseqRequestKind kind, const DistseqChangeArgs *args,
				long timeout_ms, const char *message, const char *hint,
				DistseqWorkerReply *reply)
{
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	DistseqDbWorker *w;
	uint64		ticket;

	distseq_worker_wake(dboid);
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	w = distseq_mailbox_find(dboid);
	if (w == NULL)
	{
		LWLockRelease(Distseq->lock);
		elog(ERROR, "distseq worker slot of database %u is gone", dboid);
	}
	ticket = mailbox_post(w, kind, args);
	LWLockRelease(Distseq->lock);
	/* it may have left, idle, since it was woken: it stays for a request */
	if (ticket != 0)
		distseq_worker_wake(dboid);

	ConditionVariablePrepareToSleep(&w->agent_cv);
	for (;;)
	{
		bool		done = false;

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
		if (ticket == 0)
			ticket = mailbox_post(w, kind, args);
		else if (w->requests[kind].done >= ticket)
		{
			*reply = w->requests[kind].reply;
			done = true;
		}
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

/*
 * Ask the worker of a database for an agent pass and wait for it to end;
 * raise its error, if it failed.  For distseq_maintain().
 */
void
distseq_worker_agent_pass(Oid dboid)
{
	DistseqWorkerReply reply;

	mailbox_request(dboid, DISTSEQ_REQUEST_AGENT, NULL,
					Max(distseq_refill_timeout, distseq_remote_timeout * 10),
					_("timed out waiting for the distseq agent"),
					_("Check the server log for errors of the distseq worker."),
					&reply);
	mailbox_reply_raise(&reply);
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
	DistseqChangeArgs args = {op};
	DistseqWorkerReply reply;

	strlcpy(args.server, server_name, sizeof(args.server));
	args.userid = userid;
	/* a change talks to every member, twice */
	mailbox_request(dboid, DISTSEQ_REQUEST_CHANGE, &args,
					Max(distseq_refill_timeout, distseq_remote_timeout * 20),
					_("timed out waiting for the distseq worker to change the membership"),
					_("The change may still be made: look at distseq_peers."),
					&reply);
	mailbox_reply_raise(&reply);
	if (reply.elevel == WARNING)
		ereport(WARNING,
				(errmsg("the distseq membership change is decided, but not active on every member yet"),
				 errdetail_internal("%s", reply.message),
				 errhint("The worker goes on as members become reachable; distseq_peers shows the pending ones.")));
}

/*
 * The worker's side.  Is a request of this kind not answered yet?  *ticket
 * is the last one handed out, to answer up to; *args, if given, what a
 * change asks for.
 */
bool
distseq_mailbox_asked(DistseqRequestKind kind, uint64 *ticket,
					  DistseqChangeArgs *args)
{
	DistseqRequest *req = &MyDistseqWorker->requests[kind];
	bool		asked;

	LWLockAcquire(Distseq->lock, LW_SHARED);
	*ticket = req->requested;
	asked = req->done < req->requested;
	if (args != NULL)
		*args = MyDistseqWorker->change;
	LWLockRelease(Distseq->lock);
	return asked;
}

/*
 * Answer the requests of a kind up to "ticket" (elevel 0, WARNING or
 * ERROR, and the text, cleaned and cut here) and wake who waits for them
 */
void
distseq_mailbox_answer(DistseqRequestKind kind, uint64 ticket, int elevel,
					   int sqlstate, const char *message, const char *detail,
					   const char *hint)
{
	DistseqRequest *req = &MyDistseqWorker->requests[kind];

	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	mailbox_reply_set(&req->reply, elevel, sqlstate, message, detail, hint);
	req->done = Max(req->done, ticket);
	LWLockRelease(Distseq->lock);
	ConditionVariableBroadcast(&MyDistseqWorker->agent_cv);
}
