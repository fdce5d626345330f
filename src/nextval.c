/*-------------------------------------------------------------------------
 *
 * nextval.c
 *	  distseq_nextval() and distseq_currval(): the hot path and the
 *	  backend-local cache that resolves a sequence name once.
 *
 * A call site keeps a pointer to its LocalSeq in fn_extra.  A call served
 * from the backend's block compares the block's generation with the
 * sequence's, increments, and returns: no lock, no lookup, no syscall.
 * Once per transaction a call site takes AccessShareLock on the backing
 * sequence relation (so a concurrent DROP waits for us, as with native
 * sequences) and checks the caller's privileges.  A relcache invalidation
 * of the backing relation (DROP, GRANT, REVOKE) marks the cached
 * definition stale, and the next transaction reads it again.
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
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

typedef struct LocalSeq
{
	char		name[NAMEDATALEN];	/* hash key */
	bool		valid;			/* relid and gen are current */
	Oid			relid;
	uint64		gen;
	DistseqDef	def;
	DistseqBlock *block;		/* this backend's block in shared memory */
	DistseqSeq *seq;
	LocalTransactionId ready_lxid;	/* locked and checked in this xact */
	Oid			ready_user;		/* ... for this role */
	uint64		last_gen;		/* generation of last, 0 if none */
	int64		last;			/* slot of the last value this session got */
} LocalSeq;

typedef struct CallSite
{
	LocalSeq   *ls;
	bool		const_name;		/* the name argument never changes */
} CallSite;

static HTAB *local_seqs = NULL;

static void
local_invalidate(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	LocalSeq   *ls;

	hash_seq_init(&status, local_seqs);
	while ((ls = hash_seq_search(&status)) != NULL)
	{
		if (!OidIsValid(relid) || ls->relid == relid)
		{
			ls->valid = false;
			ls->ready_lxid = InvalidLocalTransactionId;
		}
	}
}

static char *
name_from_arg(FunctionCallInfo fcinfo)
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

static LocalSeq *
local_lookup(const char *name)
{
	LocalSeq   *ls;
	bool		found;
	char		key[NAMEDATALEN];

	if (local_seqs == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = NAMEDATALEN;
		ctl.entrysize = sizeof(LocalSeq);
		local_seqs = hash_create("distseq local sequences", 16, &ctl,
								 HASH_ELEM | DISTSEQ_HASH_STRINGS);
		CacheRegisterRelcacheCallback(local_invalidate, (Datum) 0);
	}
	memset(key, 0, sizeof(key));
	strlcpy(key, name, NAMEDATALEN);
	ls = hash_search(local_seqs, key, HASH_ENTER, &found);
	if (!found)
	{
		ls->valid = false;
		ls->ready_lxid = InvalidLocalTransactionId;
		ls->last_gen = 0;
		ls->block = NULL;
		ls->seq = NULL;
	}
	return ls;
}

/*
 * Make a LocalSeq usable in this transaction: read its definition if it is
 * stale, lock the backing relation and check the privilege.
 */
static void
local_prepare(LocalSeq *ls, AclMode mode)
{
	for (int tries = 0;; tries++)
	{
		if (!ls->valid)
		{
			DistseqDef	def;

			if (!distseq_catalog_lookup(ls->name, &def))
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("distseq sequence \"%s\" does not exist", ls->name),
						 errhint("Create it with distseq_create().")));
			ls->relid = def.relid;
			ls->gen = def.gen;
			ls->def = def;
			ls->valid = true;
		}

		/* taking the lock processes invalidations: check again after it */
		LockRelationOid(ls->relid, AccessShareLock);
		if (ls->valid &&
			SearchSysCacheExists1(RELOID, ObjectIdGetDatum(ls->relid)))
			break;
		UnlockRelationOid(ls->relid, AccessShareLock);
		ls->valid = false;
		if (tries >= 3)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("distseq sequence \"%s\" is being dropped and re-created concurrently",
							ls->name)));
	}

	if (pg_class_aclcheck(ls->relid, GetUserId(), mode) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for distseq sequence \"%s\"", ls->name),
				 errhint("The owner can grant it with GRANT USAGE ON SEQUENCE distseq.%s.",
						 quote_identifier(ls->name))));
}

