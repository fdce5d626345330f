/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The shared-memory layout of distseq: sizing and set-up, the table of
 *	  sequence entries, and each backend's slots of marks.
 *
 * The layout and its locking rules are described in distseq.h.  Entries
 * are found by their identity (dboid, relid, gen) in a shared hash table,
 * "distseq entries", under the global lock; that happens once per statement
 * and call site at most (nextval.c caches the entry), never on the hot
 * path.  The table holds exactly the entries whose gen is not 0: a key goes
 * in when an entry is set up and out when it is freed or taken over, all
 * under Distseq->lock held exclusively.
 *
 * distseq.max_sequences bounds the sequences in use at once.  When a
 * sequence needs an entry and none is free, the least recently used entry
 * that no backend uses is asked for: its database's worker writes its pool
 * and totals back and parks it (worker.c), and the asking backend takes it
 * over.  Only a parked entry changes database, so no value is ever in two
 * places: the catalog has the pool back, and the stream is closed, before
 * the entry is reused.  Sessions that cached the entry see its new identity
 * (its incarnation, pool.c) and attach again (nextval.c).
 *
 * Each backend has distseq.backend_marks slots of marks, one entry each
 * (inuse.c explains the handshake they serve): distseq_my_marks() gives
 * a free slot, or one not used lately (a clock), to the entry a transaction
 * wants to use without a lock, and never one that marks the running
 * transaction.  Shared memory per backend thus does not grow with
 * distseq.max_sequences.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

DistseqShared *Distseq = NULL;

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static bool backend_attached = false;

/*
 * The entry each of this backend's slots of marks holds, as in shared
 * memory: only this backend writes its slots' entries, so it finds the slot
 * of an entry without reading shared memory.  The hand goes round the slots
 * to pick one to give away, and the user_xact a slot had when the hand last
 * passed it tells whether it has been used since.
 */
static int32 *my_entries = NULL;
static LocalTransactionId *my_passed = NULL;
static int	my_hand = 0;

/* The key of the hash table of entries: an entry's identity */
typedef struct DistseqEntryKey
{
	Oid			dboid;
	Oid			relid;
	uint64		gen;
} DistseqEntryKey;

typedef struct DistseqEntryRef
{
	DistseqEntryKey key;
	int			index;			/* in Distseq->seqs */
} DistseqEntryRef;

/* (dboid, relid, gen) -> entry, guarded by Distseq->lock */
static HTAB *entry_hash = NULL;

static Size
distseq_shmem_size(void)
{
	Size		size;

	size = mul_size(distseq_max_sequences, sizeof(DistseqSeq));
	size = add_size(size, MAXALIGN(sizeof(DistseqShared)));
	size = add_size(size, MAXALIGN(mul_size(max_worker_processes,
											sizeof(DistseqDbWorker))));
	size = add_size(size, MAXALIGN(mul_size(MaxBackends,
											sizeof(DistseqBackend))));
	size = add_size(size, MAXALIGN(mul_size(mul_size(MaxBackends,
													 distseq_backend_marks),
											sizeof(DistseqMarks))));
	size = add_size(size, mul_size(DISTSEQ_FAILURES, sizeof(DistseqFailure)));
	return size;
}

static Size
distseq_hash_size(void)
{
	return hash_estimate_size(distseq_max_sequences, sizeof(DistseqEntryRef));
}

static void
distseq_shmem_request(void)
{
#if PG_VERSION_NUM >= 150000
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif

	RequestAddinShmemSpace(add_size(distseq_shmem_size(), distseq_hash_size()));
	/* the global lock, the entries' and the ring of failures' */
	RequestNamedLWLockTranche(DISTSEQ_TRANCHE, 2 + distseq_max_sequences);
}

