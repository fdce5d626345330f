/*-------------------------------------------------------------------------
 *
 * inuse.c
 *	  Which transactions use a sequence, so that dropping it waits for them
 *	  although they take no lock on it.
 *
 * A native sequence is locked (AccessShareLock) by every transaction that
 * draws from it, so DROP SEQUENCE waits for them, and a DROP and re-create
 * committed meanwhile is seen at the next lock.  The lock is most of what a
 * one-statement transaction pays for nextval, so distseq_nextval replaces it,
 * once a backend has used a sequence, by a handshake in shared memory:
 *
 *	- the user writes its local transaction id into its marks on the entry
 *	  (user_xact), then reads the entry's drop state;
 *	- the dropper, in the object access hook (distseq.c), while it holds the
 *	  AccessExclusiveLock, sets the drop state to SCANNING, then reads every
 *	  backend's user_xact, copies each one it will wait for into the slot's
 *	  waited_xact (the low half of its held word), sets the state to
 *	  SCANNED and waits for those transactions to end.
 *
 * Both sides write, issue a full barrier and read, so at least one of them
 * sees the other.  A user that reads state 0 is seen by any drop that has not
 * scanned yet; a drop that scanned before it had already committed, sent its
 * invalidations and counted itself in the entry's drops before the state went
 * back to 0, so processing invalidations after the read shows the drop.  The
 * user does that only when the count moved since it last did: the start of
 * a transaction processes invalidations anyway, and those that are not drops
 * (privileges) are seen as of the start of the transaction.  A user that
 * reads SCANNING waits for the scan to end by taking the entry's lock, which
 * the dropper holds while it scans (the scan is short and never blocks); if
 * the scan copied its transaction id, the dropper waits for it and it may
 * go on, otherwise it clears its mark and takes the lock, which waits for
 * the dropper: never both waiting for each other.  It clears the mark under the
 * entry's lock, unless a scan copied it meanwhile: the state it read may be
 * one whose drop has ended, and the next dropper of the relation may be
 * scanning already.
 *
 * A backend has distseq.backend_marks slots of marks, not one per entry:
 * a slot holds the index of one entry (shmem.c, distseq_my_marks), and a
 * backend has at most one slot per entry.  A transaction that needs a slot
 * while all of them mark it already takes AccessShareLock on the relation
 * instead, as for a first use, so a DROP waits for it through the lock.  The
 * dropper matches a slot by reading its user_xact, then (read barrier) its
 * entry; it never misses a user, because:
 *
 *	- the user writes the entry, then (write barrier) user_xact, so a dropper
 *	  that reads our transaction id reads the entry it goes with, or a later
 *	  one;
 *	- there is no later one: a slot whose user_xact is the running
 *	  transaction's is never given to another entry before that transaction
 *	  ends (it is given away only if it marks an older transaction or none);
 *	- giving a slot away clears user_xact, then (write barrier) rewrites the
 *	  entry, so a dropper that reads the new entry read a user_xact of an
 *	  ended transaction (it waits for nothing) or none, never ours with the
 *	  old entry's number dropped from under it;
 *	- a dropper that does not read our id at all is answered by the full
 *	  barriers above: we see its SCANNING or SCANNED.
 *
 * waited_xact stays exact: it shares one word with the slot's entry, which
 * its owner changes by one write that also clears waited_xact, and a dropper
 * copies an id in by compare-and-swap on the word with its own entry in it,
 * so an id copied by a dropper of the old entry never passes for one a
 * dropper of the new entry waits for.  A copy that fails found the slot
 * given away since the dropper read its user_xact: that transaction has
 * ended, or it cleared its mark and takes the relation's lock, which waits
 * for the dropper; either way the dropper need not wait for it.  A copy that
 * succeeds after the slot went to another entry and came back copies an id
 * that no transaction still running has.  The take-over
 * of a parked entry (shmem.c, distseq_seq_held) reads the slots in the same
 * order, and against the entry's identity instead of its drop state.
 *
 * Entries are created only by backends that hold the lock (nextval.c), so a
 * dropper, which holds AccessExclusiveLock, sees every entry of its relation.
 * An entry is taken over by another sequence only while no running
 * transaction marks it (shmem.c clears the identity, then reads the marks:
 * the same handshake), so a dropper never misses a user that way either.
 * It reads only the marks of backends of its own database (a backend's
 * database is set before its first mark is written, with a write barrier):
 * no drop waits for a transaction in another database.
 * The drop state goes back to 0 when the dropping (sub)transaction ends,
 * after its invalidations are sent, if it is still the dropper's own: it
 * carries the dropper's pid, and when a transaction ends its locks are gone
 * already, so after a rollback the next dropper may have set its own.  A
 * prepared transaction keeps the relation locked, and the state SCANNED,
 * after its backend has moved on: users take the lock and wait for it, as
 * they would for a native sequence.  If it rolls back, the state is left
 * behind; a user holding AccessShareLock knows that no drop is under way and
 * clears it (distseq_drop_state_clear).
 *
 * Locking: a slot's entry and user_xact are written only by its owner, with
 * no lock (changing the entry clears waited_xact in the same write);
 * waited_xact otherwise, and the drop state, only by a dropper, which holds
 * AccessExclusiveLock on the relation (so there is one at a time),
 * DistseqShared->lock in shared mode while it scans (so the entry keeps its
 * identity) and the entry's lock in exclusive mode (so users can wait for
 * the scan to end) -- or by a user holding AccessShareLock, which clears a
 * state left behind.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

/* An entry whose drop state this backend set */
typedef struct DropMark
{
	int			index;			/* in Distseq->seqs */
	Oid			relid;
	uint64		gen;
	int			nest_level;		/* of the (sub)transaction that dropped */
} DropMark;

