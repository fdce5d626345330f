/*-------------------------------------------------------------------------
 *
 * nextval.c
 *	  distseq_nextval(), distseq_currval() and distseq_lastval(): the hot
 *	  path and the backend-local cache that resolves a sequence name once.
 *
 * A call site keeps a pointer to its LocalSeq in fn_extra, tagged when the
 * name is a constant of the call's own expression: then the pointer is
 * trusted as it is.  Anywhere else -- a PL/pgSQL variable, a parameter, a
 * column -- the name may change from one call to the next even within one
 * execution of the expression (PL/pgSQL evaluates a simple expression again
 * and again with new values of its variables), so it is compared on every
 * call and a different name is looked up, checked and attached like any
 * other.  A call served from the chunk of the sequence's stream that this
 * backend drew from last swaps one word in shared memory and returns: no
 * lock, no lookup, no syscall (pool.c).
 *
 * Once per transaction a sequence is made safe from a concurrent DROP: the
 * first time a backend uses it, by AccessShareLock on its backing sequence
 * relation (as native sequences are), and from then on by the lock-free
 * handshake of inuse.c, which makes a DROP wait for us just the same -- for
 * as many sequences in one transaction as the backend has slots of marks
 * (distseq.backend_marks); the others take the lock again.  The rest of the
 * per-transaction work is cached across transactions:
 *
 * - the name: executing a statement again builds a new FmgrInfo, but the
 *	 expression it points to is the same; a small table keyed by it finds
 *	 the LocalSeq without hashing the name (the name is still compared).
 *	 Other names are looked up in a table (nametab.c) laid out for a
 *	 backend that draws from thousands of sequences: a draw from one it
 *	 has not used in a while misses the CPU's caches on every line it
 *	 reads;
 * - the definition: a relcache invalidation of the backing relation (DROP,
 *	 GRANT, REVOKE, ALTER ... OWNER) marks it stale; the lock processes
 *	 invalidations, and the handshake does when a drop of the sequence has
 *	 ended since it last did, so after them a definition still marked valid
 *	 belongs to a relation that exists;
 * - the privilege check: its result for one role, forgotten on that same
 *	 relcache invalidation and on any change of role membership, role
 *	 attributes or the database's owner (syscache invalidations of
 *	 pg_auth_members, pg_authid and pg_database, as acl.c does for its own
 *	 role cache).  A transaction sees the changes committed before it began
 *	 (its start processes invalidations); a native sequence sees those
 *	 committed before its first use in the transaction.  GetUserId() is
 *	 compared on every call, which covers SET ROLE and SECURITY DEFINER
 *	 functions.
 *
 * A sequence that the current transaction created is not in the catalog
 * the refill worker sees: its values come from blocks that increate.c cuts
 * into the LocalSeq itself, and no entry in shared memory is used for it
 * until the creation has committed.
 *
 * The file is longer than the others (about 900 lines): the fast path, the
 * cache it reads and the slow paths that fill it share the LocalSeq, its
 * table and the call-site hints, all static here so that the compiler
 * sees the whole fast path at once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/xact.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

/*
 * A record of nametab.c, which starts it on a 64-byte line.  A statement's
 * first draw from a sequence reads the name and the next two lines, and
 * nothing else of it: with thousands of sequences in use, each draw from
 * one of them misses the CPU's caches on every line of it that it touches.
 */
typedef struct LocalSeq
{
	char		name[NAMEDATALEN];	/* the key, zero-padded */

	/* what the first draw in a transaction checks */
	bool		valid;			/* relid and gen are current */
	bool		creating;		/* this transaction creates the sequence */
	Oid			relid;
	uint32		drops_seen;		/* ended drops of seq our relcache knows */
	LocalTransactionId ready_lxid;	/* locked and checked in this xact */
	Oid			ready_user;		/* ... for this role */
	Oid			acl_user;		/* passed the privilege check, or invalid */
	AclMode		acl_mode;		/* ... for this mode */
	uint64		gen;
	DistseqSeq *seq;			/* the entry, unless creating */
	uint64		incarnation;	/* ... the incarnation of it we attached */
	DistseqMarks *marks;		/* this backend's slot of marks it had
								 * last, valid while it holds seq (inuse.c) */

	/* what every draw reads or writes; def begins with stripes, stripe */
	DistseqStreamCache stream;	/* the chunk we drew from last, if this
								 * transaction did */
	uint64		last_gen;		/* generation of last, 0 if none */
	int64		last;			/* slot of the last value this session got */
	DistseqDef	def;

	DistseqRange xact_block;	/* drawn from while creating (increate.c) */
	uint64		xact_gen;		/* ... cut for this generation */
} LocalSeq;

