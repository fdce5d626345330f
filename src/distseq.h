/*-------------------------------------------------------------------------
 *
 * distseq.h
 *	  Shared declarations of the distseq extension: the shared-memory
 *	  layout, the GUCs and the entry points of each subsystem.
 *
 * Shared memory holds these, in this order, all sized at postmaster start:
 *
 *	- an array of distseq.max_sequences DistseqSeq entries, one per sequence
 *	  in use anywhere in the cluster, each with its own pool and LWLock;
 *	  an idle one is taken over by another sequence when none is free;
 *	  a hash table ("distseq entries", shmem.c) finds an entry by its
 *	  identity;
 *	- DistseqShared: a header with the global lock, and an array of
 *	  max_worker_processes DistseqDbWorker slots, one per database that has
 *	  a refill worker (a database without a free background worker slot
 *	  cannot run one anyway);
 *	- an array of MaxBackends x distseq.backend_marks DistseqMarks slots:
 *	  a backend's marks on the entries it used last, one entry per slot,
 *	  which make a DROP wait for it (inuse.c); a backend that uses more
 *	  sequences in one transaction locks the others' relations instead;
 *	- a ring of the last DISTSEQ_FAILURES failed refills, why each failed,
 *	  for the sessions that waited on them (pool.c), with its own LWLock.
 *
 * Locking rules (the global lock and the entry locks form one tranche named
 * "distseq"):
 *	- DistseqShared->lock guards entry identity (dboid, relid, gen, name and
 *	  parameters), the hash table of entries and the worker table.  Take
 *	  it before any entry lock.  An entry changes identity under both
 *	  locks: when it was free, when its relation was dropped, or when it
 *	  was parked (park_state) and no backend uses it (shmem.c).
 *	- DistseqSeq->lock guards that entry's pool, refill state and counters,
 *	  and the installing of a chunk into its stream; values are drawn from
 *	  the stream without any lock (pool.c).
 *	- DistseqShared->failure_lock guards the ring of failed refills.  It
 *	  is taken last, under an entry's lock, and nothing is taken under it.
 *	- A DistseqMarks is written only by the backend that owns the slot, and
 *	  without any lock; others may read it, racily.  The one exception is
 *	  the transaction a dropper waits for, which a DROP writes (inuse.c)
 *	  by compare-and-swap, together with the entry it expects there.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DISTSEQ_H
#define DISTSEQ_H

#include "postgres.h"

#include "access/attnum.h"
#include "access/xlogdefs.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lockdefs.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#define DISTSEQ_TRANCHE			"distseq"
#define DISTSEQ_MAX_FRAGMENTS	8
/* what a pool holds at most: the stream's rest, cur, pre and fragments */
#define DISTSEQ_POOL_MAX_RANGES	(DISTSEQ_MAX_FRAGMENTS + 3)

/*
 * A segment -- what one refill reserves -- starts at this many blocks, its
 * floor, and adapts to demand up to DISTSEQ_SEGMENT_MAX_BLOCKS: it doubles
 * when the last one lasted less than a quarter of distseq.segment_lifetime
 * and halves, down to the floor, when it lasted more than four times that,
 * so hot sequences refill rarely.  The floor keeps the refills of many slow
 * sequences few, each one a transaction of the worker's; what a crash loses
 * of a slow sequence is what its pool holds, at most a segment and a half
 * plus a block with the default distseq.prefetch_threshold.
 */
#define DISTSEQ_SEGMENT_BLOCKS		10
#define DISTSEQ_SEGMENT_MAX_BLOCKS	1024

/* A half-open range of values [lo, hi) */
typedef struct DistseqRange
{
	int64		lo;
	int64		hi;
} DistseqRange;

#define RANGE_SIZE(r)	((r).hi - (r).lo)

/*
 * The stream of a sequence: every backend of the server draws from one
 * chunk at a time, in order, so that concurrent inserts arrive nearly in
 * order and fill index pages as a native sequence's do (pool.c).  The
 * stream word holds the chunk's number above DISTSEQ_STREAM_SHIFT and the
 * count of slots drawn from it below; a chunk holds at most
 * DISTSEQ_STREAM_MAX_CHUNK slots.  Numbers only grow, over the life of the
 * entry, whatever sequence it carries.
 */
#define DISTSEQ_STREAM_SHIFT		20
#define DISTSEQ_STREAM_MASK			((UINT64CONST(1) << DISTSEQ_STREAM_SHIFT) - 1)
#define DISTSEQ_STREAM_MAX_CHUNK	((int64) DISTSEQ_STREAM_MASK)

/*
 * A chunk of the stream: slots lo .. lo + n - 1, drawn while the stream
 * word carries its number.  owner is the entry's incarnation it was
 * installed for.  Two chunks are kept, by number % 2: the current one and
 * the one before, which a reader may still be looking at.
 */
typedef struct DistseqChunk
{
	uint64		number;
	uint64		owner;
	int64		lo;
	int64		n;
} DistseqChunk;

/*
 * A backend's copy of the chunk it drew from last, good for as long as the
 * stream word carries its number: base is the word with that number and
 * nothing drawn.  n = 0 when there is none.
 */