static void
distseq_shmem_startup(void)
{
	bool		found;
	char	   *ptr;
	DistseqSeq *seqs;
	HASHCTL		info;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);

	/*
	 * The entries first: shared memory is handed out aligned to
	 * PG_CACHE_LINE_SIZE, as each entry must be (distseq.h).
	 */
	ptr = ShmemInitStruct("distseq", distseq_shmem_size(), &found);
	seqs = (DistseqSeq *) ptr;
	Assert(((uintptr_t) seqs) % PG_CACHE_LINE_SIZE == 0);
	ptr += mul_size(distseq_max_sequences, sizeof(DistseqSeq));
	Distseq = (DistseqShared *) ptr;
	Distseq->seqs = seqs;
	ptr += MAXALIGN(sizeof(DistseqShared));
	Distseq->workers = (DistseqDbWorker *) ptr;
	ptr += MAXALIGN(mul_size(max_worker_processes, sizeof(DistseqDbWorker)));
	Distseq->backends = (DistseqBackend *) ptr;
	ptr += MAXALIGN(mul_size(MaxBackends, sizeof(DistseqBackend)));
	Distseq->marks = (DistseqMarks *) ptr;
	ptr += MAXALIGN(mul_size(mul_size(MaxBackends, distseq_backend_marks),
							 sizeof(DistseqMarks)));
	Distseq->failure_ring = (DistseqFailure *) ptr;

	info.keysize = sizeof(DistseqEntryKey);
	info.entrysize = sizeof(DistseqEntryRef);
	entry_hash = ShmemInitHash("distseq entries", distseq_max_sequences,
							   distseq_max_sequences, &info,
							   HASH_ELEM | HASH_BLOBS);

	if (!found)
	{
		LWLockPadded *locks = GetNamedLWLockTranche(DISTSEQ_TRANCHE);

		memset(Distseq->workers, 0,
			   mul_size(max_worker_processes, sizeof(DistseqDbWorker)));
		memset(Distseq->seqs, 0,
			   mul_size(distseq_max_sequences, sizeof(DistseqSeq)));
		memset(Distseq->backends, 0, mul_size(MaxBackends, sizeof(DistseqBackend)));
		for (int i = 0; i < MaxBackends * distseq_backend_marks; i++)
		{
			pg_atomic_init_u64(&Distseq->marks[i].held, DISTSEQ_HELD_FREE);
			Distseq->marks[i].user_xact = InvalidLocalTransactionId;
		}
		Distseq->lock = &locks[0].lock;
		Distseq->failure_lock = &locks[1 + distseq_max_sequences].lock;
		Distseq->failure_next = 0;
		for (int i = 0; i < DISTSEQ_FAILURES; i++)
			Distseq->failure_ring[i].index = -1;
		pg_atomic_init_u64(&Distseq->clock, 1);
		pg_atomic_init_u32(&Distseq->refill_waits, 0);
		ConditionVariableInit(&Distseq->entry_cv);
		for (int i = 0; i < max_worker_processes; i++)
			ConditionVariableInit(&Distseq->workers[i].agent_cv);
		for (int i = 0; i < distseq_max_sequences; i++)
		{
			DistseqSeq *seq = &Distseq->seqs[i];

			seq->lock = &locks[1 + i].lock;
			pg_atomic_init_u64(&seq->gen, 0);
			pg_atomic_init_u64(&seq->stream, 0);
			pg_atomic_init_u32(&seq->drop_state, 0);
			pg_atomic_init_u32(&seq->drops, 0);
			ConditionVariableInit(&seq->cv);
		}
	}

	LWLockRelease(AddinShmemInitLock);
}

void
distseq_shmem_init(void)
{
#if PG_VERSION_NUM >= 150000
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = distseq_shmem_request;
#else
	distseq_shmem_request();
#endif
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = distseq_shmem_startup;
}

/*
 * Every SQL-callable function starts here: without the library preloaded
 * there is no shared memory to work with.
 */
void
distseq_check_loaded(void)
{
	if (Distseq == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distseq must be loaded via shared_preload_libraries"),
				 errhint("Add distseq to shared_preload_libraries in postgresql.conf and restart the server.")));
}

static int
seq_index(DistseqSeq *seq)
{
	return seq - Distseq->seqs;
}

static void
entry_key(DistseqEntryKey *key, Oid dboid, Oid relid, uint64 gen)
{
	memset(key, 0, sizeof(*key));
	key->dboid = dboid;
	key->relid = relid;
	key->gen = gen;
}