StaticAssertDecl(offsetof(LocalSeq, valid) == NAMEDATALEN &&
				 offsetof(LocalSeq, stream) == NAMEDATALEN + 64 &&
				 offsetof(LocalSeq, def.stripe) + sizeof(int32) <=
				 NAMEDATALEN + 128,
				 "a first draw must read three lines of a LocalSeq");

/*
 * fn_extra: the LocalSeq a call site used last, with SITE_CONSTANT set when
 * its name is a constant of the site's expression.  LocalSeqs are aligned,
 * so the low bit is free.
 */
#define SITE_CONSTANT	((uintptr_t) 1)
#define SITE_LS(extra)	((LocalSeq *) ((uintptr_t) (extra) & ~SITE_CONSTANT))
#define SITE_IS_CONSTANT(extra) (((uintptr_t) (extra) & SITE_CONSTANT) != 0)

/*
 * The LocalSeq an expression resolved to last time, so that a statement
 * executed again finds it without hashing the name.  The expression may
 * have been freed and its memory reused by another one, so it is only a
 * hint: the name is always compared, and nothing else is taken from it.
 * The hint keeps a copy of the name, so that a different name is told
 * without reading the LocalSeq.  That copy is compared instead of the
 * LocalSeq's own name, so the hint must go when the LocalSeq does, before
 * its memory is freed or holds another name: local_not_found(), the only
 * place that removes a LocalSeq, clears the hints that point to it first.
 */
typedef struct SiteHint
{
	const Node *expr;
	LocalSeq   *ls;
	char		name[NAMEDATALEN];	/* ls->name */
} SiteHint;

#define SITE_HINTS 16			/* a power of 2 */

static DistseqNametab *local_seqs = NULL;
static SiteHint site_hints[SITE_HINTS];

/* the stream of no entry: its chunk 0 is empty */
static pg_atomic_uint64 no_stream;

/*
 * The sequence this session drew from last, for distseq_lastval(): its
 * entry holds the value.  Set after every successful draw, cleared by
 * DISCARD.  LocalSeqs that ever had a value are never removed.
 */
static LocalSeq *last_used = NULL;

/*
 * The relation of the sequence this transaction gave a new generation
 * (distseq_setval), which it must not draw from: the refill worker could not
 * reserve for that generation before our commit, and would wait for our row
 * lock while we wait for it.
 */
static LocalTransactionId reset_lxid = InvalidLocalTransactionId;
static Oid	reset_relid = InvalidOid;

/* bumped by every invalidation that forgets a privilege check */
static uint64 acl_resets = 0;

/* hash value of our pg_database row, to ignore changes of other databases */
static uint32 my_db_hash;

static void
local_invalidate(Datum arg, Oid relid)
{
	uint32		pos = 0;
	LocalSeq   *ls;

	while ((ls = distseq_nametab_next(local_seqs, &pos)) != NULL)
	{
		if (!OidIsValid(relid) || ls->relid == relid)
		{
			ls->valid = false;
			ls->ready_lxid = InvalidLocalTransactionId;
			ls->acl_user = InvalidOid;
			acl_resets++;
		}
	}
}

/*
 * A role's privileges may have changed: forget every privilege check, and
 * check again even within the current transaction, as native sequences do.
 */
static void
local_invalidate_roles(Datum arg, int cacheid, uint32 hashvalue)
{
	uint32		pos = 0;
	LocalSeq   *ls;

	/* pg_database matters only for our database's owner (pg_database_owner) */
	if (cacheid == DATABASEOID && hashvalue != 0 && hashvalue != my_db_hash)
		return;

	acl_resets++;
	while ((ls = distseq_nametab_next(local_seqs, &pos)) != NULL)
	{
		ls->ready_lxid = InvalidLocalTransactionId;
		ls->acl_user = InvalidOid;
	}
}

/*
 * A prepared transaction outlives this backend's transaction id, which is
 * what a DROP waits for: lock every sequence used without a lock, so that
 * the prepared transaction holds the lock, as it would with a native
 * sequence.  A DROP already waiting for us holds its lock: give up rather
 * than deadlock with it.
 */