typedef struct DistseqStreamCache
{
	pg_atomic_uint64 *stream;
	uint64		base;
	int64		lo;
	uint64		n;
} DistseqStreamCache;

/*
 * Draw the next slot of the cached chunk, if it is still the current one and
 * has one left.  The word minus base is the count drawn when the number is
 * the chunk's, and at least 2^DISTSEQ_STREAM_SHIFT, more than any chunk
 * holds, when it is a higher one.  A successful compare-and-swap proves that
 * the word carried the chunk's number throughout, so the copy is still good:
 * a chunk is replaced only by moving the word to a higher number.
 */
static inline bool
distseq_stream_draw(DistseqStreamCache *cache, int64 *slot)
{
	uint64		w = pg_atomic_read_u64(cache->stream);
	uint64		drawn = w - cache->base;

	if (drawn >= cache->n ||
		!pg_atomic_compare_exchange_u64(cache->stream, &w, w + 1))
		return false;
	*slot = cache->lo + (int64) drawn;
	return true;
}

/*
 * One sequence in use.  gen == 0 marks a free entry.  The identity of a
 * sequence is (dboid, relid, gen): the backing relation and a random
 * generation drawn when the sequence was created, so that a sequence
 * dropped and re-created under the same name never matches an old entry.
 */
typedef struct DistseqSeq
{
	/*
	 * What a transaction's first draw reads, in the first 96 bytes: two of
	 * the CPU's 64-byte cache lines, since entries are aligned to
	 * PG_CACHE_LINE_SIZE (128).  With thousands of sequences in use, each
	 * line of it misses the CPU's caches.
	 */
	/* identity, protected by DistseqShared->lock */
	Oid			dboid;
	Oid			relid;
	pg_atomic_uint64 gen;
	pg_atomic_uint32 drop_state;	/* DISTSEQ_DROP_*, see inuse.c */
	pg_atomic_uint32 drops;		/* drops of it that ended, see inuse.c */
	/* the stream, drawn from without a lock (pool.c) */
	pg_atomic_uint64 stream;
	DistseqChunk chunks[2];		/* by number % 2; written under lock */

	/* parameters, protected by DistseqShared->lock */
	char		name[NAMEDATALEN];
	int32		block_size;
	int64		max_value;
	int32		stripes;
	int32		stripe;

	/* the rest is protected by lock */
	LWLock	   *lock;
	ConditionVariable cv;		/* broadcast when a refill ends */
	uint64		incarnation;	/* bumped at every change of identity */
	int64		stream_last;	/* last slot of the last chunk installed in
								 * this incarnation (below its rest once
								 * closed), or PG_INT64_MIN */
	DistseqRange cur;			/* chunks are cut from here first */
	DistseqRange pre;			/* the prefetched segment */
	int			nfrags;
	DistseqRange frags[DISTSEQ_MAX_FRAGMENTS];	/* ranges left below the
												 * stream */
	int64		segment_size;
	TimestampTz last_refill;	/* when the last refill was published */
	double		rate;			/* values per second, smoothed over refills */
	bool		refill_pending; /* a refill is requested or in flight */
	bool		refill_waited;	/* a backend waits for it: served first */
	bool		exhausted;		/* no value is left to reserve */
	bool		accounted;		/* crash losses counted since start */
	uint8		park_state;		/* DISTSEQ_PARK_*, see shmem.c */
	bool		park_requested; /* another sequence wants the entry */
	uint64		last_used;		/* Distseq->clock at the last chunk cut */
	uint32		failures;		/* refills that failed, ever; why the last
								 * one failed is in the ring of failures */

	/*
	 * Totals since the sequence was created: values in the stream's chunk or
	 * handed out, and values given up.  -1 until the worker has read them
	 * from the catalog on the first refill.
	 */
	int64		issued;
	int64		lost;
	int64		refills;
	int64		waits;
	double		wait_ms;
} pg_attribute_aligned(PG_CACHE_LINE_SIZE) DistseqSeq;

/*
 * Ask the CPU for the cache line that holds p, to be read soon: a backend
 * that draws from one of thousands of sequences misses the caches on each
 * line it reads of that sequence's state, and the misses of lines asked
 * for together overlap instead of coming one after the other.
 */
#if defined(__GNUC__) || defined(__clang__)
#define distseq_prefetch(p)		__builtin_prefetch(p)
#else
#define distseq_prefetch(p)		((void) (p))
#endif

/*
 * The compiler may move an entry's fields with instructions that need that
 * alignment: entries live in Distseq->seqs, and copies of one on the stack
 * (which the compiler aligns), never in palloc'd memory.
 */
StaticAssertDecl(sizeof(DistseqSeq) % PG_CACHE_LINE_SIZE == 0,
				 "distseq entries must fill whole cache lines");

/*
 * Does the entry carry this identity?  gen is read first: an entry being
 * recycled clears it before anything else.
 */
static inline bool
distseq_seq_is(DistseqSeq *seq, Oid dboid, Oid relid, uint64 gen)
{
	return pg_atomic_read_u64(&seq->gen) == gen && seq->relid == relid &&
		seq->dboid == dboid;
}