/* Caller holds Distseq->lock */
static DistseqSeq *
seq_find_locked(Oid dboid, Oid relid, uint64 gen)
{
	DistseqEntryKey key;
	DistseqEntryRef *ref;

	entry_key(&key, dboid, relid, gen);
	ref = hash_search(entry_hash, &key, HASH_FIND, NULL);
	if (ref == NULL)
		return NULL;
	Assert(distseq_seq_is(&Distseq->seqs[ref->index], dboid, relid, gen));
	return &Distseq->seqs[ref->index];
}

/*
 * The entry, whose generation was gen (0: it was free), leaves the hash
 * table: it is freed or taken over.  Caller holds Distseq->lock
 * exclusively.
 */
static void
seq_unhash_locked(DistseqSeq *seq, uint64 gen)
{
	DistseqEntryKey key;

	if (gen == 0)
		return;
	entry_key(&key, seq->dboid, seq->relid, gen);
	(void) hash_search(entry_hash, &key, HASH_REMOVE, NULL);
}

/*
 * Free an entry.  Caller holds Distseq->lock exclusively.  Whatever its pool
 * and stream still hold is given up (reserved in the catalog, never handed
 * out).
 */
static void
seq_free_locked(DistseqSeq *seq)
{
	LWLockAcquire(seq->lock, LW_EXCLUSIVE);
	seq_unhash_locked(seq, pg_atomic_read_u64(&seq->gen));
	pg_atomic_write_u64(&seq->gen, 0);
	seq->dboid = InvalidOid;
	seq->relid = InvalidOid;
	seq->incarnation++;
	(void) distseq_pool_close(seq);
	LWLockRelease(seq->lock);
	/* wake anybody waiting on it, they will notice it is gone */
	ConditionVariableBroadcast(&seq->cv);
}

/*
 * The sequence of relation relid, in our database, takes a new generation
 * (redefine.c): the caller holds AccessExclusiveLock on the relation and has
 * waited for every transaction that used it without a lock.  Free its
 * entries, as those of a dropped relation are: they will never be drawn
 * from again.  What their pools and streams hold is given up.
 */
void
distseq_seq_forget(Oid relid)
{
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq *seq = &Distseq->seqs[i];

		if (pg_atomic_read_u64(&seq->gen) != 0 &&
			seq->dboid == MyDatabaseId && seq->relid == relid)
			seq_free_locked(seq);
	}
	LWLockRelease(Distseq->lock);
}

/*
 * Give a taken entry its new identity.  Caller holds Distseq->lock
 * exclusively and seq->lock.
 */
static void
seq_setup_locked(DistseqSeq *seq, Oid relid, uint64 gen, const char *name,
				 const DistseqDef *def)
{
	DistseqEntryKey key;
	DistseqEntryRef *ref;

	seq->dboid = MyDatabaseId;
	seq->relid = relid;
	strlcpy(seq->name, name, NAMEDATALEN);
	seq->block_size = def->block_size;
	seq->max_value = def->max_value;
	seq->stripes = def->stripes;
	seq->stripe = def->stripe;
	seq->incarnation++;
	/* a parked or freed entry's stream is closed already: nothing is lost */
	(void) distseq_pool_close(seq);
	seq->stream_last = PG_INT64_MIN;
	seq->cur.lo = seq->cur.hi = 0;
	seq->pre.lo = seq->pre.hi = 0;
	seq->nfrags = 0;
	seq->segment_size = (int64) def->block_size * DISTSEQ_SEGMENT_BLOCKS;
	seq->last_refill = 0;
	seq->rate = 0;
	seq->refill_pending = false;
	seq->refill_waited = false;
	seq->exhausted = false;
	seq->accounted = false;
	seq->park_state = DISTSEQ_PARK_ACTIVE;
	seq->park_requested = false;
	seq->last_used = pg_atomic_fetch_add_u64(&Distseq->clock, 1);
	seq->failures = 0;
	seq->issued = -1;			/* read from the catalog by the worker */
	seq->lost = -1;
	seq->refills = 0;
	seq->waits = 0;
	seq->wait_ms = 0;
	/* we hold a lock on the relation: nobody is dropping it */
	pg_atomic_write_u32(&seq->drop_state, 0);
	pg_atomic_write_u64(&seq->gen, gen);

	/* there is room: no more identities than entries */
	entry_key(&key, seq->dboid, relid, gen);
	ref = hash_search(entry_hash, &key, HASH_ENTER, NULL);
	ref->index = seq_index(seq);
}

