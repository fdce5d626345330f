/*-------------------------------------------------------------------------
 *
 * increate.c
 *	  Values of a sequence in the transaction that created it.
 *
 * The refill worker reserves in transactions of its own, which cannot see
 * a sequence whose creation has not committed: a migration that creates a
 * table with a distseq default and seeds it in one transaction would fail.
 * Native sequences allow it, and so does distseq, this way:
 *
 *	- the creation notes the sequence here, in backend memory, with the
 *	  subtransaction that made it and the slots it may hand out;
 *	- nextval.c cuts blocks for such a sequence from a counter kept here,
 *	  never from the shared pool: the values are this transaction's alone,
 *	  since nobody else can see the sequence;
 *	- the counter never goes back, whatever subtransaction drew: ROLLBACK
 *	  TO SAVEPOINT does not make a value come again;
 *	- at PRE_COMMIT and PRE_PREPARE, still in the creating transaction, the
 *	  catalog records every slot cut as reserved (windows.c), so that once
 *	  the transaction commits the worker's first refill starts above them.
 *	  That commit is the one that makes the sequence exist: if it is lost
 *	  (abort, crash), so is the sequence, values and all.
 *
 * A sequence whose windows come from other servers -- created with
 * servers => ..., or on a node with peers, where only the majority
 * protocol opens windows -- gets no counter: values from it would bypass
 * that protocol and could overlap a peer's window.  Drawing from it before
 * the creation commits is refused.
 *
 * A subtransaction that aborts forgets what it created (and nextval.c's
 * cache of it); one that commits hands its creations to its parent.
 * Everything here is backend-local and needs no lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"

#include "access/xact.h"
#include "commands/extension.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

typedef struct Created
{
	Oid			relid;
	uint64		gen;
	SubTransactionId subid;		/* the subtransaction that holds it */
	bool		local;			/* values may be drawn before commit */
	int64		first;			/* the first slot */
	int64		last;			/* the last slot */
	int64		next;			/* the next slot never cut */
} Created;

/* in TopTransactionContext; NIL outside a transaction that created one */
static List *created = NIL;

/* set at PRE_COMMIT or PRE_PREPARE: no more blocks may be cut */
static bool recorded = false;

static bool callbacks_registered = false;

/* nextval.c's cache of a sequence to forget; NULL while it has none */
static DistseqForgetFn forget_local = NULL;

/*
 * The transaction is about to commit or prepare: record what was drawn,
 * while the creations are still uncommitted and so part of it.
 */
static void
created_record(void)
{
	ListCell   *lc;
	bool		read_only = XactReadOnly;

	recorded = true;
	/* a DROP EXTENSION in the transaction took the sequences with it */
	if (!OidIsValid(get_extension_oid("distseq", true)))
		return;

	/*
	 * SET TRANSACTION READ ONLY may have come after the creation and the
	 * draws: recording them belongs to those writes, and the transaction
	 * commits, as one that used a native sequence does.  Reset by the next
	 * transaction's start if the recording fails.
	 */
	XactReadOnly = false;
	/* the portals are closed by now: SQL needs a snapshot of its own */
	PushActiveSnapshot(GetTransactionSnapshot());
	foreach(lc, created)
	{
		Created    *c = lfirst(lc);

		if (c->next > c->first &&
			SearchSysCacheExists1(RELOID, ObjectIdGetDatum(c->relid)))
			distseq_windows_record_drawn(c->relid, c->gen, c->first, c->next);
	}
	PopActiveSnapshot();
	XactReadOnly = read_only;
}

static void
created_xact(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			if (created != NIL)
				created_record();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			/* the list went with TopTransactionContext */
			created = NIL;
			recorded = false;
			break;
		default:
			break;
	}
}

static void
created_subxact(SubXactEvent event, SubTransactionId mySubid,
				SubTransactionId parentSubid, void *arg)
{
	ListCell   *lc;

	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, created)
		{
			Created    *c = lfirst(lc);

			if (c->subid == mySubid)
				c->subid = parentSubid;
		}
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		foreach(lc, created)
		{
			Created    *c = lfirst(lc);

			if (c->subid != mySubid)
				continue;
			if (forget_local != NULL)
				forget_local(c->relid, c->gen);
			created = foreach_delete_current(created, lc);
		}
	}
}

/*
 * Who keeps a backend-local cache of sequences (nextval.c) hands the
 * function that forgets one, called when the subtransaction that created
 * it aborts.
 */
void
distseq_created_on_forget(DistseqForgetFn forget)
{
	forget_local = forget;
}

/*
 * The current (sub)transaction created this sequence; [first, last] are its
 * slots.  local: its windows are made here, not by other servers.
 */
void
distseq_created_note(Oid relid, uint64 gen, int64 first, int64 last, bool local)
{
	MemoryContext oldcxt;
	Created    *c;

	if (!callbacks_registered)
	{
		RegisterXactCallback(created_xact, NULL);
		RegisterSubXactCallback(created_subxact, NULL);
		callbacks_registered = true;
	}
	oldcxt = MemoryContextSwitchTo(TopTransactionContext);
	c = palloc(sizeof(Created));
	c->relid = relid;
	c->gen = gen;
	c->subid = GetCurrentSubTransactionId();
	c->local = local;
	c->first = first;
	c->last = last;
	c->next = first;
	created = lappend(created, c);
	MemoryContextSwitchTo(oldcxt);
}

static Created *
created_find(Oid relid, uint64 gen)
{
	ListCell   *lc;

	foreach(lc, created)
	{
		Created    *c = lfirst(lc);

		if (c->relid == relid && c->gen == gen)
			return c;
	}
	return NULL;
}

/* Was this sequence created by the current transaction? */
bool
distseq_created_here(Oid relid, uint64 gen)
{
	return created_find(relid, gen) != NULL;
}

/*
 * Cut a block of at most block_size slots for a sequence the current
 * transaction created, above every block cut for it before.
 */
DistseqRange
distseq_created_block(const char *name, Oid relid, uint64 gen,
					  int32 block_size, int64 max_value)
{
	Created    *c = created_find(relid, gen);
	DistseqRange block;
	int64		n;

	if (c == NULL || recorded)
		elog(ERROR, "distseq sequence \"%s\" is not being created by this transaction",
			 name);
	if (!c->local)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distseq sequence \"%s\" cannot hand out values in the transaction that created it",
						name),
				 errdetail("Its values come from other servers, which cannot see it before it is committed."),
				 errhint("Commit the transaction that created the sequence first.")));
	n = distseq_room(c->next, c->last, block_size);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("distseq_nextval: reached maximum value of sequence \"%s\" (" INT64_FORMAT ")",
						name, max_value)));
	block.lo = c->next;
	block.hi = c->next + n;
	c->next += n;
	return block;
}
