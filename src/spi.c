/*-------------------------------------------------------------------------
 *
 * spi.c
 *	  The SPI toolkit every catalog query of distseq goes through: the
 *	  extension's schema and installed version, looked up from pg_extension,
 *	  and the OIDs of its catalog tables, or the tables opened;
 *	  a search_path pinned to the catalog, and the bootstrap superuser's
 *	  rights for user backends that read the catalog tables; statements
 *	  run with kept plans (distseq_spi_exec) or once; bigint[] Datums; the
 *	  worker's own transactions; and the
 *	  checks that refuse a change on a hot standby or in a read-only
 *	  transaction.
 *
 * No locks of its own: the plan cache is backend-local, and pg_extension is
 * read under AccessShareLock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/*
 * For administrators' functions that run SPI as the caller: catalog names
 * only, whatever the caller's search_path says.  Undone by
 * distseq_unpin_search_path() or at the end of the transaction.
 */
int
distseq_pin_search_path(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

void
distseq_unpin_search_path(int level)
{
	AtEOXact_GUC(true, level);
}

/*
 * For user backends that read or write the catalog tables in their own
 * transaction: as the bootstrap superuser, since the tables are not
 * readable by PUBLIC, with a search_path pinned to pg_catalog so the
 * queries never resolve to user objects, and connected to SPI.
 */
void
distseq_spi_enter_catalog(DistseqSpiContext *cxt)
{
	GetUserIdAndSecContext(&cxt->save_userid, &cxt->save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   cxt->save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	cxt->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	distseq_spi_connect();
}

void
distseq_spi_leave_catalog(DistseqSpiContext *cxt)
{
	SPI_finish();
	AtEOXact_GUC(true, cxt->save_nestlevel);
	SetUserIdAndSecContext(cxt->save_userid, cxt->save_sec_context);
}

/*
 * The schema the extension was installed in, and the minor number of the
 * installed version: a newer library must work with the catalog of an older
 * version until ALTER EXTENSION distseq UPDATE.  1.1 records where each
 * sequence was created, 1.2 adds striped sequences, 1.3 peers, 1.4
 * membership changes in two phases, 1.5 moves the catalog tables into
 * schema distseq.
 */
static Oid
extension_namespace(int *minor)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			nspid = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("distseq"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		Datum		version = heap_getattr(tup, Anum_pg_extension_extversion,
										   RelationGetDescr(rel), &isnull);

		nspid = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
		if (minor && !isnull &&
			sscanf(TextDatumGetCString(version), "1.%d", minor) != 1)
			*minor = 0;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nspid;
}

pg_noreturn static void
extension_missing(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_OBJECT),
			 errmsg("extension \"distseq\" is not installed in database \"%s\"",
					get_database_name(MyDatabaseId)),
			 errhint("Run CREATE EXTENSION distseq.")));
}

/*
 * The same as a quoted name.  The name is looked up from the schema's OID
 * at each call: whoever owns that schema may rename it.
 */
static const char *
extension_lookup(int *minor)
{
	Oid			nspid = extension_namespace(minor);
	char	   *nspname;

	if (!OidIsValid(nspid) || (nspname = get_namespace_name(nspid)) == NULL)
		extension_missing();
	return quote_identifier(nspname);
}

/*
 * The catalog this library works with: the quoted name of the schema of the
 * catalog tables, for SQL that names them, and what the installed version
 * has.  From 1.5 on the schema is distseq, made by CREATE EXTENSION (which
 * fails if it exists) and owned by the installing superuser, so no other
 * role can rename it or put look-alikes of the tables in its place: SQL
 * run with distseq's rights names it, never a schema that the database's
 * owner may own.  Before 1.5 the tables are in the installation schema.
 * Looked up at each call, as extension_lookup() says.
 */
DistseqCatalog
distseq_catalog(void)
{
	DistseqCatalog cat;
	int			m = 0;
	const char *schema = extension_lookup(&m);

	cat.origin = m >= 1;
	cat.stripes = m >= 2;
	cat.peers = m >= 3;
	cat.changes = m >= 4;
	cat.owned_by = m >= 7;
	cat.ballots = m >= 7;
	cat.redefine_members = m >= 7;
	cat.schema = m >= 5 ? "distseq" : schema;
	return cat;
}

/*
 * The OID of one of the catalog tables, for code that reads it without SPI,
 * found in the same schema as distseq_catalog() names.
 */
Oid
distseq_catalog_relid(const char *relname)
{
	int			m = 0;
	Oid			nspid = extension_namespace(&m);
	Oid			relid;

	if (!OidIsValid(nspid))
		extension_missing();
	if (m >= 5)
		nspid = get_namespace_oid("distseq", false);
	relid = get_relname_relid(relname, nspid);
	if (!OidIsValid(relid))
		elog(ERROR, "distseq: catalog table %s is missing", relname);
	return relid;
}

