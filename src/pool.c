/*-------------------------------------------------------------------------
 *
 * pool.c
 *	  The server-wide pool of each sequence and the stream every backend
 *	  draws from: drawing a value, installing the next chunk of the stream,
 *	  waiting for a refill, and handing a freshly reserved segment to the
 *	  pool.
 *
 * A pool is the current segment, one prefetched segment and a few
 * fragments (ranges left below the stream).  Segments come only from the
 * refill worker, in increasing order.
 *
 * The backends of the server draw from one stream per sequence, so that
 * values go out nearly in the order they are asked for and concurrent
 * inserts fill the right edge of an index, as a native sequence's do:
 * private blocks would interleave and split index pages in half.  The stream
 * is a chunk of at most block_size slots cut from the pool, and one word,
 * seq->stream: the chunk's number and how many of its slots were drawn.  A
 * value is drawn with one compare-and-swap of that word, without a lock;
 * a backend keeps a copy of the chunk, so the fast path reads nothing else
 * (distseq_stream_draw in distseq.h).  When the chunk is used up, the first
 * backend to notice takes seq->lock and installs the next one: it writes the
 * chunk's description into chunks[number % 2], then moves the word to the
 * new number with no slot drawn.  A reader reads the word, then the
 * description; if its compare-and-swap succeeds, the word carried that
 * number all along, so the description it read was the one installed for
 * it (the slot is written again only for number + 2, after the word has
 * moved on).  Numbers only grow, across every sequence an entry carries, and
 * a description names the incarnation of the entry it was installed for, so
 * a backend never draws from a chunk of another sequence.
 *
 * Chunks go up: each is cut above the one before (seq->top), so a session's
 * values grow.  A session whose last value lies above the stream -- it drew
 * from an earlier incarnation of the entry before a lower window reopened --
 * moves the stream on to a chunk above its value; what was left of the old
 * chunk becomes a fragment, which goes back to the catalog with the pool.
 * Closing the stream (before the pool is written back, or when the entry
 * changes identity) installs an empty chunk and takes what was left of the
 * old one: no value is drawn from it after that, and none is drawn twice.
 *
 * Everything but the draw runs under the entry's LWLock (seq->lock); nobody
 * sleeps while holding it.  Waiters sleep on seq->cv, which the worker
 * broadcasts when a refill ends, successfully or not.  Why a refill failed
 * goes into a ring of the last DISTSEQ_FAILURES failures, server-wide, under
 * Distseq->failure_lock taken inside seq->lock: a waiter finds the reason of
 * its entry's last failure there, unless as many failures came since.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

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
 * Cut a chunk of at most n slots above "after".  Fragments above it come
 * first (they are the oldest values), then the current segment.
 *
 * Segments normally lie above every chunk cut before them, but not always:
 * when a worker that was terminated wrote its pool back, a lower window may
 * have reopened.  Whatever part of the pool is not above "after" is left as
 * a fragment, so the stream's values always grow.
 */
static bool
pool_cut(DistseqSeq *seq, int64 after, int64 n, DistseqRange *chunk)
{
	DistseqRange *src = NULL;
	int			fi = -1;

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

	n = Min(n, RANGE_SIZE(*src));
	chunk->lo = src->lo;
	chunk->hi = src->lo + n;
	src->lo += n;

	if (fi >= 0 && RANGE_SIZE(*src) == 0)
		seq->frags[fi] = seq->frags[--seq->nfrags];
	if (RANGE_SIZE(seq->cur) == 0)
		pool_promote(seq);
	return true;
}

/*
 * What is left of the chunk that the stream word w points to.  Caller holds
 * seq->lock, so the chunk's description is the one installed for it.
 */
static DistseqRange
pool_rest(DistseqSeq *seq, uint64 w)
{
	DistseqChunk *c = &seq->chunks[(w >> DISTSEQ_STREAM_SHIFT) & 1];
	int64		drawn = (int64) (w & DISTSEQ_STREAM_MASK);
	DistseqRange rest;

	Assert(c->number == (w >> DISTSEQ_STREAM_SHIFT));
	rest.lo = c->lo + Min(drawn, c->n);
	rest.hi = c->lo + c->n;
	return rest;
}

/*
 * Make "chunk" (maybe empty) the stream's current chunk, and return what was
 * left of the one before, which nobody can draw from any more.  Caller
 * holds seq->lock.
 */
