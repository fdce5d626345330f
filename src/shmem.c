/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  The shared-memory layout of distseq: sizing and set-up, the table of
 *	  sequence entries, and each backend's block slots.
 *
 * The layout and its locking rules are described in distseq.h.  Entries
 * are found by a linear scan under the global lock; that happens once per
 * statement and call site at most (nextval.c caches the entry), never on
 * the hot path.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lock.h"
#include "storage/shmem.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

DistseqShared *Distseq = NULL;

#if PG_VERSION_NUM >= 150000
static shmem_request_hook_type prev_shmem_request_hook = NULL;
#endif
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

static bool backend_attached = false;

static Size
distseq_shmem_size(void)
{
	Size		size;

	size = MAXALIGN(sizeof(DistseqShared));
	size = add_size(size, MAXALIGN(mul_size(distseq_max_sequences,
											sizeof(DistseqDbWorker))));
	size = add_size(size, MAXALIGN(mul_size(distseq_max_sequences,
											sizeof(DistseqSeq))));
	size = add_size(size, MAXALIGN(mul_size(MaxBackends,
											sizeof(DistseqBackend))));
	size = add_size(size, mul_size(mul_size(MaxBackends, distseq_max_sequences),
								   sizeof(DistseqBlock)));
	return size;
}

static void
distseq_shmem_request(void)
{
#if PG_VERSION_NUM >= 150000
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
#endif

	RequestAddinShmemSpace(distseq_shmem_size());
	RequestNamedLWLockTranche(DISTSEQ_TRANCHE, 1 + distseq_max_sequences);
}

static void
distseq_shmem_startup(void)
{
	bool		found;
	char	   *ptr;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);

	ptr = ShmemInitStruct("distseq", distseq_shmem_size(), &found);
	Distseq = (DistseqShared *) ptr;
	ptr += MAXALIGN(sizeof(DistseqShared));
	Distseq->workers = (DistseqDbWorker *) ptr;
	ptr += MAXALIGN(mul_size(distseq_max_sequences, sizeof(DistseqDbWorker)));
	Distseq->seqs = (DistseqSeq *) ptr;
	ptr += MAXALIGN(mul_size(distseq_max_sequences, sizeof(DistseqSeq)));
	Distseq->backends = (DistseqBackend *) ptr;
	ptr += MAXALIGN(mul_size(MaxBackends, sizeof(DistseqBackend)));
	Distseq->blocks = (DistseqBlock *) ptr;

	if (!found)
	{
		LWLockPadded *locks = GetNamedLWLockTranche(DISTSEQ_TRANCHE);

		memset(Distseq->workers, 0,
			   mul_size(distseq_max_sequences, sizeof(DistseqDbWorker)));
		memset(Distseq->seqs, 0,
			   mul_size(distseq_max_sequences, sizeof(DistseqSeq)));
		memset(Distseq->backends, 0, mul_size(MaxBackends, sizeof(DistseqBackend)));
		memset(Distseq->blocks, 0,
			   mul_size(mul_size(MaxBackends, distseq_max_sequences),
						sizeof(DistseqBlock)));
		Distseq->lock = &locks[0].lock;
		for (int i = 0; i < distseq_max_sequences; i++)
		{
			DistseqSeq *seq = &Distseq->seqs[i];

			seq->lock = &locks[1 + i].lock;
			pg_atomic_init_u64(&seq->gen, 0);
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

/* Caller holds Distseq->lock */
static DistseqSeq *
seq_find_locked(Oid dboid, Oid relid, uint64 gen)
{
	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq *seq = &Distseq->seqs[i];

		if (distseq_seq_is(seq, dboid, relid, gen))
			return seq;
	}
	return NULL;
}

DistseqSeq *
distseq_seq_find(Oid dboid, Oid relid, uint64 gen)
{
	DistseqSeq *seq;

	LWLockAcquire(Distseq->lock, LW_SHARED);
	seq = seq_find_locked(dboid, relid, gen);
	LWLockRelease(Distseq->lock);
	return seq;
}

/*
 * Free an entry.  Caller holds Distseq->lock exclusively.  Whatever its pool
 * still holds is given up (reserved in the catalog, never handed out).
 */
static void
seq_free_locked(DistseqSeq *seq)
{
	LWLockAcquire(seq->lock, LW_EXCLUSIVE);
	pg_atomic_write_u64(&seq->gen, 0);
	seq->dboid = InvalidOid;
	seq->relid = InvalidOid;
	LWLockRelease(seq->lock);
	/* wake anybody waiting on it, they will notice it is gone */
	ConditionVariableBroadcast(&seq->cv);
}

/*
 * Find or set up the entry of a sequence of the current database.  Entries
 * whose backing relation no longer exists (dropped with DROP SEQUENCE) are
 * recycled when the table is full.
 */
DistseqSeq *
distseq_seq_attach(Oid relid, uint64 gen, const char *name,
				   const DistseqDef *def)
{
	DistseqSeq *seq;
	DistseqSeq *free_seq = NULL;

	seq = distseq_seq_find(MyDatabaseId, relid, gen);
	if (seq)
		return seq;

	LWLockAcquire(Distseq->lock, LW_EXCLUSIVE);
	seq = seq_find_locked(MyDatabaseId, relid, gen);
	if (seq)
	{
		LWLockRelease(Distseq->lock);
		return seq;
	}

	for (int i = 0; i < distseq_max_sequences && free_seq == NULL; i++)
	{
		if (pg_atomic_read_u64(&Distseq->seqs[i].gen) == 0)
			free_seq = &Distseq->seqs[i];
	}
	for (int i = 0; i < distseq_max_sequences && free_seq == NULL; i++)
	{
		DistseqSeq *old = &Distseq->seqs[i];

		if (old->dboid == MyDatabaseId &&
			!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(old->relid)))
		{
			seq_free_locked(old);
			free_seq = old;
		}
	}
	if (free_seq == NULL)
	{
		LWLockRelease(Distseq->lock);
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many distseq sequences in use"),
				 errdetail("distseq.max_sequences is %d.", distseq_max_sequences),
				 errhint("Increase distseq.max_sequences and restart the server.")));
	}

	seq = free_seq;
	LWLockAcquire(seq->lock, LW_EXCLUSIVE);
	seq->dboid = MyDatabaseId;
	seq->relid = relid;
	strlcpy(seq->name, name, NAMEDATALEN);
	seq->block_size = def->block_size;
	seq->max_value = def->max_value;
	seq->stripes = def->stripes;
	seq->stripe = def->stripe;
	seq->cur.lo = seq->cur.hi = 0;
	seq->pre.lo = seq->pre.hi = 0;
	seq->nfrags = 0;
	seq->segment_size = (int64) def->block_size * DISTSEQ_SEGMENT_BLOCKS;
	seq->last_refill = 0;
	seq->rate = 0;
	seq->refill_pending = false;
	seq->exhausted = false;
	seq->accounted = false;
	seq->failures = 0;
	seq->last_error[0] = '\0';
	seq->last_detail[0] = '\0';
	seq->issued = -1;			/* read from the catalog by the worker */
	seq->lost = -1;
	seq->refills = 0;
	seq->waits = 0;
	seq->wait_ms = 0;
	/* we hold a lock on the relation: nobody is dropping it */
	pg_atomic_write_u32(&seq->drop_state, 0);
	pg_atomic_write_u64(&seq->gen, gen);
	LWLockRelease(seq->lock);

	LWLockRelease(Distseq->lock);
	return seq;
}