static pg_noinline void
local_lock_for_prepare(void)
{
	uint32		pos = 0;
	LocalSeq   *ls;

	while ((ls = distseq_nametab_next(local_seqs, &pos)) != NULL)
	{
		if (ls->seq == NULL || !distseq_used_unlocked(ls->seq, ls->marks) ||
			ConditionalLockRelationOid(ls->relid, AccessShareLock))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("cannot PREPARE a transaction that used distseq sequence \"%s\" while it is being dropped",
						ls->name)));
	}
}

/*
 * DISCARD SEQUENCES or DISCARD ALL: forget the last values, as native
 * sequences do.
 */
void
distseq_local_discard(void)
{
	uint32		pos = 0;
	LocalSeq   *ls;

	if (local_seqs == NULL)
		return;
	while ((ls = distseq_nametab_next(local_seqs, &pos)) != NULL)
		ls->last_gen = 0;
	last_used = NULL;
}

/*
 * The subtransaction that created this sequence was rolled back: it exists
 * no more, whatever is left of its block must not be handed out, and
 * nextval must look for it again to say so.  Called by increate.c, which
 * knows the creations and is handed this function (it calls no file above
 * it).
 */
static void
local_forget(Oid relid, uint64 gen)
{
	uint32		pos = 0;
	LocalSeq   *ls;

	if (local_seqs == NULL)
		return;
	while ((ls = distseq_nametab_next(local_seqs, &pos)) != NULL)
	{
		if (ls->relid != relid || ls->gen != gen)
			continue;
		ls->valid = false;
		ls->ready_lxid = InvalidLocalTransactionId;
		ls->xact_block.lo = ls->xact_block.hi = 0;
	}
}

/*
 * This transaction gives the sequence of relation relid a new generation:
 * forget what we know of it, so that this backend reads its definition again
 * before it uses it -- which it refuses until the end of the transaction.
 */
void
distseq_local_reset(Oid relid)
{
	reset_lxid = DISTSEQ_MY_LXID;
	reset_relid = relid;
	if (local_seqs != NULL)
		local_invalidate((Datum) 0, relid);
}

/* Called at every transaction's end: keep it cheap */
static void
local_xact(XactEvent event, void *arg)
{
	if (event == XACT_EVENT_PRE_PREPARE)
		local_lock_for_prepare();
}

/* The sequence name a SQL function got as its first argument, checked */
char *
distseq_name_arg(FunctionCallInfo fcinfo)
{
	char	   *name;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("distseq sequence name must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	distseq_check_name(name);
	return name;
}

/* Reject names that cannot be a distseq sequence */
void
distseq_check_name(const char *name)
{
	if (name[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_NAME),
				 errmsg("distseq sequence name must not be empty")));
	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("distseq sequence name \"%.*s...\" is too long",
						pg_mbcliplen(name, strlen(name), NAMEDATALEN - 1), name),
				 errdetail("Names are limited to %d bytes.", NAMEDATALEN - 1)));
}

/* The LocalSeq of a name of len bytes (0 < len < NAMEDATALEN) */
static LocalSeq *
local_lookup(const char *name, int len)
{
	LocalSeq   *ls;
	bool		found;

	if (local_seqs == NULL)
	{
		local_seqs = distseq_nametab_create("distseq local sequences",
											sizeof(LocalSeq),
											offsetof(LocalSeq, def.stripe) +
											sizeof(int32),
											distseq_max_sequences);
		CacheRegisterRelcacheCallback(local_invalidate, (Datum) 0);
		my_db_hash = GetSysCacheHashValue1(DATABASEOID,
										   ObjectIdGetDatum(MyDatabaseId));
		CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, local_invalidate_roles,
									  (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, local_invalidate_roles,
									  (Datum) 0);
		CacheRegisterSyscacheCallback(DATABASEOID, local_invalidate_roles,
									  (Datum) 0);
		RegisterXactCallback(local_xact, NULL);
		distseq_created_on_forget(local_forget);
		pg_atomic_init_u64(&no_stream, 0);
	}
	/*
	 * A new one is all zeros but for the name (nametab.c): not valid, not
	 * ready, no privilege checked, no entry, no last value.
	 */
	ls = distseq_nametab_enter(local_seqs, name, len, &found);
	if (!found)
		ls->stream.stream = &no_stream;
	else if (ls->seq != NULL)
	{
		/* what the draw reads first of the entry (see DistseqSeq) */
		distseq_prefetch(ls->seq);
		distseq_prefetch((char *) ls->seq + 64);
	}
	return ls;
}