/*
 * Does a backend still use the entry: run a transaction that used it without
 * a lock (inuse.c), which a drop of its relation must find?  Marks are read
 * without their owners' help: a stale one only makes the entry look busier.
 * A slot's user_xact is read before its entry, as a dropper does (inuse.c):
 * a slot that marks the running transaction keeps its entry until it ends.
 * No backend holds values of its own: what the stream has left goes back
 * with the pool, and a backend that draws again finds the entry changed.
 */
bool
distseq_seq_held(DistseqSeq *seq)
{
	int			i = seq_index(seq);

	for (int b = 0; b < MaxBackends; b++)
	{
		DistseqMarks *slots = &Distseq->marks[b * distseq_backend_marks];
		LocalTransactionId running;

		if (Distseq->backends[b].dboid != seq->dboid)
			continue;
		running = distseq_slot_lxid(b);
		if (!LocalTransactionIdIsValid(running))
			continue;
		for (int k = 0; k < distseq_backend_marks; k++)
		{
			if (slots[k].user_xact != running)
				continue;
			pg_read_barrier();
			if (distseq_marks_entry(&slots[k]) == i)
				return true;
		}
	}
	return false;
}

/*
 * Which entries distseq_seq_held() would call held, all at once (a palloc'd
 * array of distseq.max_sequences flags): one pass over the slots, for those
 * that look at many entries.  Only a hint, as racy as its model: whoever
 * takes an entry over checks it again with distseq_seq_held().
 */
bool *
distseq_held_entries(void)
{
	bool	   *held = palloc0(sizeof(bool) * distseq_max_sequences);

	for (int b = 0; b < MaxBackends; b++)
	{
		DistseqMarks *slots = &Distseq->marks[b * distseq_backend_marks];
		Oid			dboid = Distseq->backends[b].dboid;
		LocalTransactionId running;

		if (!OidIsValid(dboid))
			continue;
		running = distseq_slot_lxid(b);
		if (!LocalTransactionIdIsValid(running))
			continue;
		for (int k = 0; k < distseq_backend_marks; k++)
		{
			int32		i;

			if (slots[k].user_xact != running)
				continue;
			pg_read_barrier();
			i = distseq_marks_entry(&slots[k]);
			if (i >= 0 && i < distseq_max_sequences &&
				Distseq->seqs[i].dboid == dboid)
				held[i] = true;
		}
	}
	return held;
}

/*
 * Take a parked entry from whatever sequence it carries.  Caller holds
 * Distseq->lock exclusively and seq->lock.  Its identity goes first, then
 * the backends are looked at: one that marks the entry as used (inuse.c)
 * writes its mark before it reads the identity, so either we see the mark
 * and leave the entry as it was, or it sees the entry gone and takes the
 * relation's lock instead.
 */
static bool
seq_take_parked(DistseqSeq *seq)
{
	uint64		gen = pg_atomic_read_u64(&seq->gen);

	if (gen == 0)
		return true;
	if (seq->park_state != DISTSEQ_PARK_PARKED || seq->refill_pending ||
		pg_atomic_read_u32(&seq->drop_state) != 0)
		return false;
	pg_atomic_write_u64(&seq->gen, 0);
	pg_memory_barrier();
	if (distseq_seq_held(seq))
	{
		pg_atomic_write_u64(&seq->gen, gen);
		return false;
	}
	seq_unhash_locked(seq, gen);
	return true;
}