/*
 * Open a catalog table where *cache found it last.  The OID is checked at
 * each use: the extension may have been dropped and created again, or
 * updated (1.5 moves the tables into schema distseq), meanwhile.
 */
Relation
distseq_catalog_open(const char *relname, DistseqTableCache *cache,
					 LOCKMODE lockmode)
{
	Relation	rel;

	if (OidIsValid(cache->relid) &&
		(rel = try_relation_open(cache->relid, lockmode)) != NULL)
	{
		if (RelationGetNamespace(rel) == cache->nspid &&
			strcmp(RelationGetRelationName(rel), relname) == 0)
			return rel;
		relation_close(rel, lockmode);
	}
	cache->relid = InvalidOid;

	/*
	 * Found by name, then locked, as RangeVarGetRelid() does: a DROP
	 * EXTENSION that we waited for at the lock took the table away, and its
	 * transaction may have created the extension again.  The lock processed
	 * its invalidations, so the next look finds the new table.
	 */
	while ((rel = try_relation_open(distseq_catalog_relid(relname),
									lockmode)) == NULL)
		CHECK_FOR_INTERRUPTS();
	cache->nspid = RelationGetNamespace(rel);
	cache->relid = RelationGetRelid(rel);
	return rel;
}

const char *
distseq_catalog_schema(void)
{
	return distseq_catalog().schema;
}

/*
 * The schema of the functions users call, for SQL that runs as the caller
 * and names one (a column default, say).
 */
const char *
distseq_extension_schema(void)
{
	return extension_lookup(NULL);
}

/*
 * The timeline this server writes WAL on.  A new one begins when a standby
 * is promoted or a point-in-time recovery ends: the catalog may then lag
 * behind what was reserved before, so it counts as a move.
 */
TimeLineID
distseq_timeline(void)
{
	/* a standby has none yet: every caller refused it at its entry */
	if (RecoveryInProgress())
		elog(ERROR, "distseq: no WAL timeline to write on during recovery");
#if PG_VERSION_NUM >= 150000
	return GetWALInsertionTimeLine();
#else
	return ThisTimeLineID;
#endif
}

/*
 * Refuse a function on a hot standby, at once, as PostgreSQL refuses a
 * command that writes there.  A standby holds a read-only copy of its
 * primary's catalog and is no member of any group: it must neither answer
 * a peer in the member's name nor wait for a refill worker, which starts
 * only once recovery has ended.
 */
void
distseq_check_primary(const char *funcname)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot execute %s during recovery", funcname),
				 errdetail("This server is a hot standby: its distseq catalog is a read-only copy of its primary's."),
				 errhint("Call it on a primary server; point peers' foreign servers at a member's primary.")));
}

/*
 * The same for a function that changes the catalog, and in a read-only
 * transaction as native nextval() is refused there.
 */
void
distseq_check_writable(const char *funcname)
{
	distseq_check_primary(funcname);
	PreventCommandIfReadOnly(funcname);
}

/*
 * Plans of the statements distseq_spi_exec() runs, kept for the life of the
 * process.  Building a plan costs far more than running one of these small
 * statements, and the worker runs the same few on every refill.  The key
 * is the query text and the argument types; texts name only the
 * extension's schema and tables, never a value, so a database has a small,
 * fixed set of them (statements that name user objects go through
 * distseq_spi_exec_once()).  SPI_keepplan() puts the plans under the plan
 * cache, which re-analyzes and re-plans them when what they depend on
 * changes (ALTER EXTENSION UPDATE, DROP and CREATE EXTENSION, ANALYZE, a
 * different search_path), and checks permissions on every execution as
 * for any query.  Plans are never freed: one may be running further up the
 * stack.
 */
#define SPI_PLAN_MAX_ARGS	15
#define SPI_PLANS_MAX		256

typedef struct SpiPlanKey
{
	const char *sql;
	int			nargs;
	Oid			types[SPI_PLAN_MAX_ARGS];
} SpiPlanKey;

typedef struct SpiPlanEntry
{
	SpiPlanKey	key;			/* sql points into spi_plan_cxt */
	SPIPlanPtr	plan;
} SpiPlanEntry;

static HTAB *spi_plans = NULL;
static MemoryContext spi_plan_cxt = NULL;

static uint32
spi_plan_hash(const void *key, Size keysize)
{
	const SpiPlanKey *k = key;
	uint32		h = hash_bytes((const unsigned char *) k->sql, strlen(k->sql));

	return hash_combine(h, hash_bytes((const unsigned char *) k->types,
									  k->nargs * sizeof(Oid)));
}

static int
spi_plan_match(const void *key1, const void *key2, Size keysize)
{
	const SpiPlanKey *a = key1;
	const SpiPlanKey *b = key2;

	if (a->nargs != b->nargs ||
		memcmp(a->types, b->types, a->nargs * sizeof(Oid)) != 0)
		return 1;
	return strcmp(a->sql, b->sql);
}