/* Is the name argument of this call, as it is, this zero-padded name? */
static inline bool
local_arg_is(const char *known, FunctionCallInfo fcinfo)
{
	struct varlena *arg;

	if (PG_ARGISNULL(0))
		return false;
	arg = (struct varlena *) PG_GETARG_POINTER(0);
	if (VARATT_IS_COMPRESSED(arg) || VARATT_IS_EXTERNAL(arg))
		return false;
	return distseq_name_is(known, VARDATA_ANY(arg), VARSIZE_ANY_EXHDR(arg));
}

/* The site hint of an expression */
#define SITE_HINT(expr) \
	(&site_hints[(((uintptr_t) (expr)) >> 4) & (SITE_HINTS - 1)])

/* The LocalSeq of the name argument, and remember it for this expression */
static pg_noinline LocalSeq *
local_find_slow(FunctionCallInfo fcinfo)
{
	const Node *expr = fcinfo->flinfo->fn_expr;
	text	   *arg;
	int			len;
	LocalSeq   *ls;

	/*
	 * distseq_name_arg() reports a bad name; a good one is not copied.  The
	 * name ends at a zero byte, as distseq_name_arg() reads it: SQL makes
	 * no text with one, but a C function might.
	 */
	if (PG_ARGISNULL(0))
		(void) distseq_name_arg(fcinfo);
	arg = PG_GETARG_TEXT_PP(0);
	len = strnlen(VARDATA_ANY(arg), Min(VARSIZE_ANY_EXHDR(arg), NAMEDATALEN));
	if (len == 0 || len >= NAMEDATALEN)
		(void) distseq_name_arg(fcinfo);
	ls = local_lookup(VARDATA_ANY(arg), len);
	if (expr != NULL)
	{
		SiteHint   *hint = SITE_HINT(expr);

		hint->expr = expr;
		hint->ls = ls;
		memcpy(hint->name, ls->name, NAMEDATALEN);
	}
	return ls;
}

/*
 * The LocalSeq of the name argument: the one this expression had last time
 * if the name is the same, else by name.
 */
static inline LocalSeq *
local_find(FunctionCallInfo fcinfo)
{
	const Node *expr = fcinfo->flinfo->fn_expr;

	if (expr != NULL)
	{
		SiteHint   *hint = SITE_HINT(expr);

		if (hint->expr == expr && local_arg_is(hint->name, fcinfo))
			return hint->ls;
	}
	return local_find_slow(fcinfo);
}

/*
 * Is the name argument a constant of the call's own expression, the same at
 * every call of this FmgrInfo?  Only a Const is: get_fn_expr_arg_stable()
 * also counts external parameters, whose values PL/pgSQL changes between
 * calls of one simple expression.
 */
static bool
site_name_is_constant(FmgrInfo *flinfo)
{
	const Node *expr = flinfo->fn_expr;
	const List *args;

	if (expr == NULL || !IsA(expr, FuncExpr))
		return false;
	args = ((const FuncExpr *) expr)->args;
	return list_length(args) == 1 && IsA(linitial(args), Const);
}

/*
 * The name is not a distseq sequence: report it, and forget its LocalSeq if
 * nothing but a site hint may point to it, so that a session asking for
 * ever new names that do not exist does not grow the table without bound.
 * fn_extra only ever points to LocalSeqs that have been set up (attached
 * or creating), and last_used only to ones that gave a value.
 */
pg_noreturn static void
local_not_found(LocalSeq *ls)
{
	char		name[NAMEDATALEN];

	strlcpy(name, ls->name, NAMEDATALEN);
	if (ls->seq == NULL && !ls->creating && ls->last_gen == 0)
	{
		for (int i = 0; i < SITE_HINTS; i++)
		{
			if (site_hints[i].ls == ls)
			{
				site_hints[i].expr = NULL;
				site_hints[i].ls = NULL;
			}
		}
		distseq_nametab_remove(local_seqs, ls);
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("distseq sequence \"%s\" does not exist", name),
			 errhint("Create it with distseq_create().")));
}