/*
 * Forget every entry of a database whose drop has committed (worker.c).
 * Nobody is connected to it any more, so no block of its entries is left:
 * what the pools hold goes with the catalog.
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

/* Give back the unused rest of every block this backend holds. */
static void
distseq_backend_detach(int code, Datum arg)
{
	int			slot = my_slot();

	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqBlock *blk = &Distseq->blocks[slot * distseq_max_sequences + i];
		DistseqSeq *seq = &Distseq->seqs[i];

		if (blk->gen == 0)
			continue;
		distseq_pool_return_block(seq, blk);
		blk->gen = 0;
	}
	Distseq->backends[slot].pid = 0;
	Distseq->backends[slot].dboid = InvalidOid;
}

/*
 * Claim this backend's slot on first use.  A slot left behind by an earlier
 * process with the same backend id is emptied: it gave its blocks back when
 * it exited, and a crash reinitializes shared memory.
 */
void
distseq_backend_attach(void)
{
	int			slot;

	if (backend_attached)
		return;
	slot = my_slot();
	for (int i = 0; i < distseq_max_sequences; i++)
	{
		Distseq->blocks[slot * distseq_max_sequences + i].gen = 0;
		Distseq->blocks[slot * distseq_max_sequences + i].user_xact =
			InvalidLocalTransactionId;
	}
	Distseq->backends[slot].dboid = MyDatabaseId;
	Distseq->backends[slot].pid = MyProcPid;
	/* before any block of ours says we use a sequence (inuse.c) */
	pg_write_barrier();
	before_shmem_exit(distseq_backend_detach, 0);
	backend_attached = true;
}

DistseqBlock *
distseq_my_block(DistseqSeq *seq)
{
	return &Distseq->blocks[my_slot() * distseq_max_sequences + seq_index(seq)];
}

/* How many backends other than this one use distseq in a database */
int
distseq_attached_backends(Oid dboid)
{
	int			n = 0;

	for (int b = 0; b < MaxBackends; b++)
	{
		DistseqBackend *be = &Distseq->backends[b];

		if (be->pid != 0 && be->pid != MyProcPid && be->dboid == dboid)
			n++;
	}
	return n;
}