/* qsort: least recently used first */
static int
seq_lru_cmp(const void *a, const void *b)
{
	const DistseqSeq *sa = *(DistseqSeq *const *) a;
	const DistseqSeq *sb = *(DistseqSeq *const *) b;

	if (sa->last_used != sb->last_used)
		return sa->last_used < sb->last_used ? -1 : 1;
	return 0;
}

/*
 * An entry for a new sequence: a free one, one of a relation dropped in our
 * database, or the least recently used parked one, taken with seq->lock
 * held (the caller sets it up and releases it).  Caller holds Distseq->lock
 * exclusively.  When there is none, the least recently used entry that no
 * backend uses is asked to be parked (unless "more" is false and one is
 * asked already), and *ask set to the database whose worker does that (or
 * to one already asked, still at it, or to one that is refilling an entry
 * no backend uses: it can be parked once the refill is done); *ask stays
 * invalid when every entry is in use.
 */
static DistseqSeq *
seq_take_locked(Oid *ask, bool more)
{
	DistseqSeq **parked;
	DistseqSeq *idle = NULL;
	Oid			refilling = InvalidOid;
	int			nparked = 0;
	bool	   *held;

	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq *seq = &Distseq->seqs[i];

		if (pg_atomic_read_u64(&seq->gen) == 0)
		{
			LWLockAcquire(seq->lock, LW_EXCLUSIVE);
			return seq;
		}
	}
	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq *old = &Distseq->seqs[i];

		if (old->dboid == MyDatabaseId &&
			!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(old->relid)))
		{
			seq_free_locked(old);
			LWLockAcquire(old->lock, LW_EXCLUSIVE);
			return old;
		}
	}

	parked = palloc(sizeof(DistseqSeq *) * distseq_max_sequences);
	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq *seq = &Distseq->seqs[i];

		if (seq->park_state == DISTSEQ_PARK_PARKED)
			parked[nparked++] = seq;
	}
	qsort(parked, nparked, sizeof(DistseqSeq *), seq_lru_cmp);
	for (int i = 0; i < nparked; i++)
	{
		DistseqSeq *seq = parked[i];

		LWLockAcquire(seq->lock, LW_EXCLUSIVE);
		if (seq_take_parked(seq))
		{
			pfree(parked);
			return seq;
		}
		LWLockRelease(seq->lock);
	}
	pfree(parked);

	*ask = InvalidOid;
	held = distseq_held_entries();
	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq *seq = &Distseq->seqs[i];
		uint64		gen;

		LWLockAcquire(seq->lock, LW_SHARED);
		gen = pg_atomic_read_u64(&seq->gen);
		if (seq->park_requested || seq->park_state == DISTSEQ_PARK_WRITING)
			*ask = seq->dboid;
		else if (gen != 0 && !seq->refill_pending &&
				 pg_atomic_read_u32(&seq->drop_state) == 0 &&
				 (idle == NULL || seq->last_used < idle->last_used) &&
				 !held[i])
			idle = seq;
		else if (gen != 0 && seq->refill_pending && !held[i] &&
				 pg_atomic_read_u32(&seq->drop_state) == 0)
			refilling = seq->dboid;
		LWLockRelease(seq->lock);
	}
	pfree(held);
	if (idle != NULL && (more || !OidIsValid(*ask)))
	{
		LWLockAcquire(idle->lock, LW_EXCLUSIVE);
		idle->park_requested = true;
		*ask = idle->dboid;
		LWLockRelease(idle->lock);
	}
	else if (idle == NULL && !OidIsValid(*ask))
		*ask = refilling;
	return NULL;
}

/*
 * Find or set up the entry of a sequence of the current database.  When
 * every entry is taken, one that no backend uses -- the least recently used
 * -- is written back by its database's worker and taken over; this waits
 * for that, up to distseq.refill_timeout.
 */