/*
 * Keep the sequence from being dropped under us without a lock, if this
 * backend has its entry already (entries are attached only under the lock,
 * which inuse.c relies on) and a slot of marks for it: the one it had last
 * time, if no other entry took it meanwhile.  Without a slot free, the
 * caller takes the lock.
 */
static bool
local_use_unlocked(LocalSeq *ls)
{
	if (ls->seq == NULL || ls->creating ||
		!distseq_seq_is(ls->seq, MyDatabaseId, ls->relid, ls->gen))
		return false;
	if (unlikely(!distseq_marks_on(ls->marks, ls->seq)))
	{
		ls->marks = distseq_my_marks(ls->seq);
		if (ls->marks == NULL)
			return false;
	}
	return distseq_use_unlocked(ls->seq, ls->marks, ls->relid, ls->gen,
								&ls->drops_seen);
}

/*
 * We hold AccessShareLock on the backing relation, so its invalidations are
 * processed and no drop of it is under way.
 */
static void
local_locked(LocalSeq *ls)
{
	if (ls->seq == NULL ||
		!distseq_seq_is(ls->seq, MyDatabaseId, ls->relid, ls->gen))
		return;
	ls->drops_seen = distseq_drops(ls->seq);
	distseq_drop_state_clear(ls->seq, ls->relid, ls->gen);
}

/*
 * Take or release AccessShareLock on a backing relation for the whole
 * transaction, as native nextval does: the sequence stays ready for the rest
 * of the transaction, so ROLLBACK TO a savepoint must not release the lock.
 */
static void
local_lock(Oid relid, bool lock)
{
	ResourceOwner save = CurrentResourceOwner;

	CurrentResourceOwner = TopTransactionResourceOwner;
	if (lock)
		LockRelationOid(relid, AccessShareLock);
	else
		UnlockRelationOid(relid, AccessShareLock);
	CurrentResourceOwner = save;
}

/*
 * Read the definition of a LocalSeq that is stale, and refuse one that this
 * transaction gave a new generation.
 */
static void
local_read_definition(LocalSeq *ls)
{
	DistseqDef	def;

	/*
	 * As of now, not as of a repeatable read snapshot: one taken before a
	 * distseq_setval() committed shows the generation it gave up, whose
	 * entry we would set up again.
	 */
	if (!distseq_catalog_lookup_latest(ls->name, &def))
		local_not_found(ls);
	if (def.relid == reset_relid && reset_lxid == DISTSEQ_MY_LXID)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot use distseq sequence \"%s\" in the transaction that changed it",
						ls->name),
				 errhint("Use it once distseq_setval() or distseq_alter() has committed.")));
	/* a new generation of the same relation: setval, currval stays */
	if (ls->last_gen != 0 && ls->last_gen == ls->gen &&
		def.relid == ls->relid)
		ls->last_gen = def.gen;
	ls->relid = def.relid;
	ls->gen = def.gen;
	ls->def = def;
	ls->acl_user = InvalidOid;
	ls->valid = true;
}

/*
 * Make a LocalSeq usable in this transaction: read its definition if it is
 * stale, keep the backing relation from being dropped and check the
 * privilege.
 */
static void
local_prepare(LocalSeq *ls, AclMode mode)
{
	Oid			userid = GetUserId();
	uint64		resets;

	for (int tries = 0;; tries++)
	{
		bool		reread = false;
		bool		locked;

		if (!ls->valid)
		{
			local_read_definition(ls);
			reread = true;
		}

		/*
		 * The handshake or the lock processes invalidations, and a DROP sends
		 * its own before it lets us go on: if the relation went away since
		 * the definition was read in an earlier transaction, ls->valid is
		 * false now.  A definition read just now may come from a snapshot
		 * older than the DROP, though (repeatable read): look for the
		 * relation.
		 */
		locked = !local_use_unlocked(ls);
		if (locked)
			local_lock(ls->relid, true);
		if (ls->valid &&
			(!reread ||
			 SearchSysCacheExists1(RELOID, ObjectIdGetDatum(ls->relid))))
		{
			if (locked)
				local_locked(ls);
			break;
		}
		if (locked)
			local_lock(ls->relid, false);
		ls->valid = false;
		if (tries >= 3)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("distseq sequence \"%s\" is being dropped and re-created concurrently",
							ls->name)));
	}

	if (ls->acl_user == userid && ls->acl_mode == mode)
		return;

	resets = acl_resets;
	if (pg_class_aclcheck(ls->relid, userid, mode) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for distseq sequence \"%s\"", ls->name),
				 errhint("The owner can grant it with GRANT USAGE ON SEQUENCE distseq.%s.",
						 quote_identifier(ls->name))));

	/*
	 * Reading the catalogs for the check may have processed invalidations
	 * that this result predates: then do not keep it.
	 */
	if (acl_resets == resets)
	{
		ls->acl_user = userid;
		ls->acl_mode = mode;
	}
}