/*
 * Why a refill failed, for the sessions that waited on it: the entry (its
 * index and incarnation) and its count of failures once this one was
 * counted; text in the database's encoding, cut between characters, with
 * no control characters (distseq_clean_text); the detail may be "".  The
 * last DISTSEQ_FAILURES of them, over all entries, are kept.
 */
#define DISTSEQ_FAILURES	64

typedef struct DistseqFailure
{
	int			index;			/* -1: never used */
	uint32		failures;
	uint64		incarnation;
	char		message[256];
	char		detail[512];
} DistseqFailure;

/*
 * park_state: an entry is parked once its worker wrote its pool and totals
 * back to the catalog while no transaction marked it; any database may
 * then take it.  Any use makes it active again.
 */
#define DISTSEQ_PARK_ACTIVE		0
#define DISTSEQ_PARK_WRITING	1	/* the worker is writing it back */
#define DISTSEQ_PARK_PARKED		2

/*
 * drop_state of an entry whose relation a transaction is dropping: a phase,
 * and the pid of the dropper above it, so that a dropper clears only a state
 * that is still its own
 */
#define DISTSEQ_DROP_SCANNING	1	/* reading the marks' user_xact */
#define DISTSEQ_DROP_SCANNED	2	/* waiting for the ones it copied */
#define DISTSEQ_DROP_PHASE(state)	((state) & 3)
#define DISTSEQ_DROP_STATE(phase, pid)	((phase) | ((uint32) (pid) << 2))

/*
 * A sequence's definition, as read from the catalog.  stripes and stripe
 * first: every value is computed from them, and nextval.c keeps the head of
 * a definition next to the rest of what a draw reads.
 */
typedef struct DistseqDef
{
	int32		stripes;
	int32		stripe;
	Oid			relid;
	uint64		gen;
	int32		block_size;
	int64		max_value;
} DistseqDef;

/*
 * Windows, pools and chunks count slots, not values: slot s is the value
 * s * stripes + stripe.  A sequence that is not striped has one stripe, and
 * slots are values.
 */
#define DISTSEQ_VALUE(slot, stripes, stripe) \
	((slot) * (int64) (stripes) + (stripe))

/* windows are all made at once: keep that bounded */
#define DISTSEQ_MAX_OPEN_WINDOWS	1000

/*
 * One of a backend's distseq.backend_marks slots: its marks on the entry the
 * slot holds, for the handshake with DROP described in inuse.c.  A backend
 * has at most one slot per entry.
 *
 * The entry and the transaction a dropper of it waits for share one word, so
 * that a dropper copies an id into the slot only while the slot holds the
 * entry it scans for (compare-and-swap), and the owner gives the slot to
 * another entry, with no id copied, by one write.
 */
typedef struct DistseqMarks
{
	pg_atomic_uint64 held;		/* DISTSEQ_HELD(entry, waited_xact): the
								 * index in Distseq->seqs, or -1, and the
								 * user_xact that a dropper waits for */
	LocalTransactionId user_xact;	/* last transaction of ours using it
									 * without a lock */
} DistseqMarks;

/* The memory formula (README.md) counts 16 bytes a slot: native atomics */
StaticAssertDecl(sizeof(DistseqMarks) == 16,
				 "a slot of marks is not 16 bytes");

#define DISTSEQ_HELD(entry, waited_xact) \
	(((uint64) (uint32) (entry) << 32) | (uint32) (waited_xact))
#define DISTSEQ_HELD_ENTRY(held)	((int32) (uint32) ((held) >> 32))
#define DISTSEQ_HELD_WAITED(held)	((LocalTransactionId) (uint32) (held))
/* a slot that holds no entry */
#define DISTSEQ_HELD_FREE	DISTSEQ_HELD(-1, InvalidLocalTransactionId)

/* A backend that uses distseq */
typedef struct DistseqBackend
{
	int			pid;			/* 0 when the slot is not attached */
	Oid			dboid;
} DistseqBackend;

/*
 * How the worker answered a request (an agent pass, a membership change):
 * elevel 0, WARNING (done, with a reservation) or ERROR, and the text,
 * cleaned and cut where it enters (distseq_clean_text).
 */
typedef struct DistseqWorkerReply
{
	int			elevel;
	int			sqlstate;
	char		message[256];
	char		detail[512];
	char		hint[160];
} DistseqWorkerReply;

/*
 * What a backend asks its database's worker for: an agent pass
 * (distseq_maintain()) or a change of membership (distseq_add_peer(),
 * distseq_remove_peer()).  Both may be outstanding at once.
 */
typedef enum DistseqRequestKind
{
	DISTSEQ_REQUEST_AGENT,
	DISTSEQ_REQUEST_CHANGE,
	DISTSEQ_NREQUESTS
} DistseqRequestKind;

/*
 * The requests of one kind: tickets handed out, answered up to "done",
 * and the reply to the last one answered.  Agent passes asked for
 * meanwhile share one pass; a change is posted only once the one before
 * it was answered, and a WARNING reply to it means decided, not active
 * everywhere yet.
 */