static List *drop_marks = NIL;	/* in TopTransactionContext */
static bool callbacks_registered = false;

static void inuse_resource_release(ResourceReleasePhase phase, bool isCommit,
								   bool isTopLevel, void *arg);
static void inuse_subxact(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg);
static void inuse_xact(XactEvent event, void *arg);

/*
 * Use a sequence without a lock in this transaction, if no drop of it is in
 * the way.  seq must have carried identity (relid, gen) when the caller read
 * its definition.  On true, every drop of it that ended before is known to
 * the caller's relcache: the caller must check that its definition is still
 * valid, and may then use the sequence until the end of the transaction as
 * if it held AccessShareLock.  On false, the caller must take the lock.
 *
 * *drops_seen is the entry's count of ended drops that the caller's relcache
 * is known to reflect; invalidations are processed only when it moved.
 */
bool
distseq_use_unlocked(DistseqSeq *seq, DistseqMarks *marks, Oid relid,
					 uint64 gen, uint32 *drops_seen)
{
	LocalTransactionId lxid = DISTSEQ_MY_LXID;
	uint32		state;
	uint32		drops;

	Assert(distseq_marks_on(marks, seq));

	if (marks->user_xact != lxid)
	{
		marks->user_xact = lxid;
		pg_memory_barrier();
		state = pg_atomic_read_u32(&seq->drop_state);
		while (DISTSEQ_DROP_PHASE(state) == DISTSEQ_DROP_SCANNING)
		{
			/* the dropper scans under the entry's lock: wait for the end */
			LWLockAcquire(seq->lock, LW_SHARED);
			LWLockRelease(seq->lock);
			state = pg_atomic_read_u32(&seq->drop_state);
		}
		pg_read_barrier();
		if (DISTSEQ_DROP_PHASE(state) == DISTSEQ_DROP_SCANNED &&
			distseq_marks_waited(marks) != lxid)
		{
			bool		waited;

			/*
			 * The dropper does not wait for us: wait for it.  If that drop
			 * has ended, the next one may be scanning now; under the entry's
			 * lock we are either seen by its scan, and go on, or gone
			 * before it.
			 */
			LWLockAcquire(seq->lock, LW_SHARED);
			waited = (distseq_marks_waited(marks) == lxid);
			if (!waited)
				marks->user_xact = InvalidLocalTransactionId;
			LWLockRelease(seq->lock);
			if (!waited)
				return false;
		}

		/*
		 * A drop counts itself after its invalidations went out, and before
		 * its state goes back to 0.
		 */
		drops = pg_atomic_read_u32(&seq->drops);
		if (drops != *drops_seen)
		{
			AcceptInvalidationMessages();
			*drops_seen = drops;
		}
	}

	/* the entry may have been recycled for another sequence meanwhile */
	pg_read_barrier();
	if (!distseq_seq_is(seq, MyDatabaseId, relid, gen))
	{
		marks->user_xact = InvalidLocalTransactionId;
		return false;
	}
	return true;
}