static DistseqRange
pool_install(DistseqSeq *seq, DistseqRange chunk)
{
	uint64		w = pg_atomic_read_u64(&seq->stream);
	uint64		number = (w >> DISTSEQ_STREAM_SHIFT) + 1;
	DistseqChunk *c = &seq->chunks[number & 1];
	DistseqRange rest;

	Assert(RANGE_SIZE(chunk) >= 0 &&
		   RANGE_SIZE(chunk) <= DISTSEQ_STREAM_MAX_CHUNK);
	c->owner = seq->incarnation;
	c->lo = chunk.lo;
	c->n = RANGE_SIZE(chunk);
	c->number = number;
	/* the description before the number that sends readers to it */
	pg_write_barrier();
	w = pg_atomic_exchange_u64(&seq->stream, number << DISTSEQ_STREAM_SHIFT);
	rest = pool_rest(seq, w);
	seq->issued += RANGE_SIZE(chunk) - RANGE_SIZE(rest);
	if (RANGE_SIZE(chunk) > 0)
		seq->stream_last = chunk.hi - 1;
	return rest;
}

/*
 * Close the stream: nothing is drawn from its chunk any more.  Returns what
 * was left of it, for the caller to keep or give back.  Caller holds
 * seq->lock.
 *
 * Every slot drawn in this incarnation lies below that rest, so the stream
 * may go on from it: a rest given back to the catalog comes back first with
 * the next refill, and must not be left below stream_last as a fragment,
 * to go back and come back at every write-back, one more each time.
 */
DistseqRange
distseq_pool_close(DistseqSeq *seq)
{
	DistseqRange none = {0, 0};
	DistseqRange rest = pool_install(seq, none);

	if (RANGE_SIZE(rest) > 0)
		seq->stream_last = rest.lo - 1;
	return rest;
}

/* What is left of the stream's chunk, for the status views */
DistseqRange
distseq_pool_stream_rest(DistseqSeq *seq)
{
	return pool_rest(seq, pg_atomic_read_u64(&seq->stream));
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
 * The errors that end a wait for the next chunk.  The first two are raised
 * with the entry's lock held, and release it; each cancels the sleep if
 * there is one.
 */
pg_noreturn static void
pool_exhausted_error(DistseqSeq *seq, bool sleeping)
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

/*
 * A refill of the entry failed (refill.c): count it, and keep why, bounded
 * and cleaned text, for the sessions that wait on it.  Caller holds
 * seq->lock exclusively.
 */
void
distseq_pool_failed(DistseqSeq *seq, const char *message, const char *detail)
{
	DistseqFailure *f;

	seq->failures++;
	LWLockAcquire(Distseq->failure_lock, LW_EXCLUSIVE);
	f = &Distseq->failure_ring[Distseq->failure_next++ % DISTSEQ_FAILURES];
	f->index = seq - Distseq->seqs;
	f->incarnation = seq->incarnation;
	f->failures = seq->failures;
	strlcpy(f->message, message, sizeof(f->message));
	strlcpy(f->detail, detail, sizeof(f->detail));
	LWLockRelease(Distseq->failure_lock);
}

/*
 * Why the entry's last refill failed, if the ring still has it.  Caller
 * holds seq->lock.
 */
static bool
pool_failure(DistseqSeq *seq, char *why, char *detail)
{
	bool		found = false;

	LWLockAcquire(Distseq->failure_lock, LW_SHARED);
	for (int i = 0; i < DISTSEQ_FAILURES && !found; i++)
	{
		DistseqFailure *f = &Distseq->failure_ring[i];

		if (f->index == seq - Distseq->seqs &&
			f->incarnation == seq->incarnation &&
			f->failures == seq->failures)
		{
			strlcpy(why, f->message, sizeof(f->message));
			strlcpy(detail, f->detail, sizeof(f->detail));
			found = true;
		}
	}
	LWLockRelease(Distseq->failure_lock);
	return found;
}

pg_noreturn static void
pool_failed_error(DistseqSeq *seq)
{
	char		name[NAMEDATALEN];
	char		why[sizeof(((DistseqFailure *) NULL)->message)];
	char		detail[sizeof(((DistseqFailure *) NULL)->detail)];
	bool		known;

	strlcpy(name, seq->name, NAMEDATALEN);
	known = pool_failure(seq, why, detail);
	LWLockRelease(seq->lock);
	ConditionVariableCancelSleep();
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("could not refill distseq sequence \"%s\"", name),
			 !known ?
			 errdetail("The refill worker failed; its reason gave way to later failures, see the server log.") :
			 detail[0] ?
			 errdetail("The refill worker failed: %s.\n%s", why, detail) :
			 errdetail("The refill worker failed: %s", why)));
}