typedef struct DistseqRequest
{
	uint64		requested;
	uint64		done;
	DistseqWorkerReply reply;
} DistseqRequest;

/* What a change of membership asks for: op 'a' (add) or 'r' (remove) */
typedef struct DistseqChangeArgs
{
	char		op;
	char		server[NAMEDATALEN];
	Oid			userid;
} DistseqChangeArgs;

/* The refill worker of one database */
typedef struct DistseqDbWorker
{
	/*
	 * Waits on the slot; set up once, never cleared: a slot handed to
	 * another database may still have a waiter that is about to leave
	 */
	ConditionVariable agent_cv;
	Oid			dboid;			/* InvalidOid = free */
	bool		registered;		/* a worker is registered with postmaster */
	bool		stop;			/* exit for good, the database is gone */
	uint8		connect_failures;	/* workers that failed to connect, in
									 * a row */
	int			pid;			/* running worker, 0 if none */
	int			dropper;		/* pid of a backend dropping the database:
								 * the worker stays out until it is done */
	Latch	   *latch;
	uint64		pokes;			/* times it was woken (distseq_mailbox_poke) */

	/* what backends asked for, by DistseqRequestKind (mailbox.c) */
	DistseqRequest requests[DISTSEQ_NREQUESTS];
	DistseqChangeArgs change;	/* of the last change posted */
} DistseqDbWorker;

typedef struct DistseqShared
{
	LWLock	   *lock;
	pg_atomic_uint64 clock;		/* ticks at every chunk cut: LRU order */
	pg_atomic_uint32 refill_waits;	/* ticks when a backend begins to wait
									 * for a refill (refill.c) */
	ConditionVariable entry_cv; /* broadcast when an entry is parked */
	DistseqDbWorker *workers;	/* max_worker_processes of them */
	DistseqSeq *seqs;			/* max_sequences of them */
	DistseqBackend *backends;	/* MaxBackends of them */
	DistseqMarks *marks;		/* MaxBackends * backend_marks of them */
	LWLock	   *failure_lock;
	uint64		failure_next;	/* failures recorded, ever */
	DistseqFailure *failure_ring;	/* DISTSEQ_FAILURES of them */
} DistseqShared;

/* src/distseq.c */
extern int	distseq_max_sequences;
extern int	distseq_backend_marks;
extern int	distseq_default_block_size;
extern int	distseq_prefetch_threshold;
extern int	distseq_refill_timeout;
extern int	distseq_segment_lifetime;
extern int	distseq_remote_timeout;
extern int	distseq_agent_interval;
extern int	distseq_standby_ack_mode;
extern int	distseq_standby_ack_timeout;
extern int	distseq_worker_idle_timeout;

/* distseq.standby_ack */
#define DISTSEQ_STANDBY_ACK_OFF		0
#define DISTSEQ_STANDBY_ACK_ALL		1

/* src/standby.c */
extern void distseq_standby_ack(XLogRecPtr lsn);
extern void distseq_standby_ack_at_commit(void);

/* src/shmem.c */
extern DistseqShared *Distseq;
extern void distseq_shmem_init(void);
extern void distseq_check_loaded(void);
extern DistseqSeq *distseq_seq_attach(Oid relid, uint64 gen, const char *name,
									  const DistseqDef *def, uint64 *incarnation);
extern void distseq_seq_forget(Oid relid);
extern void distseq_forget_database(Oid dboid);
extern DistseqMarks *distseq_my_marks(DistseqSeq *seq);
extern bool distseq_seq_held(DistseqSeq *seq);
extern bool *distseq_held_entries(void);

/* The entry a slot of marks holds, or -1 */
static inline int32
distseq_marks_entry(DistseqMarks *marks)
{
	return DISTSEQ_HELD_ENTRY(pg_atomic_read_u64(&marks->held));
}

/* The transaction that a dropper of the slot's entry waits for */
static inline LocalTransactionId
distseq_marks_waited(DistseqMarks *marks)
{
	return DISTSEQ_HELD_WAITED(pg_atomic_read_u64(&marks->held));
}

/* Does this backend's slot of marks hold the entry seq? */
static inline bool
distseq_marks_on(DistseqMarks *marks, const DistseqSeq *seq)
{
	return marks != NULL &&
		distseq_marks_entry(marks) == (int32) (seq - Distseq->seqs);
}

/* src/inuse.c */
extern bool distseq_use_unlocked(DistseqSeq *seq, DistseqMarks *marks,
								 Oid relid, uint64 gen, uint32 *drops_seen);
extern bool distseq_used_unlocked(DistseqSeq *seq, DistseqMarks *marks);
extern uint32 distseq_drops(DistseqSeq *seq);
extern void distseq_drop_state_clear(DistseqSeq *seq, Oid relid, uint64 gen);
extern void distseq_inuse_wait(Oid relid);

/* src/pool.c */
extern bool distseq_pool_draw(DistseqSeq *seq, uint64 incarnation, int64 after,
							  DistseqStreamCache *cache, int64 *slot);