DistseqSeq *
distseq_seq_attach(Oid relid, uint64 gen, const char *name,
				   const DistseqDef *def, uint64 *incarnation)
{
	DistseqSeq *seq;
	TimestampTz start = 0;
	bool		sleeping = false;

	/* the incarnation is read under the lock that its changes take */
	LWLockAcquire(Distseq->lock, LW_SHARED);
	seq = seq_find_locked(MyDatabaseId, relid, gen);
	if (seq)
		*incarnation = seq->incarnation;
	LWLockRelease(Distseq->lock);
	if (seq)
		return seq;

	for (;;)
	{
		Oid			ask = InvalidOid;
		long		elapsed_ms;

		LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
		seq = seq_find_locked(MyDatabaseId, relid, gen);
		if (seq)
		{
			*incarnation = seq->incarnation;
			LWLockRelease(Distseq->lock);
			break;
		}
		/* one more entry asked for per caller, not per look */
		seq = seq_take_locked(&ask, !sleeping);
		if (seq)
		{
			seq_setup_locked(seq, relid, gen, name, def);
			*incarnation = seq->incarnation;
			LWLockRelease(seq->lock);
			LWLockRelease(Distseq->lock);
			break;
		}
		LWLockRelease(Distseq->lock);

		if (!OidIsValid(ask))
		{
			char	   *dbname = distseq_database_name(MyDatabaseId);

			if (sleeping)
				ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("too many distseq sequences in use"),
					 errdetail("Sequence \"%s\" of database \"%s\" needs an entry, and transactions are using the sequences in all %d (distseq.max_sequences).",
							   name, dbname, distseq_max_sequences),
					 errhint("Increase distseq.max_sequences and restart the server, or use fewer sequences in one transaction.")));
		}
		distseq_worker_wake(ask);

		if (!sleeping)
		{
			/* prepare first, then look again, so no broadcast is missed */
			ConditionVariablePrepareToSleep(&Distseq->entry_cv);
			start = GetCurrentTimestamp();
			sleeping = true;
			continue;
		}
		elapsed_ms = (long) ((GetCurrentTimestamp() - start) / 1000);
		if (elapsed_ms >= distseq_refill_timeout)
		{
			char	   *dbname = distseq_database_name(MyDatabaseId);
			char	   *owner = distseq_database_name(ask);

			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("timed out waiting for a distseq entry for sequence \"%s\" of database \"%s\"",
							name, dbname),
					 errdetail("All %d entries (distseq.max_sequences) are in use, and the worker of database \"%s\" did not finish a refill or write an entry back within distseq.refill_timeout (%d ms).",
							   distseq_max_sequences, owner, distseq_refill_timeout),
					 errhint("Check the server log for errors of the distseq worker, or increase distseq.max_sequences.")));
		}
		(void) ConditionVariableTimedSleep(&Distseq->entry_cv,
										   Min(distseq_refill_timeout - elapsed_ms, 100),
										   PG_WAIT_EXTENSION);
	}
	if (sleeping)
		ConditionVariableCancelSleep();
	return seq;
}

/*
 * Forget every entry of a database whose drop has committed (worker.c).
 * Nobody is connected to it any more: what the pools hold goes with the
 * catalog.
 */
void
distseq_forget_database(Oid dboid)
{
	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq *seq = &Distseq->seqs[i];

		if (pg_atomic_read_u64(&seq->gen) != 0 && seq->dboid == dboid)
			seq_free_locked(seq);
	}
	LWLockRelease(Distseq->lock);
}

static int
my_slot(void)
{
	if (!DISTSEQ_HAS_SLOT() || DISTSEQ_MY_SLOT >= MaxBackends)
		elog(ERROR, "distseq: process has no backend slot");
	return DISTSEQ_MY_SLOT;
}

/* The backend exits: its slot is free for the next one */
static void
distseq_backend_detach(int code, Datum arg)
{
	int			slot = my_slot();

	Distseq->backends[slot].pid = 0;
	Distseq->backends[slot].dboid = InvalidOid;
}

/*
 * Claim this backend's slot on first use.  Marks left behind by an earlier
 * process with the same backend id are cleared.
 */