pg_noreturn static void
pool_timeout_error(DistseqSeq *seq, long elapsed_ms)
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

/*
 * The chunk numbered "number" is used up, or has nothing above "after" left:
 * install the next one, unless another backend has moved the stream on
 * already.  Waits, interruptibly and for at most distseq.refill_timeout,
 * while the pool is empty and a refill is under way; never reserves anything
 * itself.  Returns false when the entry is no longer the incarnation the
 * caller knows: it was taken over, or the sequence dropped.
 */
static bool
pool_next_chunk(DistseqSeq *seq, uint64 incarnation, uint64 number,
				int64 after)
{
	TimestampTz start = 0;
	bool		sleeping = false;
	uint32		failures = 0;

	for (;;)
	{
		bool		got;
		bool		wake = false;
		long		elapsed_ms;
		DistseqRange chunk;

		LWLockAcquire(seq->lock, LW_EXCLUSIVE);
		if (seq->incarnation != incarnation ||
			(pg_atomic_read_u64(&seq->stream) >> DISTSEQ_STREAM_SHIFT) != number)
		{
			got = seq->incarnation == incarnation;
			LWLockRelease(seq->lock);
			if (sleeping)
				ConditionVariableCancelSleep();
			return got;
		}
		/* in use again: not to be taken over (shmem.c) */
		seq->park_state = DISTSEQ_PARK_ACTIVE;
		got = pool_cut(seq, Max(after, seq->stream_last),
					   Min((int64) seq->block_size, DISTSEQ_STREAM_MAX_CHUNK),
					   &chunk);
		if (pool_wants_refill(seq))
		{
			seq->refill_pending = true;
			wake = true;
		}
		if (!sleeping)
			failures = seq->failures;

		if (got)
		{
			DistseqRange rest = pool_install(seq, chunk);

			/* below the new chunk: it goes back with the pool */
			if (RANGE_SIZE(rest) > 0)
				pool_add_fragment(seq, rest);
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
			pool_exhausted_error(seq, sleeping);
		if (sleeping && seq->failures != failures)
			pool_failed_error(seq);
		/* counted when it starts: a cancelled wait counts too */
		if (!sleeping)
		{
			seq->waits++;
			seq->refill_waited = true;
		}
		LWLockRelease(seq->lock);
		/* the worker serves waited refills first (refill.c) */
		if (!sleeping)
			pg_atomic_fetch_add_u32(&Distseq->refill_waits, 1);

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
			pool_timeout_error(seq, elapsed_ms);
		(void) ConditionVariableTimedSleep(&seq->cv,
										   Min(distseq_refill_timeout - elapsed_ms, 1000),
										   PG_WAIT_EXTENSION);
	}
}

/*
 * Draw a slot above "after" (the last slot of the calling session) from the
 * stream of the entry's given incarnation, and keep a copy of its chunk in
 * *cache for distseq_stream_draw.  Returns false when the entry is no
 * longer that incarnation.
 */
bool
distseq_pool_draw(DistseqSeq *seq, uint64 incarnation, int64 after,
				  DistseqStreamCache *cache, int64 *slot)
{
	for (;;)
	{
		uint64		w = pg_atomic_read_u64(&seq->stream);
		uint64		number = w >> DISTSEQ_STREAM_SHIFT;
		int64		drawn = (int64) (w & DISTSEQ_STREAM_MASK);
		DistseqChunk c;

		pg_read_barrier();
		c = seq->chunks[number & 1];
		if (c.number != number)
			continue;			/* moved on meanwhile: read again */
		if (c.owner != incarnation)
			return false;
		if (drawn < c.n && c.lo + drawn > after)
		{
			if (!pg_atomic_compare_exchange_u64(&seq->stream, &w, w + 1))
				continue;
			cache->stream = &seq->stream;
			cache->base = number << DISTSEQ_STREAM_SHIFT;
			cache->lo = c.lo;
			cache->n = (uint64) c.n;
			*slot = c.lo + drawn;
			return true;
		}
		if (!pool_next_chunk(seq, incarnation, number, after))
			return false;
	}
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
 * Close the stream and empty the pool into ranges[] (at most
 * DISTSEQ_POOL_MAX_RANGES of them), for writing back to the catalog.
 * Caller holds seq->lock.
 */
void
distseq_pool_take_all(DistseqSeq *seq, DistseqRange *ranges, int *nranges)
{
	DistseqRange rest = distseq_pool_close(seq);
	int			n = 0;

	if (RANGE_SIZE(rest) > 0)
		ranges[n++] = rest;
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