extern DistseqRange distseq_pool_stream_rest(DistseqSeq *seq);
extern DistseqRange distseq_pool_close(DistseqSeq *seq);
extern void distseq_pool_publish(DistseqSeq *seq, DistseqRange range);
extern void distseq_pool_failed(DistseqSeq *seq, const char *message,
								const char *detail);
extern void distseq_pool_take_all(DistseqSeq *seq, DistseqRange *ranges,
								  int *nranges);

/* src/remote.c */
typedef struct RemoteConn RemoteConn;
typedef struct DistseqRemoteResult DistseqRemoteResult;
extern RemoteConn *distseq_remote_get(Oid serverid, Oid userid);
extern RemoteConn *distseq_remote_lookup(Oid serverid, Oid userid);
extern void distseq_remote_open(RemoteConn *rc);
extern DistseqRemoteResult *distseq_remote_query(RemoteConn *rc, const char *sql,
												 int nparams, const char *const *params,
												 const char *columns, int nrows);
extern void distseq_remote_command(RemoteConn *rc, const char *sql, int nparams,
								   const char *const *params);
extern int	distseq_remote_ntuples(const DistseqRemoteResult *r);
extern bool distseq_remote_isnull(const DistseqRemoteResult *r, int row, int col);
extern int64 distseq_remote_int8(const DistseqRemoteResult *r, int row, int col);
extern bool distseq_remote_bool(const DistseqRemoteResult *r, int row, int col);
extern const char *distseq_remote_text(const DistseqRemoteResult *r, int row, int col);
extern const int64 *distseq_remote_int8s(const DistseqRemoteResult *r, int row, int col,
										 int *n);
extern const char *distseq_remote_schema(RemoteConn *rc);
extern void distseq_remote_close_all(void);
extern bool distseq_remote_try(void (*fn) (void *), void *arg, char **error);
extern bool distseq_remote_unanswered(int sqlerrcode);

/* src/rest.c */
extern bool distseq_remote_resting(Oid serverid, const char **error);
extern void distseq_remote_rest(Oid serverid, const char *error);
extern void distseq_remote_wake_all(void);

/* src/answer.c (struct pg_result is libpq's PGresult) */
struct pg_result;
extern DistseqRemoteResult *distseq_remote_parse(const char *peer, struct pg_result *res,
												 const char *sql, const char *columns,
												 int nrows);

/* src/member.c */
typedef struct DistseqNodeState
{
	int64		node_id;
	int64		epoch;
	int64		epoch_id;
	int			nmembers;
	int64	   *members;
	bool		pending;		/* in a change not active here yet */
	int64		proposer;		/* ... proposed by this node */
} DistseqNodeState;

/* A sequence's high-water mark, as a change collects them */
typedef struct DistseqMark
{
	char	   *name;
	int64		hwm;
} DistseqMark;

/* A change from one membership to the next, as distseq_change records it */
typedef struct DistseqChange
{
	int64		epoch;
	int64		epoch_id;
	int64		prev_epoch;
	int64		prev_epoch_id;
	int			nmembers;
	int64	   *members;
	int			nprev;
	int64	   *prev;
} DistseqChange;

/* What a node answers a prepare with (distseq_peer_prepare) */
typedef struct DistseqPromise
{
	char		answer;			/* 'p'romise, 'd'ecided, 'r'efused, 'e'lsewhere */
	int64		promised_round;
	int64		promised_node;
	int64		accepted_round;
	int64		accepted_node;
	bool		pending;
	int64		epoch;			/* the change it took, or the membership after */
	int64		epoch_id;
	int			nmembers;
	int64	   *members;
} DistseqPromise;

extern int	distseq_majority(int n);
extern bool distseq_is_member(DistseqNodeState *st, int64 node_id);
extern char *distseq_hwm_expr(const char *schema);
extern bool distseq_has_peers(const char *schema);
extern void distseq_not_member_error(const char *schema, DistseqNodeState *st);
extern void distseq_check_in_group(const char *schema);
extern void distseq_node_verify(const char *schema);
extern void distseq_node_state(const char *schema, DistseqNodeState *state);
extern bool distseq_member_cas(const char *schema, Datum name, int64 epoch,
							   int64 epoch_id, int64 expected, int64 new_hwm);
extern void distseq_member_lock_changes(const char *schema);
extern bool distseq_member_settles(void);
extern void distseq_member_check_changes(void);
extern void distseq_member_move(const char *schema, int64 epoch, int64 epoch_id,
								int64 new_epoch, int64 new_epoch_id, Datum members,
								int64 proposer, int64 node_id, bool join);
extern bool distseq_member_revert(const char *schema, int64 epoch, int64 epoch_id);
extern List *distseq_member_marks(const char *schema, int64 epoch, int64 epoch_id,
								  MemoryContext cxt);
extern void distseq_member_activate(const char *schema, Datum *args);
extern void distseq_member_promise(const char *schema, int64 epoch, int64 epoch_id,
								   int64 round, int64 settler, int64 node_id,
								   DistseqPromise *p);
extern bool distseq_member_accept(const char *schema, int64 epoch, int64 epoch_id,
								  int64 round, int64 settler, int64 new_epoch,
								  int64 new_epoch_id, Datum members, int64 node_id);
