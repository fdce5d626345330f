/*-------------------------------------------------------------------------
 *
 * status.c
 *	  The set-returning functions behind the distseq_status and
 *	  distseq_blocks views: a snapshot of the pools and of the chunks the
 *	  streams hand out, in shared memory.
 *
 * Each pool is read under its entry lock, so its row is consistent; a
 * chunk is drawn from without that lock, so its row can only ever be a
 * moment old.  Rows appear only for sequences of the current database that
 * the caller may see.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/syscache.h"

static bool
may_see(Oid relid)
{
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		return false;
	return pg_class_aclcheck(relid, GetUserId(),
							 ACL_SELECT | ACL_USAGE | ACL_UPDATE) == ACLCHECK_OK;
}

/* a materialized result set, as InitMaterializedSRF() makes from 15 on */
static void
status_init_srf(FunctionCallInfo fcinfo)
{
#if PG_VERSION_NUM >= 150000
	InitMaterializedSRF(fcinfo, 0);
#else
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext oldcxt;
	TupleDesc	tupdesc;

	if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
		!(rsinfo->allowedModes & SFRM_Materialize))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("set-valued function called in context that cannot accept a set")));
	oldcxt = MemoryContextSwitchTo(rsinfo->econtext->ecxt_per_query_memory);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	rsinfo->returnMode = SFRM_Materialize;
	rsinfo->setResult = tuplestore_begin_heap(true, false, work_mem);
	rsinfo->setDesc = tupdesc;
	MemoryContextSwitchTo(oldcxt);
#endif
}

/* pools and blocks hold slots; the views show values */
#define VALUE_OF(seq, slot)	DISTSEQ_VALUE((slot), (seq).stripes, (seq).stripe)

/*
 * The first value of a range of slots and the one past its last, or two
 * NULLs for an empty range.  Only slots of the range are turned into
 * values: those lie between start_value and max_value, so neither the
 * values nor the end (at most max_value + 1) can overflow, whereas the
 * slot below an empty range may lie below the first value a bigint holds.
 */
static void
range_values(DistseqSeq *seq, DistseqRange r, Datum *values, bool *nulls)
{
	nulls[0] = nulls[1] = RANGE_SIZE(r) <= 0;
	if (nulls[0])
		return;
	values[0] = Int64GetDatum(VALUE_OF(*seq, r.lo));
	values[1] = Int64GetDatum(VALUE_OF(*seq, r.hi - 1) + 1);
}

/*
 * A copy of entry i, taken under its lock, and with "rest" what is left of
 * its stream's chunk; its generation, or 0 when the entry is free, of
 * another database or of a sequence the caller may not see.
 */
static uint64
status_snapshot(int i, DistseqSeq *copy, DistseqRange *rest)
{
	DistseqSeq *seq = &Distseq->seqs[i];
	uint64		gen;

	LWLockAcquire(seq->lock, LW_SHARED);
	gen = pg_atomic_read_u64(&seq->gen);
	memcpy(copy, seq, sizeof(DistseqSeq));
	if (rest)
		*rest = distseq_pool_stream_rest(seq);
	LWLockRelease(seq->lock);
	if (gen == 0 || copy->dboid != MyDatabaseId || !may_see(copy->relid))
		return 0;
	return gen;
}

PG_FUNCTION_INFO_V1(distseq_pool_status);

Datum
distseq_pool_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	distseq_check_loaded();
	status_init_srf(fcinfo);

	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq	copy;
		Datum		values[15];
		bool		nulls[15] = {0};
		int64		returned = 0;
		uint64		gen = status_snapshot(i, &copy, NULL);
		double		rate;

		if (gen == 0)
			continue;

		for (int f = 0; f < copy.nfrags; f++)
			returned += RANGE_SIZE(copy.frags[f]);

		values[0] = ObjectIdGetDatum(copy.relid);
		values[1] = Int64GetDatum((int64) gen);
		values[2] = Int64GetDatum(copy.segment_size);
		range_values(&copy, copy.cur, &values[3], &nulls[3]);
		range_values(&copy, copy.pre, &values[5], &nulls[5]);
		values[7] = Int64GetDatum(returned);
		values[8] = BoolGetDatum(copy.refill_pending);
		values[9] = Int64GetDatum(copy.refills);
		values[10] = Int64GetDatum(copy.waits);
		values[11] = Float8GetDatum(copy.wait_ms);
		values[12] = Int64GetDatum(copy.issued);
		nulls[12] = copy.issued < 0;
		values[13] = Int64GetDatum(copy.lost);
		nulls[13] = copy.lost < 0;

		/*
		 * Values per second: the smoothed rate of past segments, but no more
		 * than the current one going right now, so an idle sequence slows.
		 */
		rate = copy.rate;
		if (copy.last_refill != 0)
			rate = Min(rate, copy.segment_size * 1e6 /
					   Max(GetCurrentTimestamp() - copy.last_refill, 1));
		values[14] = Float8GetDatum(rate);
		nulls[14] = copy.rate <= 0;

		/* the SQL definition of an older version has fewer columns */
		Assert(rsinfo->setDesc->natts <= lengthof(values));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(distseq_block_status);

/*
 * What is left of the chunk each sequence's stream hands out now: one row
 * per sequence in use, shared by every backend of the server, so pid is
 * NULL.  (Backends used to have blocks of their own; the view kept its
 * columns.)
 */
Datum
distseq_block_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	distseq_check_loaded();
	status_init_srf(fcinfo);

	for (int i = 0; i < distseq_max_sequences; i++)
	{
		DistseqSeq	copy;
		DistseqRange r;
		uint64		gen = status_snapshot(i, &copy, &r);
		Datum		values[5];
		bool		nulls[5] = {0};

		if (gen == 0 || RANGE_SIZE(r) <= 0)
			continue;
		nulls[0] = true;
		values[1] = ObjectIdGetDatum(copy.relid);
		values[2] = Int64GetDatum((int64) gen);
		range_values(&copy, r, &values[3], &nulls[3]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