#define NEXTVAL_ACL	(ACL_USAGE | ACL_UPDATE)

static pg_noinline LocalSeq *
nextval_setup(FunctionCallInfo fcinfo)
{
	void	   *site = fcinfo->flinfo->fn_extra;
	LocalSeq   *ls;
	Oid			userid = GetUserId();

	/*
	 * As native nextval: a function mislabeled PARALLEL SAFE would otherwise
	 * draw in parallel workers, and the session's currval would not follow.
	 * Checked here, off the per-value path: a parallel worker's first call
	 * in its transaction -- with no cache of its own yet -- always comes
	 * here.  A leader that drew earlier in the same transaction draws on.
	 */
	if (IsInParallelMode())
		PreventCommandIfParallelMode("distseq_nextval()");

	distseq_check_loaded();
	if (site != NULL &&
		(SITE_IS_CONSTANT(site) || local_arg_is(SITE_LS(site)->name, fcinfo)))
		ls = SITE_LS(site);
	else
		ls = local_find(fcinfo);

	if (ls->ready_lxid != DISTSEQ_MY_LXID || ls->ready_user != userid ||
		!ls->valid)
	{
		/* the common case: used before, and nothing changed since */
		if (!(ls->valid && local_use_unlocked(ls) && ls->valid &&
			  ls->acl_user == userid && ls->acl_mode == NEXTVAL_ACL))
		{
			local_prepare(ls, NEXTVAL_ACL);

			/*
			 * The entry found last time is still ours if it carries our
			 * identity.  It may be taken over at any time once no backend
			 * uses it; nextval_refill() notices that.  A sequence created
			 * by this transaction needs none yet; once that has committed,
			 * the next transaction comes here and attaches one.
			 */
			if (distseq_created_here(ls->relid, ls->gen))
				ls->creating = true;
			else if (ls->creating || ls->seq == NULL ||
					 !distseq_seq_is(ls->seq, MyDatabaseId, ls->relid, ls->gen))
			{
				/* creating until attached, so that it is not forgotten */
				ls->seq = distseq_seq_attach(ls->relid, ls->gen, ls->name,
											 &ls->def, &ls->incarnation);
				ls->creating = false;
				local_locked(ls);
			}
		}

		/*
		 * The copy of a chunk lives for one transaction at most, so that it
		 * cannot meet its number again when numbers wrap around (after 2^44
		 * chunks): the next draw reads the chunk from the entry.
		 */
		ls->stream.n = 0;
		ls->ready_lxid = DISTSEQ_MY_LXID;
		ls->ready_user = userid;
	}

	if (site == NULL && site_name_is_constant(fcinfo->flinfo))
		fcinfo->flinfo->fn_extra = (void *) ((uintptr_t) ls | SITE_CONSTANT);
	else if (site == NULL || !SITE_IS_CONSTANT(site))
		fcinfo->flinfo->fn_extra = ls;
	return ls;
}

/*
 * The entry of a sequence was taken over by another sequence (or freed by a
 * drop) while this transaction uses it: find or set up a new one, as on a
 * first use, under AccessShareLock on the backing relation, which waits for
 * a drop under way and shows one that ended.
 */
static pg_noinline void
local_reattach(LocalSeq *ls)
{
	local_lock(ls->relid, true);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(ls->relid)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distseq sequence \"%s\" was dropped while in use",
						ls->name)));
	ls->seq = distseq_seq_attach(ls->relid, ls->gen, ls->name, &ls->def,
								 &ls->incarnation);
	local_locked(ls);
}

/*
 * The chunk we drew from last is used up or no longer the stream's: draw from
 * the entry's stream (pool.c), which also checks that the entry is still the
 * one we attached.  The stream gives only values above the last one this
 * session got, so that a session's values grow.
 */