extern void distseq_member_changes_finished(const char *schema);
extern void distseq_member_record_change(const char *schema, const DistseqChange *c);

/* src/client.c */
typedef struct DistseqPeer
{
	int64		node_id;
	Oid			serverid;
	Oid			added_by;
	char		name[NAMEDATALEN];
} DistseqPeer;

extern DistseqPeer *distseq_client_of(const char *schema, int64 node_id);
extern DistseqPeer *distseq_client_or_error(const char *schema, int64 node_id,
											char **error);

/* one function per call of a peer */
extern bool distseq_call_join(DistseqPeer *peer, const DistseqChange *c, int64 proposer,
							  int64 node_id, char **error);
extern bool distseq_call_move(DistseqPeer *peer, const DistseqChange *c, int64 proposer,
							  int64 node_id, char **error);
extern bool distseq_call_revert(DistseqPeer *peer, int64 epoch, int64 epoch_id,
								char **error);
extern bool distseq_call_marks(DistseqPeer *peer, int64 epoch, int64 epoch_id,
							   List **marks, char **error);
extern bool distseq_call_activate(DistseqPeer *peer, const DistseqChange *c, Datum names,
								  Datum hwms, int64 node_id, char **error);
extern bool distseq_call_decided(DistseqPeer *peer, int64 epoch, int64 epoch_id,
								 int64 proposer, bool *decided, char **error);
extern bool distseq_call_epoch(DistseqPeer *peer, int64 *epoch, char **error);
extern bool distseq_call_prepare(DistseqPeer *peer, int64 epoch, int64 epoch_id,
								 int64 round, int64 settler, int64 node_id,
								 DistseqPromise *p, char **error);
extern bool distseq_call_accept(DistseqPeer *peer, int64 epoch, int64 epoch_id,
								int64 round, int64 settler, const DistseqChange *c,
								int64 node_id, bool *accepted, char **error);
extern void distseq_call_candidate(DistseqPeer *peer, DistseqNodeState *st,
								   bool *has_windows);

/* How a member sees the group, and whether it has a sequence */
typedef struct DistseqMemberView
{
	bool		has_sequence;
	int64		epoch;
	int64		epoch_id;
	int			nmembers;
	const int64 *members;
	bool		active;			/* said it is not pending (version 1.3 says nothing) */
} DistseqMemberView;

extern bool distseq_call_view(DistseqPeer *peer, const char *name, DistseqMemberView *v,
							  char **error);
extern bool distseq_call_hwm(DistseqPeer *peer, const char *name, bool *has_hwm,
							 int64 *hwm, char **error);
extern bool distseq_call_create(DistseqPeer *peer, const char *name, int32 block_size,
								int64 window_size, int64 start_value, int64 max_value,
								int32 min_open, int64 top, char **error);
extern bool distseq_call_cas(DistseqPeer *peer, const char *name, int64 epoch,
							 int64 epoch_id, int64 expected, int64 new_hwm, bool *won,
							 char **error);
extern bool distseq_call_setval(DistseqPeer *peer, const char *name, int64 value,
								bool apply, bool *has_top, int64 *top, char **error);
extern bool distseq_call_alter(DistseqPeer *peer, const char *name, int32 block_size,
							   int64 window_size, int64 max_value, int32 min_open,
							   bool apply, bool *has_top, int64 *top, char **error);

/* How a peer is doing, for distseq_peers */
typedef struct DistseqProbe
{
	int64		epoch;
	int32		members;
	bool		has_windows;	/* false when the peer has no sequence */
	int64		open_windows;
	Datum		runway;			/* numeric, or 0 for NULL */
	bool		has_pending;	/* false from version 1.3 */
	bool		pending;
} DistseqProbe;

extern bool distseq_call_probe(DistseqPeer *peer, DistseqProbe *p, char **error);

/* src/change.c */
extern void distseq_change_resume(void);
extern bool distseq_change_learn(const char *schema, DistseqNodeState *st, int64 epoch,
								 int64 epoch_id, const int64 *members, int nmembers,
								 int64 informant);
extern char *distseq_change_run(char op, const char *server_name, Oid userid,
								MemoryContext cxt);

/* src/settle.c */
extern bool distseq_settle_needed(const char *schema, DistseqNodeState *st);
extern char *distseq_settle_run(MemoryContext cxt);

/* src/redefine.c */
extern Datum distseq_redefine_peer(FunctionCallInfo fcinfo, bool alter);

/* src/agent.c */
typedef struct DistseqAgentResult
{
	char	   *sequence_name;
	int			windows_created;
	int64		open_windows;
} DistseqAgentResult;

/* a sequence the agent failed for (NULL: the whole pass), and why */
typedef struct DistseqAgentFailure
{
	char	   *sequence_name;
	ErrorData  *error;
} DistseqAgentFailure;

extern List *distseq_agent_run(bool afresh, const char *focus);

/* src/message.c */
extern char *distseq_clean_text(const char *src, int size);
extern char *distseq_database_name(Oid dboid);
extern ErrorData *distseq_worker_catch(MemoryContext cxt);
extern void distseq_worker_log(const char *detail, const char *fmt,...) pg_attribute_printf(2, 3);