/*
 * The count of ended drops of seq, for a caller that holds AccessShareLock
 * on its relation: the lock processed the invalidations of all of them.
 */
uint32
distseq_drops(DistseqSeq *seq)
{
	return pg_atomic_read_u32(&seq->drops);
}

/*
 * The caller holds AccessShareLock on the relation of seq, whose identity is
 * (relid, gen): no drop of it is under way, so a drop state set is one left
 * behind by a prepared transaction that rolled back.  Clear it, so that
 * users stop taking the lock.
 */
void
distseq_drop_state_clear(DistseqSeq *seq, Oid relid, uint64 gen)
{
	/* not if it is ours: we may hold AccessExclusiveLock */
	if (pg_atomic_read_u32(&seq->drop_state) == 0 || drop_marks != NIL)
		return;
	LWLockAcquire(Distseq->lock, LW_SHARED);
	if (distseq_seq_is(seq, MyDatabaseId, relid, gen))
		pg_atomic_write_u32(&seq->drop_state, 0);
	LWLockRelease(Distseq->lock);
}

/* Has this transaction used the entry seq without a lock? */
bool
distseq_used_unlocked(DistseqSeq *seq, DistseqMarks *marks)
{
	return distseq_marks_on(marks, seq) &&
		marks->user_xact == DISTSEQ_MY_LXID;
}

/*
 * A relation is about to be dropped, or the sequence it backs to get a new
 * generation (redefine.c), and we hold AccessExclusiveLock on it.  If it backs
 * a sequence in use, announce the drop and wait for every transaction that
 * uses it without a lock.  Users that come later take the lock, and so wait
 * for our transaction to end; at its end, its invalidations sent, the entry
 * counts one more ended drop, which makes every user process them before it
 * uses the sequence again without a lock.  (redefine.c frees the entry as
 * well: a user then finds it gone, and takes the lock.)
 */
