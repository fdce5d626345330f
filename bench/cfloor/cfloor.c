/*-------------------------------------------------------------------------
 *
 * cfloor.c
 *	  A floor for the benchmarks: a C function of an extension that does
 *	  nothing.
 *
 * bench_cfloor(text) returns 1.  It has distseq_nextval's signature, so
 * SELECT bench_cfloor('s') costs what PostgreSQL charges for calling any C
 * function of an extension (looked up in pg_proc for each new executor
 * state, its result printed as a bigint), and what SELECT
 * distseq_nextval('s') costs beyond it is distseq's own.  Not part of the
 * extension: bench/run.sh and bench/callgrind.sh build and install it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

PG_MODULE_MAGIC;

PG_FUNCTION_INFO_V1(bench_cfloor);

Datum
bench_cfloor(PG_FUNCTION_ARGS)
{
	PG_RETURN_INT64(1);
}