static LocalSeq *
nextval_setup(FunctionCallInfo fcinfo)
{
	CallSite   *site = (CallSite *) fcinfo->flinfo->fn_extra;
	LocalSeq   *ls;

	distseq_check_loaded();
	ls = local_lookup(name_from_arg(fcinfo));

	if (!ls->valid || ls->ready_lxid != DISTSEQ_MY_LXID ||
		ls->ready_user != GetUserId())
	{
		local_prepare(ls, ACL_USAGE | ACL_UPDATE);

		/*
		 * The entry found last time is still ours if it carries our identity:
		 * entries are only recycled once their relation is gone, and we hold
		 * a lock on ours.
		 */
		if (ls->seq == NULL ||
			pg_atomic_read_u64(&ls->seq->gen) != ls->gen ||
			ls->seq->relid != ls->relid || ls->seq->dboid != MyDatabaseId)
		{
			ls->seq = distseq_seq_attach(ls->relid, ls->gen, ls->name, &ls->def);
			distseq_backend_attach();
			ls->block = distseq_my_block(ls->seq);
		}
		ls->ready_lxid = DISTSEQ_MY_LXID;
		ls->ready_user = GetUserId();
	}

	if (site == NULL)
	{
		site = MemoryContextAlloc(fcinfo->flinfo->fn_mcxt, sizeof(CallSite));
		site->const_name = get_fn_expr_arg_stable(fcinfo->flinfo, 0);
		fcinfo->flinfo->fn_extra = site;
	}
	site->ls = ls;
	return ls;
}

/* The block is used up, or belongs to an earlier sequence: get a new one */
static pg_noinline int64
nextval_refill(LocalSeq *ls)
{
	DistseqBlock *blk = ls->block;
	int64		after = (ls->last_gen == ls->gen) ? ls->last : PG_INT64_MIN;

	blk->gen = 0;
	distseq_pool_next_block(ls->seq, ls->gen, after, blk);
	return blk->next++;
}

PG_FUNCTION_INFO_V1(distseq_nextval);

Datum
distseq_nextval(PG_FUNCTION_ARGS)
{
	CallSite   *site = (CallSite *) fcinfo->flinfo->fn_extra;
	LocalSeq   *ls;
	DistseqBlock *blk;
	int64		slot;

	/*
	 * As native nextval; checked on every call, since SET TRANSACTION READ
	 * ONLY may come at any time.  Standbys fail here too, before any lookup.
	 */
	if (unlikely(XactReadOnly))
		PreventCommandIfReadOnly("distseq_nextval()");

	if (likely(site != NULL && site->const_name &&
			   site->ls->ready_lxid == DISTSEQ_MY_LXID &&
			   site->ls->ready_user == GetUserId()))
		ls = site->ls;
	else
		ls = nextval_setup(fcinfo);

	blk = ls->block;
	if (likely(blk->gen == ls->gen && blk->next < blk->end))
		slot = blk->next++;
	else
		slot = nextval_refill(ls);

	ls->last = slot;
	ls->last_gen = ls->gen;
	PG_RETURN_INT64(DISTSEQ_VALUE(slot, ls->def.stripes, ls->def.stripe));
}

PG_FUNCTION_INFO_V1(distseq_currval);

Datum
distseq_currval(PG_FUNCTION_ARGS)
{
	LocalSeq   *ls;

	distseq_check_loaded();
	ls = local_lookup(name_from_arg(fcinfo));
	local_prepare(ls, ACL_SELECT | ACL_USAGE);

	if (ls->last_gen != ls->gen)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("currval of distseq sequence \"%s\" is not yet defined in this session",
						ls->name)));
	PG_RETURN_INT64(DISTSEQ_VALUE(ls->last, ls->def.stripes, ls->def.stripe));
}
