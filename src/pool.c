/*-------------------------------------------------------------------------
 *
 * pool.c
 *	  The server-wide pool of each sequence: cutting blocks for backends,
 *	  taking back the unused rest of a block, waiting for a refill, and
 *	  handing a freshly reserved segment to the pool.
 *
 * A pool is the current segment, one prefetched segment and a few
 * fragments (rests of blocks given back by exiting backends).  Segments come
 * only from the refill worker, in increasing order, so every block cut from
 * cur or pre lies above every block cut before it; fragments lie below and
 * go only to sessions whose last value is below them.  That keeps the
 * values of a session growing.
 *
 * Everything here runs under the entry's LWLock (seq->lock); nobody sleeps
 * while holding it.  Waiters sleep on seq->cv, which the worker broadcasts
 * when a refill ends, successfully or not.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "utils/timestamp.h"

/* Add a range to the fragments, merging with a neighbour if it touches one */
static void
pool_add_fragment(DistseqSeq *seq, DistseqRange r)
{
	for (int i = 0; i < seq->nfrags; i++)
	{
		DistseqRange *f = &seq->frags[i];

		if (f->lo == r.hi)
		{
			f->lo = r.lo;
			return;
		}
		if (f->hi == r.lo)
		{
			f->hi = r.hi;
			return;
		}
	}
	if (seq->nfrags < DISTSEQ_MAX_FRAGMENTS)
		seq->frags[seq->nfrags++] = r;
	else
		seq->lost += RANGE_SIZE(r);
}

/* The current segment is used up: the prefetched one takes its place */
static void
pool_promote(DistseqSeq *seq)
{
	seq->cur = seq->pre;
	seq->pre.lo = seq->pre.hi = 0;
}

/*
 * Cut a block for a session whose last value was "after".  Fragments above
 * it come first (they are the oldest values), then the current segment.
 *
 * Segments normally lie above every block cut before them, but not always:
 * when a worker that was terminated wrote its pool back, a lower window may
 * have reopened.  Whatever part of the pool is not above "after" is left to
 * other sessions as a fragment, so a session's values always grow.
 */
static bool
pool_cut(DistseqSeq *seq, int64 after, DistseqBlock *block)
{
	DistseqRange *src = NULL;
	int			fi = -1;
	int64		n;

	for (int i = 0; i < seq->nfrags; i++)
	{
		if (seq->frags[i].lo > after &&
			(src == NULL || seq->frags[i].lo < src->lo))
		{
			src = &seq->frags[i];
			fi = i;
		}
	}
	while (src == NULL && RANGE_SIZE(seq->cur) > 0 && seq->cur.lo <= after)
	{
		DistseqRange below = seq->cur;

		below.hi = Min(below.hi, after + 1);
		seq->cur.lo = below.hi;
		pool_add_fragment(seq, below);
		if (RANGE_SIZE(seq->cur) == 0)
			pool_promote(seq);
	}
	if (src == NULL && RANGE_SIZE(seq->cur) > 0)
		src = &seq->cur;
	if (src == NULL)
		return false;

	n = Min((int64) seq->block_size, RANGE_SIZE(*src));
	block->next = src->lo;
	block->end = src->lo + n;
	src->lo += n;
	seq->issued += n;

	if (fi >= 0 && RANGE_SIZE(*src) == 0)
		seq->frags[fi] = seq->frags[--seq->nfrags];
	if (RANGE_SIZE(seq->cur) == 0)
		pool_promote(seq);
	return true;
}

/* Should a refill be requested now?  Caller holds seq->lock. */
static bool
pool_wants_refill(DistseqSeq *seq)
{
	int64		left = RANGE_SIZE(seq->cur) + RANGE_SIZE(seq->pre);

	if (seq->refill_pending || seq->exhausted || RANGE_SIZE(seq->pre) > 0)
		return false;
	return left * 100 < (int64) distseq_prefetch_threshold * seq->segment_size ||
		left == 0;
}

/*
 * Put a fresh block for this backend into *block.  Waits, interruptibly and
 * for at most distseq.refill_timeout, while the pool is empty and a refill
 * is under way; never reserves anything itself.  Returns false when the
 * entry no longer carries the sequence (relid, gen) of our database: it was
 * taken over, or the sequence dropped.
 */