/* src/mailbox.c */
extern DistseqDbWorker *MyDistseqWorker;
extern DistseqDbWorker *distseq_mailbox_find(Oid dboid);
extern DistseqDbWorker *distseq_mailbox_slot(Oid dboid);
extern void distseq_mailbox_poke(DistseqDbWorker *w);
extern bool distseq_mailbox_pending(DistseqDbWorker *w);
extern void distseq_worker_wake(Oid dboid);
extern void distseq_worker_agent_pass(Oid dboid);
extern void distseq_worker_change(Oid dboid, char op, const char *server_name,
								  Oid userid);
extern bool distseq_mailbox_asked(DistseqRequestKind kind, uint64 *ticket,
								  DistseqChangeArgs *args);
extern void distseq_mailbox_answer(DistseqRequestKind kind, uint64 ticket,
								   int elevel, int sqlstate, const char *message,
								   const char *detail, const char *hint);
extern bool distseq_worker_stopping(void);
extern void distseq_set_between_steps(void (*fn) (void));
extern void distseq_between_steps(void);

/* src/sources.c */
/* Where a sequence's refills come from: its own windows if no sources */
typedef struct RefillSources
{
	List	   *sources;		/* a server it draws from, in the
								 * catalog's order */
	Oid			owner;
	int64		start_value;
	/* the group the sequence drew from before: grows with what answers */
	int64	   *nodes;
	int			nnodes;
} RefillSources;

extern bool distseq_sources_read(Oid relid, MemoryContext cxt, RefillSources *src,
								 ErrorData **error);
extern bool distseq_sources_reserve(DistseqSeq *seq, Oid relid, int64 count,
									RefillSources *src, MemoryContext cxt,
									DistseqRange *r, char **failure);
extern DistseqSeq *distseq_sources_waiting(void);

/* src/refill.c */
extern void distseq_refill_serve(void);
extern void distseq_refill_between_steps(void);
extern void distseq_refill_run_agent(void);
extern void distseq_refill_agent_soon(void);
extern bool distseq_refill_has_peers(void);
extern TimestampTz distseq_refill_last_work(void);
extern bool distseq_refill_serve_again(void);

/* src/worker.c */
extern void distseq_worker_drop_database(Oid dboid);
extern PGDLLEXPORT void distseq_worker_main(Datum main_arg);

/* src/spi.c */

/*
 * The catalog of the installed version: a newer library works with the
 * catalog of an older version until ALTER EXTENSION distseq UPDATE.
 */
typedef struct DistseqCatalog
{
	const char *schema;			/* quoted schema of the catalog tables */
	bool		origin;			/* 1.1: where each sequence was created */
	bool		stripes;		/* 1.2: striped sequences */
	bool		peers;			/* 1.3: peers, servers, high-water marks */
	bool		changes;		/* 1.4: two-phase membership changes,
								 * server_nodes, made_windows */
	bool		owned_by;		/* 1.7: sequences owned by a column */
	bool		ballots;		/* 1.7: any member settles a lost
								 * proposer's change */
	bool		redefine_members;	/* 1.7: setval and alter on every
									 * member */
} DistseqCatalog;

typedef struct DistseqSpiContext
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
} DistseqSpiContext;

extern int	distseq_pin_search_path(void);
extern void distseq_unpin_search_path(int level);
extern void distseq_spi_enter_catalog(DistseqSpiContext *cxt);
extern void distseq_spi_leave_catalog(DistseqSpiContext *cxt);
extern DistseqCatalog distseq_catalog(void);
extern Oid distseq_catalog_relid(const char *relname);

/* where distseq_catalog_open() found a catalog table last */
typedef struct DistseqTableCache
{
	Oid			relid;
	Oid			nspid;
} DistseqTableCache;

extern Relation distseq_catalog_open(const char *relname,
									 DistseqTableCache *cache,
									 LOCKMODE lockmode);
extern const char *distseq_catalog_schema(void);
extern const char *distseq_extension_schema(void);
extern TimeLineID distseq_timeline(void);
extern void distseq_check_primary(const char *funcname);
extern void distseq_check_writable(const char *funcname);
extern SPIPlanPtr distseq_spi_plan(const char *sql, int nargs, Oid *types);
extern uint64 distseq_spi_exec(const char *sql, int nargs, Oid *types,
							   Datum *values, int expect);
extern uint64 distseq_spi_exec_once(const char *sql, int nargs, Oid *types,
									Datum *values, int expect);
extern int64 distseq_spi_int8(int row, int col);
extern void distseq_spi_connect(void);
extern Datum distseq_int8_array(int64 *vals, int n);
extern int64 *distseq_int8_values(Datum d, int *n);
extern void distseq_xact_begin(void);
extern void distseq_xact_commit(void);

/* src/rows.c */
typedef struct DistseqRows DistseqRows;
extern AttrNumber distseq_column(TupleDesc desc, const char *column);
extern DistseqRows *distseq_rows_begin(Relation rel);
extern void distseq_rows_set(DistseqRows *rows, const char *column, Oid type,
							 Datum value);