void
distseq_inuse_wait(Oid relid)
{
	VirtualTransactionId *waits = NULL;
	int			me = DISTSEQ_HAS_SLOT() ? DISTSEQ_MY_SLOT : -1;

	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq *seq = &Distseq->seqs[i];
		uint64		gen;
		int			nwaits = 0;
		MemoryContext oldcxt;
		DropMark   *mark;

		/*
		 * No entry can take our relation's identity while we hold
		 * AccessExclusiveLock, and one that loses it (taken over, shmem.c)
		 * had no user left: look without the lock first.
		 */
		if (seq->relid != relid)
			continue;
		LWLockAcquire(Distseq->lock, LW_SHARED);
		gen = pg_atomic_read_u64(&seq->gen);
		if (gen == 0 || seq->dboid != MyDatabaseId || seq->relid != relid)
		{
			LWLockRelease(Distseq->lock);
			continue;
		}

		/*
		 * Remember it first, so that an error from here on clears it.  Only
		 * a backend that drops a sequence in use needs the callbacks that
		 * clear the marks: others do not pay for them.
		 */
		if (!callbacks_registered)
		{
			RegisterResourceReleaseCallback(inuse_resource_release, NULL);
			RegisterSubXactCallback(inuse_subxact, NULL);
			RegisterXactCallback(inuse_xact, NULL);
			callbacks_registered = true;
		}
		oldcxt = MemoryContextSwitchTo(TopTransactionContext);
		mark = palloc(sizeof(DropMark));
		mark->index = i;
		mark->relid = relid;
		mark->gen = gen;
		mark->nest_level = GetCurrentTransactionNestLevel();
		drop_marks = lappend(drop_marks, mark);
		MemoryContextSwitchTo(oldcxt);
		if (waits == NULL)
			waits = palloc(sizeof(VirtualTransactionId) * MaxBackends);

		LWLockAcquire(seq->lock, LW_EXCLUSIVE);
		pg_atomic_write_u32(&seq->drop_state,
							DISTSEQ_DROP_STATE(DISTSEQ_DROP_SCANNING, MyProcPid));
		pg_memory_barrier();
		for (int b = 0; b < MaxBackends; b++)
		{
			DistseqMarks *slots = &Distseq->marks[b * distseq_backend_marks];

			if (b == me)
				continue;
			for (int k = 0; k < distseq_backend_marks; k++)
			{
				DistseqMarks *marks = &slots[k];
				LocalTransactionId lxid = marks->user_xact;
				uint64		held;

				if (!LocalTransactionIdIsValid(lxid))
					continue;

				/*
				 * The entry that goes with that id, and never a user in
				 * another database, whatever its slot held.  The id goes in
				 * only if the slot still holds our entry: if it changed
				 * hands meanwhile, that transaction has ended or locks the
				 * relation (above).
				 */
				pg_read_barrier();
				held = pg_atomic_read_u64(&marks->held);
				if (DISTSEQ_HELD_ENTRY(held) != i ||
					Distseq->backends[b].dboid != MyDatabaseId ||
					!pg_atomic_compare_exchange_u64(&marks->held, &held,
													DISTSEQ_HELD(i, lxid)))
					continue;
				DISTSEQ_SET_VXID(waits[nwaits], b, lxid);
				nwaits++;
				/* one slot per entry */
				break;
			}
		}
		pg_write_barrier();
		pg_atomic_write_u32(&seq->drop_state,
							DISTSEQ_DROP_STATE(DISTSEQ_DROP_SCANNED, MyProcPid));
		LWLockRelease(seq->lock);
		LWLockRelease(Distseq->lock);

		/*
		 * Most of these transactions have ended, and cost nothing.  A running
		 * one that waits for a lock we hold is a deadlock, found as such.
		 */
		for (int w = 0; w < nwaits; w++)
			VirtualXactLock(waits[w], true);
	}
	if (waits != NULL)
		pfree(waits);
}

/*
 * Clear the drop state of the entries marked at nest_level or deeper (all
 * of them for 0), where it is still ours.  An entry recycled meanwhile
 * starts with a clear state.
 */
static void
inuse_clear_marks(int nest_level)
{
	ListCell   *lc;

	if (drop_marks == NIL)
		return;
	LWLockAcquire(Distseq->lock, LW_SHARED);
	foreach(lc, drop_marks)
	{
		DropMark   *mark = lfirst(lc);
		DistseqSeq *seq = &Distseq->seqs[mark->index];

		if (mark->nest_level < nest_level)
			continue;
		if (distseq_seq_is(seq, MyDatabaseId, mark->relid, mark->gen))
		{
			uint32		mine = DISTSEQ_DROP_STATE(DISTSEQ_DROP_SCANNED,
												  MyProcPid);

			pg_atomic_fetch_add_u32(&seq->drops, 1);
			(void) pg_atomic_compare_exchange_u32(&seq->drop_state, &mine, 0);
		}
		drop_marks = foreach_delete_current(drop_marks, lc);
	}
	LWLockRelease(Distseq->lock);
}

/*
 * The end of the top transaction, after its invalidations were sent and its
 * locks released: clear every mark.
 */
static void
inuse_resource_release(ResourceReleasePhase phase, bool isCommit,
					   bool isTopLevel, void *arg)
{
	if (phase == RESOURCE_RELEASE_AFTER_LOCKS && isTopLevel)
	{
		inuse_clear_marks(0);
		drop_marks = NIL;
	}
}

static void
inuse_subxact(SubXactEvent event, SubTransactionId mySubid,
			  SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (event == SUBXACT_EVENT_ABORT_SUB)
		inuse_clear_marks(level);
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		/* the parent drops them now */
		foreach(lc, drop_marks)
		{
			DropMark   *mark = lfirst(lc);

			if (mark->nest_level >= level)
				mark->nest_level = level - 1;
		}
	}
}

/*
 * A prepared transaction holds its locks after this backend has moved on:
 * leave the drop states set, users wait for its lock.
 */
static void
inuse_xact(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_PREPARE)
		drop_marks = NIL;
}