/* The kept plan of a statement, prepared on first use; NULL: run it once */
SPIPlanPtr
distseq_spi_plan(const char *sql, int nargs, Oid *types)
{
	SpiPlanKey	key;
	SpiPlanEntry *entry;
	SPIPlanPtr	plan;

	if (nargs > SPI_PLAN_MAX_ARGS)
		return NULL;
	if (spi_plans == NULL)
	{
		HASHCTL		ctl;

		spi_plan_cxt = AllocSetContextCreate(TopMemoryContext,
											 "distseq SPI plans",
											 ALLOCSET_SMALL_SIZES);
		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(SpiPlanKey);
		ctl.entrysize = sizeof(SpiPlanEntry);
		ctl.hash = spi_plan_hash;
		ctl.match = spi_plan_match;
		ctl.hcxt = spi_plan_cxt;
		spi_plans = hash_create("distseq SPI plans", 32, &ctl,
								HASH_ELEM | HASH_FUNCTION | HASH_COMPARE |
								HASH_CONTEXT);
	}

	memset(&key, 0, sizeof(key));
	key.sql = sql;
	key.nargs = nargs;
	if (nargs > 0)
		memcpy(key.types, types, nargs * sizeof(Oid));
	entry = hash_search(spi_plans, &key, HASH_FIND, NULL);
	if (entry != NULL)
		return entry->plan;

	/* a bug that puts values into query texts must not fill memory */
	if (hash_get_num_entries(spi_plans) >= SPI_PLANS_MAX)
		return NULL;

	/*
	 * Nothing is entered before the plan exists: an error leaves no trace.
	 * Generic plans from the start: the arguments are values to store or
	 * keys to look up through the catalog's indexes, and no value of them
	 * makes another plan better, so the plan cache's first five custom
	 * plans would only be five more plannings.
	 * Parallel plans stay allowed, as with SPI_execute_with_args().
	 */
	plan = SPI_prepare_cursor(sql, nargs, types,
							  CURSOR_OPT_GENERIC_PLAN | CURSOR_OPT_PARALLEL_OK);
	if (plan == NULL)
		elog(ERROR, "distseq: SPI_prepare failed (%d): %s", SPI_result, sql);
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "distseq: SPI_keepplan failed: %s", sql);
	key.sql = MemoryContextStrdup(spi_plan_cxt, sql);
	entry = hash_search(spi_plans, &key, HASH_ENTER, NULL);
	entry->plan = plan;
	return plan;
}

/*
 * Run a statement through SPI (connected by the caller) and check it did
 * what "expect" says; returns SPI_processed.  Shared by the files that
 * talk SPI.  The plan is kept (see above): the text must name no value
 * and no user object, pass those as arguments or use
 * distseq_spi_exec_once().
 */
uint64
distseq_spi_exec(const char *sql, int nargs, Oid *types, Datum *values, int expect)
{
	SPIPlanPtr	plan = distseq_spi_plan(sql, nargs, types);
	int			rc;

	if (plan == NULL)
		return distseq_spi_exec_once(sql, nargs, types, values, expect);
	rc = SPI_execute_plan(plan, values, NULL, false, 0);
	if (rc != expect)
		elog(ERROR, "distseq: SPI_execute_plan failed (%d): %s", rc, sql);
	return SPI_processed;
}

/* The same, planned for this one run and forgotten */
uint64
distseq_spi_exec_once(const char *sql, int nargs, Oid *types, Datum *values,
					  int expect)
{
	int			rc;

	rc = SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0);
	if (rc != expect)
		elog(ERROR, "distseq: SPI_execute_with_args failed (%d): %s", rc, sql);
	return SPI_processed;
}

/* A bigint column of a row of the last SPI result; NULL reads as 0 */
int64
distseq_spi_int8(int row, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc,
								  col, &isnull);

	return isnull ? 0 : DatumGetInt64(d);
}

/*
 * A transaction of the worker's own, with a snapshot: reservations, write
 * back, agent steps.  SPI and the catalog need nothing more.
 */
void
distseq_xact_begin(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
}

void
distseq_xact_commit(void)
{
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/* Connect to SPI, or fail */
void
distseq_spi_connect(void)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
}

/* The elements of a bigint[] datum, and how many there are */
int64 *
distseq_int8_values(Datum d, int *n)
{
	Datum	   *elems;
	int64	   *vals;

	deconstruct_array(DatumGetArrayTypeP(d), INT8OID, 8, FLOAT8PASSBYVAL,
					  TYPALIGN_DOUBLE, &elems, NULL, n);
	vals = palloc(sizeof(int64) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		vals[i] = DatumGetInt64(elems[i]);
	return vals;
}

Datum
distseq_int8_array(int64 *vals, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int64GetDatum(vals[i]);
	return PointerGetDatum(construct_array(d, n, INT8OID, 8, FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}