extern void distseq_rows_insert(DistseqRows *rows);
extern void distseq_rows_end(DistseqRows *rows);

/* src/windows.c */
extern void distseq_slots(int64 start_value, int64 max_value, int32 stripes,
						  int32 stripe, int64 *first, int64 *last);
extern int64 distseq_room(int64 top, int64 last, int64 size);
extern void distseq_note_windows(const char *schema, bool changes);

/* A sequence as the reservation needs it: windows count slots */
typedef struct DistseqWindowsSeq
{
	DistseqCatalog cat;
	char	   *name;
	int32		stripes;
	int64		window_size;
	int64		min_open;
	int64		first;			/* the first slot */
	int64		last;			/* the last slot */
	bool		moved;			/* restored or moved here: rejoin first */
} DistseqWindowsSeq;

extern bool distseq_windows_ensure(const DistseqCatalog *cat, const char *name,
								   int32 stripes, int64 window_size, int64 min_open,
								   int64 start_value, int64 max_value);

/* The first windows of a sequence, cut before its catalog row is inserted */
typedef struct DistseqFirstWindows
{
	int			n;
	int64	   *starts;
	int64	   *ends;
	int64		top;			/* the end of the last, or the first slot */
} DistseqFirstWindows;

extern bool distseq_windows_first(const DistseqCatalog *cat, int32 stripes,
								  int64 window_size, int64 min_open,
								  int64 first_slot, int64 last_slot,
								  DistseqFirstWindows *w);
extern void distseq_windows_first_insert(const DistseqCatalog *cat,
										 const char *name, int32 stripes,
										 DistseqFirstWindows *w);
extern DistseqRange distseq_windows_reserve(const DistseqWindowsSeq *seq,
											int64 count, int64 *skipped);
extern DistseqRange distseq_catalog_reserve(Oid relid, uint64 gen, int64 count,
											bool account, int64 *issued,
											int64 *lost, int64 *skipped,
											bool *need_windows);
extern int64 distseq_catalog_release(Oid relid, uint64 gen,
									 DistseqRange *ranges, int nranges,
									 int64 issued, int64 lost);
extern void distseq_windows_record_drawn(Oid relid, uint64 gen, int64 first,
										 int64 top);

/* src/catalog.c */
extern bool distseq_catalog_lookup(const char *name, DistseqDef *def);
extern bool distseq_catalog_lookup_latest(const char *name, DistseqDef *def);
extern void distseq_catalog_create(const char *name, Oid owner,
								   int32 block_size, int64 window_size,
								   int64 start_value, int64 max_value,
								   int32 min_open, int32 stripes, int32 stripe,
								   Datum servers);
extern List *distseq_catalog_servers(Oid relid, Oid *owner, int64 *start_value,
									 int64 **nodes, int *nnodes, MemoryContext cxt);
extern void distseq_catalog_set_server_nodes(Oid relid, int64 *nodes, int nnodes);
extern void distseq_catalog_column_bounds(Oid relid, const char *column,
										  int64 *max_in_use, int64 *type_max);

/* src/ownedby.c */
extern Oid	distseq_ownedby_check_table(Oid relid);
extern Oid	distseq_ownedby_column(List *names, AttrNumber *attnum, Oid *owner);
extern void distseq_ownedby_link(Oid seqid, Oid relid, AttrNumber attnum);
extern bool distseq_ownedby_utility(Node *stmt);
extern void distseq_ownedby_drop(Oid relid, int dropflags);

/* src/nametab.c */
typedef struct DistseqNametab DistseqNametab;

/*
 * Is a name of NAMEDATALEN bytes, zero-padded, these len bytes?  Names are
 * short: no call to memcmp.
 */
static inline bool
distseq_name_is(const char *known, const char *name, size_t len)
{
	if (len >= NAMEDATALEN || known[len] != '\0')
		return false;
	for (size_t i = 0; i < len; i++)
	{
		if (known[i] != name[i])
			return false;
	}
	return true;
}

extern DistseqNametab *distseq_nametab_create(const char *what, Size rec_size,
											  Size hot_size,
											  int names_expected);
extern void *distseq_nametab_enter(DistseqNametab *tab, const char *name,
								   int len, bool *found);
extern void distseq_nametab_remove(DistseqNametab *tab, void *rec);
extern void *distseq_nametab_next(DistseqNametab *tab, uint32 *pos);

/* src/nextval.c */
extern void distseq_check_name(const char *name);
extern char *distseq_name_arg(FunctionCallInfo fcinfo);
extern void distseq_local_discard(void);
extern void distseq_local_reset(Oid relid);

/* src/increate.c */
typedef void (*DistseqForgetFn) (Oid relid, uint64 gen);

extern void distseq_created_on_forget(DistseqForgetFn forget);
extern void distseq_created_note(Oid relid, uint64 gen, int64 first, int64 last,
								 bool local);
extern bool distseq_created_here(Oid relid, uint64 gen);
extern DistseqRange distseq_created_block(const char *name, Oid relid,
										  uint64 gen, int32 block_size,
										  int64 max_value);


#endif							/* DISTSEQ_H */