bool
distseq_pool_next_block(DistseqSeq *seq, Oid relid, uint64 gen, int64 after,
						DistseqBlock *block)
{
	TimestampTz start = 0;
	bool		sleeping = false;
	uint32		failures = 0;

	for (;;)
	{
		bool		got;
		bool		wake = false;
		long		elapsed_ms;

		LWLockAcquire(seq->lock, LW_EXCLUSIVE);
		if (!distseq_seq_is(seq, MyDatabaseId, relid, gen))
		{
			LWLockRelease(seq->lock);
			if (sleeping)
				ConditionVariableCancelSleep();
			return false;
		}
		/* in use again: not to be taken over (shmem.c) */
		seq->park_state = DISTSEQ_PARK_ACTIVE;
		got = pool_cut(seq, after, block);
		if (pool_wants_refill(seq))
		{
			seq->refill_pending = true;
			wake = true;
		}
		if (!sleeping)
			failures = seq->failures;

		if (got)
		{
			block->relid = seq->relid;
			block->gen = gen;
			seq->last_used = pg_atomic_fetch_add_u64(&Distseq->clock, 1);
			if (sleeping)
				seq->wait_ms += (double) (GetCurrentTimestamp() - start) / 1000.0;
			LWLockRelease(seq->lock);
			if (sleeping)
				ConditionVariableCancelSleep();
			if (wake)
				distseq_worker_wake(seq->dboid);
			return true;
		}

		if (seq->exhausted && !seq->refill_pending)
		{
			char		name[NAMEDATALEN];
			int64		max_value = seq->max_value;

			strlcpy(name, seq->name, NAMEDATALEN);
			LWLockRelease(seq->lock);
			if (sleeping)
				ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
					 errmsg("distseq_nextval: reached maximum value of sequence \"%s\" (" INT64_FORMAT ")",
							name, max_value)));
		}

		if (sleeping && seq->failures != failures)
		{
			char		name[NAMEDATALEN];
			char		why[sizeof(seq->last_error)];
			char		detail[sizeof(seq->last_detail)];

			/* bounded, cleaned text the worker left for this sequence */
			strlcpy(name, seq->name, NAMEDATALEN);
			strlcpy(why, seq->last_error, sizeof(why));
			strlcpy(detail, seq->last_detail, sizeof(detail));
			LWLockRelease(seq->lock);
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("could not refill distseq sequence \"%s\"", name),
					 detail[0] ?
					 errdetail("The refill worker failed: %s.\n%s", why, detail) :
					 errdetail("The refill worker failed: %s", why)));
		}
		/* counted when it starts: a cancelled wait counts too */
		if (!sleeping)
			seq->waits++;
		LWLockRelease(seq->lock);

		if (wake || sleeping)
			distseq_worker_wake(seq->dboid);

		if (!sleeping)
		{
			/* prepare first, then check again, so no broadcast is missed */
			ConditionVariablePrepareToSleep(&seq->cv);
			start = GetCurrentTimestamp();
			sleeping = true;
			continue;
		}

		elapsed_ms = (long) ((GetCurrentTimestamp() - start) / 1000);
		if (elapsed_ms >= distseq_refill_timeout)
		{
			LWLockAcquire(seq->lock, LW_EXCLUSIVE);
			seq->wait_ms += elapsed_ms;
			LWLockRelease(seq->lock);
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("timed out waiting for a refill of distseq sequence \"%s\"",
							seq->name),
					 errdetail("No values arrived within distseq.refill_timeout (%d ms).",
							   distseq_refill_timeout),
					 errhint("Check the server log for errors of the distseq worker.")));
		}
		(void) ConditionVariableTimedSleep(&seq->cv,
										   Min(distseq_refill_timeout - elapsed_ms, 1000),
										   PG_WAIT_EXTENSION);
	}
}

/*
 * Take back the unused rest of a block of this backend.  Only into the pool
 * it was cut from: a generation alone is no identity, CREATE DATABASE ...
 * TEMPLATE and pg_restore copy it, and the entry may have been freed and
 * taken by the copy meanwhile.
 */
void
distseq_pool_return_block(DistseqSeq *seq, DistseqBlock *block)
{
	DistseqRange r;

	if (block->next >= block->end)
		return;
	r.lo = block->next;
	r.hi = block->end;

	LWLockAcquire(seq->lock, LW_EXCLUSIVE);
	if (distseq_seq_is(seq, MyDatabaseId, block->relid, block->gen))
	{
		seq->park_state = DISTSEQ_PARK_ACTIVE;
		seq->issued -= RANGE_SIZE(r);
		pool_add_fragment(seq, r);
	}
	LWLockRelease(seq->lock);
}

/*
 * Hand a freshly reserved segment to the pool.  Caller holds seq->lock and
 * has checked that the entry is still the sequence the segment belongs to.
 */
void
distseq_pool_publish(DistseqSeq *seq, DistseqRange range)
{
	if (RANGE_SIZE(range) <= 0)
		return;
	if (RANGE_SIZE(seq->cur) == 0)
		seq->cur = range;
	else if (RANGE_SIZE(seq->pre) == 0)
		seq->pre = range;
	else
		pool_add_fragment(seq, range);
}

/*
 * Empty the pool into ranges[] (at most DISTSEQ_MAX_FRAGMENTS + 2 of them),
 * for writing back to the catalog.  Caller holds seq->lock.
 */
void
distseq_pool_take_all(DistseqSeq *seq, DistseqRange *ranges, int *nranges)
{
	int			n = 0;

	if (RANGE_SIZE(seq->cur) > 0)
		ranges[n++] = seq->cur;
	if (RANGE_SIZE(seq->pre) > 0)
		ranges[n++] = seq->pre;
	for (int i = 0; i < seq->nfrags; i++)
		ranges[n++] = seq->frags[i];
	seq->cur.lo = seq->cur.hi = 0;
	seq->pre.lo = seq->pre.hi = 0;
	seq->nfrags = 0;
	*nranges = n;
}