static pg_noinline int64
nextval_refill(LocalSeq *ls)
{
	int64		after = (ls->last_gen == ls->gen) ? ls->last : PG_INT64_MIN;
	int64		slot;

	if (ls->creating)
	{
		/* it may have been dropped and created again in this transaction */
		if (ls->xact_gen != ls->gen || ls->xact_block.lo >= ls->xact_block.hi)
		{
			ls->xact_block = distseq_created_block(ls->name, ls->relid, ls->gen,
												   ls->def.block_size,
												   ls->def.max_value);
			ls->xact_gen = ls->gen;
		}
		return ls->xact_block.lo++;
	}

	for (int tries = 0;; tries++)
	{
		if (distseq_pool_draw(ls->seq, ls->incarnation, after, &ls->stream,
							  &slot))
			return slot;
		if (tries >= 10)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("the entry of distseq sequence \"%s\" keeps being taken over",
							ls->name),
					 errhint("Increase distseq.max_sequences.")));
		local_reattach(ls);
	}
}

PG_FUNCTION_INFO_V1(distseq_nextval);

Datum
distseq_nextval(PG_FUNCTION_ARGS)
{
	void	   *site = fcinfo->flinfo->fn_extra;
	LocalSeq   *ls;
	int64		slot;

	/*
	 * As native nextval; checked on every call, since SET TRANSACTION READ
	 * ONLY may come at any time.  Standbys fail here too, before any lookup.
	 */
	if (unlikely(XactReadOnly))
		PreventCommandIfReadOnly("distseq_nextval()");

	ls = SITE_LS(site);
	if (unlikely(site == NULL ||
				 (!SITE_IS_CONSTANT(site) && !local_arg_is(ls->name, fcinfo)) ||
				 ls->ready_lxid != DISTSEQ_MY_LXID ||
				 ls->ready_user != GetUserId()))
		ls = nextval_setup(fcinfo);

	if (unlikely(!distseq_stream_draw(&ls->stream, &slot)))
		slot = nextval_refill(ls);

	ls->last = slot;
	ls->last_gen = ls->gen;
	last_used = ls;
	PG_RETURN_INT64(DISTSEQ_VALUE(slot, ls->def.stripes, ls->def.stripe));
}

PG_FUNCTION_INFO_V1(distseq_currval);

Datum
distseq_currval(PG_FUNCTION_ARGS)
{
	LocalSeq   *ls;

	distseq_check_loaded();
	ls = local_find(fcinfo);
	local_prepare(ls, ACL_SELECT | ACL_USAGE);

	if (ls->last_gen != ls->gen)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("currval of distseq sequence \"%s\" is not yet defined in this session",
						ls->name)));
	PG_RETURN_INT64(DISTSEQ_VALUE(ls->last, ls->def.stripes, ls->def.stripe));
}

/*
 * As native lastval(): the last sequence this session drew from may since
 * have been dropped, or dropped and created again under its name, which
 * makes a new sequence whose values this session never got.
 */
pg_noreturn static void
lastval_undefined(const LocalSeq *ls)
{
	if (ls == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distseq_lastval is not yet defined in this session")));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("distseq_lastval is not yet defined in this session"),
			 errdetail("The distseq sequence \"%s\" that this session drew from last has been dropped.",
					   ls->name)));
}

PG_FUNCTION_INFO_V1(distseq_lastval);

Datum
distseq_lastval(PG_FUNCTION_ARGS)
{
	LocalSeq   *ls = last_used;

	distseq_check_loaded();
	if (ls == NULL || ls->last_gen == 0)
		lastval_undefined(NULL);

	/*
	 * local_prepare() reports a sequence gone as not existing: look first,
	 * when a drop may have been seen since the draw.
	 */
	if (!ls->valid)
	{
		DistseqDef	def;

		if (!distseq_catalog_lookup(ls->name, &def) ||
			(def.gen != ls->last_gen && def.relid != ls->relid))
			lastval_undefined(ls);
	}
	local_prepare(ls, ACL_SELECT | ACL_USAGE);
	if (ls->last_gen != ls->gen)
		lastval_undefined(ls);
	PG_RETURN_INT64(DISTSEQ_VALUE(ls->last, ls->def.stripes, ls->def.stripe));
}