static void
distseq_backend_attach(void)
{
	int			slot;
	DistseqMarks *slots;

	if (backend_attached)
		return;
	slot = my_slot();
	slots = &Distseq->marks[slot * distseq_backend_marks];
	for (int k = 0; k < distseq_backend_marks; k++)
		slots[k].user_xact = InvalidLocalTransactionId;
	/* a dropper reads user_xact before entry (inuse.c) */
	pg_write_barrier();
	for (int k = 0; k < distseq_backend_marks; k++)
		pg_atomic_write_u64(&slots[k].held, DISTSEQ_HELD_FREE);
	if (my_entries == NULL)
	{
		/* one allocation: running out of memory leaves neither set */
		char	   *mem = MemoryContextAlloc(TopMemoryContext,
											 (sizeof(int32) + sizeof(LocalTransactionId)) *
											 distseq_backend_marks);

		my_passed = (LocalTransactionId *) (mem + sizeof(int32) * distseq_backend_marks);
		my_entries = (int32 *) mem;
	}
	for (int k = 0; k < distseq_backend_marks; k++)
	{
		my_entries[k] = -1;
		my_passed[k] = InvalidLocalTransactionId;
	}
	Distseq->backends[slot].dboid = MyDatabaseId;
	Distseq->backends[slot].pid = MyProcPid;
	/* before any mark of ours says we use a sequence (inuse.c) */
	pg_write_barrier();
	before_shmem_exit(distseq_backend_detach, 0);
	backend_attached = true;
}

/*
 * This backend's slot of marks on the entry seq: the one that holds it, else
 * one given to it now -- a free one, else the first the hand comes to that
 * has not been used since the hand last passed it (a second chance, which
 * keeps the slots of sequences used in every transaction) -- or NULL when
 * every slot marks the running transaction, and the caller must lock the
 * relation instead.  Two rounds of the hand at most: the first notes what
 * every slot was last used by.
 *
 * A slot that marks the running transaction is never given away: a dropper
 * (inuse.c) or a taker (distseq_seq_held) that reads our transaction id in
 * it must find the entry we use there.  A slot changes hands in one write of
 * its held word, which clears the transaction a dropper waits for with it; a
 * dropper of the old entry copies an id in only by compare-and-swap on a word
 * that still holds its entry, so that no id it copied can pass for one that
 * a dropper of the new entry waits for.  No lock is taken: a backend drawing
 * from thousands of sequences gives a slot away in most of its transactions.
 * Its user_xact is cleared before the entry changes: whoever reads user_xact,
 * then (read barrier) the entry, and finds the entry new, read an id of a
 * transaction that has ended, or of ours that cleared its mark on the old
 * entry and locks that relation instead, or none.
 */
DistseqMarks *
distseq_my_marks(DistseqSeq *seq)
{
	DistseqMarks *slots;
	DistseqMarks *victim = NULL;
	LocalTransactionId lxid = DISTSEQ_MY_LXID;
	int32		i = seq_index(seq);
	int			k;

	distseq_backend_attach();
	slots = &Distseq->marks[my_slot() * distseq_backend_marks];
	for (k = 0; k < distseq_backend_marks; k++)
	{
		if (my_entries[k] == i)
			return &slots[k];
	}
	for (int n = 0; n < 2 * distseq_backend_marks; n++)
	{
		LocalTransactionId used;

		k = my_hand;
		my_hand = (my_hand + 1) % distseq_backend_marks;
		if (my_entries[k] < 0)
		{
			victim = &slots[k];
			break;
		}
		/* user_xact of our slots is ours to write: no barrier to read it */
		used = slots[k].user_xact;
		if (used == lxid && LocalTransactionIdIsValid(lxid))
			continue;
		if (used != my_passed[k])
		{
			my_passed[k] = used;
			continue;
		}
		victim = &slots[k];
		break;
	}
	if (victim == NULL)
		return NULL;

	victim->user_xact = InvalidLocalTransactionId;
	pg_write_barrier();
	pg_atomic_write_u64(&victim->held,
						DISTSEQ_HELD(i, InvalidLocalTransactionId));
	my_entries[k] = i;
	my_passed[k] = victim->user_xact;
	/* before the user_xact that says we use it (inuse.c) */
	pg_write_barrier();
	return victim;
}
