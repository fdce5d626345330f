/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Queries of distseq's catalog table distseq_sequences, through SPI
 *	  but for two: reading a sequence's definition (at a backend's first use
 *	  of a sequence, by an index scan), creating one (its backing sequence
 *	  made and its row inserted without SPI, its first windows opened by
 *	  windows.c), the servers a sequence draws from, and the SQL entry point
 *	  of a peer's reservation (distseq_peer_reserve; the reservation itself
 *	  is windows.c's).
 *
 * Everything runs in its caller's transaction: a user's for lookups and
 * creations, the worker's own for the servers, and for a peer's
 * reservation the one its libpq session commits.  User backends read the
 * tables as the bootstrap superuser with a safe search_path
 * (distseq_spi_enter_catalog, spi.c), since the tables are not readable by
 * PUBLIC and the queries must not resolve to user objects.
 *
 * Row locks: a peer's reservation locks the sequence's row FOR NO KEY
 * UPDATE, as the worker's does (windows.c).  A creation takes none: it is
 * ordered against a concurrent one of the same name by the unique index of
 * the names (sequence.c).
 *
 * Functions that change the catalog call distseq_check_writable() (spi.c)
 * first: a hot standby refuses them at once.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "commands/tablecmds.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

/*
 * Read a sequence's definition by name, in the caller's transaction.
 * Returns false when there is no such sequence.
 */
bool
distseq_catalog_lookup(const char *name, DistseqDef *def)
{
	DistseqSpiContext cxt;
	DistseqCatalog cat = distseq_catalog();
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	const char *sql;
	bool		found;

	values[0] = CStringGetTextDatum(name);
	distseq_spi_enter_catalog(&cxt);
	sql = psprintf("SELECT seqrel::oid::int8, generation, block_size::int8, max_value,"
				   " %s FROM %s.distseq_sequences WHERE sequence_name = $1",
				   cat.stripes ? "stripes::int8, stripe::int8" : "1::int8, 0::int8",
				   cat.schema);
	found = distseq_spi_exec(sql, 1, types, values, SPI_OK_SELECT) == 1;
	if (found)
	{
		def->relid = (Oid) distseq_spi_int8(0, 1);
		def->gen = (uint64) distseq_spi_int8(0, 2);
		def->block_size = (int32) distseq_spi_int8(0, 3);
		def->max_value = distseq_spi_int8(0, 4);
		def->stripes = (int32) distseq_spi_int8(0, 5);
		def->stripe = (int32) distseq_spi_int8(0, 6);
	}
	distseq_spi_leave_catalog(&cxt);
	return found;
}

/* distseq_sequences, where it was found last */
static DistseqTableCache names_cache;

static Relation
names_open(LOCKMODE lockmode)
{
	return distseq_catalog_open("distseq_sequences", &names_cache, lockmode);
}

static Datum
names_value(HeapTuple tup, TupleDesc desc, const char *column, Datum absent)
{
	AttrNumber	attnum = distseq_column(desc, column);
	bool		isnull;
	Datum		value;

	if (attnum == InvalidAttrNumber)
		return absent;
	value = heap_getattr(tup, attnum, desc, &isnull);
	if (isnull)
		elog(ERROR, "distseq: null %s in distseq_sequences", column);
	return value;
}

/*
 * Read a definition through the primary key index (sequence_name), without
 * SPI, which would cost a plan's execution and the switch of user and
 * search_path.  The rights it reads with are the library's own: it names no
 * object a user could put in its way.  It reads with the latest snapshot,
 * or as a statement of the transaction would; either is taken once the
 * table is locked, so that it sees what a transaction it waited for there
 * committed (one that dropped and created the extension again, say).
 */
static bool
names_find(const char *name, bool latest, DistseqDef *def)
{
	Relation	rel = names_open(AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	AttrNumber	nameatt = distseq_column(desc, "sequence_name");
	Snapshot	snapshot;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		found;

	snapshot = RegisterSnapshot(latest ? GetLatestSnapshot() :
								GetTransactionSnapshot());
	/* compare in the collation the index is ordered by */
	ScanKeyEntryInitialize(&key, 0, nameatt, BTEqualStrategyNumber,
						   InvalidOid, TupleDescAttr(desc, nameatt - 1)->attcollation,
						   F_TEXTEQ, CStringGetTextDatum(name));
	scan = systable_beginscan(rel, distseq_primary_key(rel), true,
							  snapshot, 1, &key);
	tup = systable_getnext(scan);
	found = HeapTupleIsValid(tup);
	if (found)
	{
		def->relid = DatumGetObjectId(names_value(tup, desc, "seqrel", 0));
		def->gen = (uint64) DatumGetInt64(names_value(tup, desc, "generation", 0));
		def->block_size = DatumGetInt32(names_value(tup, desc, "block_size", 0));
		def->max_value = DatumGetInt64(names_value(tup, desc, "max_value", 0));
		def->stripes = DatumGetInt32(names_value(tup, desc, "stripes",
												 Int32GetDatum(1)));
		def->stripe = DatumGetInt32(names_value(tup, desc, "stripe",
												Int32GetDatum(0)));
	}
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(rel, NoLock);
	return found;
}

/*
 * The definition a session draws by: as of now, whatever the snapshot of a
 * repeatable read transaction shows.  distseq_setval() gives a sequence a
 * new generation without a new relation, so a snapshot taken before it
 * committed shows the old one, whose blocks and pools were given up.  It
 * is read at a backend's first use of each sequence.
 */
bool
distseq_catalog_lookup_latest(const char *name, DistseqDef *def)
{
	return names_find(name, true, def);
}

/*
 * Reserve for a server that draws from this one (a sequence created there
 * with servers => ...): the same reservation as the worker's
 * (distseq_windows_reserve, windows.c), in this server's transaction,
 * which the caller's libpq session commits synchronously; with
 * distseq.standby_ack = all, that commit also waits for this server's
 * standbys, and warns the caller when they do not acknowledge it
 * (standby.c).  Only a sequence with one stripe and windows of its own
 * serves peers: its slots are its values.  Its row is locked FOR NO KEY
 * UPDATE, as for the worker's reservation.
 */
PG_FUNCTION_INFO_V1(distseq_peer_reserve);

Datum
distseq_peer_reserve(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		count = PG_GETARG_INT64(1);
	DistseqWindowsSeq	seq;
	int64		skipped;
	Oid			types[5] = {TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID};
	Datum		values[5];
	Datum		result[2];
	bool		nulls[2] = {0};
	TupleDesc	tupdesc;
	DistseqRange r;

	seq.cat = distseq_catalog();
	distseq_check_writable("distseq_peer_reserve()");
	if (count <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("count must be positive")));
	distseq_spi_connect();
	if (seq.cat.peers)
		distseq_node_verify(seq.cat.schema);
	/* $2 is filled in below; where this server is: $3 to $5 */
	values[0] = CStringGetTextDatum(name);
	values[1] = Int64GetDatum(0);
	values[2] = Int64GetDatum((int64) GetSystemIdentifier());
	values[3] = Int64GetDatum((int64) MyDatabaseId);
	values[4] = Int64GetDatum((int64) distseq_timeline());
	if (distseq_spi_exec(psprintf("SELECT window_size, min_open_windows::int8, start_value, max_value,"
							  " (origin_system IS NOT NULL AND (origin_system = 0"
							  "  OR origin_system <> $3 OR origin_database <> $4::oid"
							  "  OR origin_relation <> seqrel::oid OR origin_timeline <> $5))::int::int8"
							  " FROM %s.distseq_sequences WHERE sequence_name = $1"
							  " AND stripes = 1 AND servers IS NULL FOR NO KEY UPDATE",
							  seq.cat.schema),
					 5, types, values, SPI_OK_SELECT) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("distseq sequence \"%s\" does not exist here, or draws from elsewhere",
						name)));
	seq.name = name;
	seq.stripes = 1;
	seq.window_size = distseq_spi_int8(0, 1);
	seq.min_open = distseq_spi_int8(0, 2);
	seq.first = distseq_spi_int8(0, 3);
	seq.last = distseq_spi_int8(0, 4);
	seq.moved = distseq_spi_int8(0, 5) != 0;

	r = distseq_windows_reserve(&seq, count, &skipped);
	/* as the worker does before it serves this node */
	if (seq.moved)
	{
		values[1] = Int64GetDatum(skipped);
		distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences"
								  " SET values_reserved = values_reserved + $2,"
								  " values_lost = values_lost + $2,"
								  " origin_system = $3, origin_database = $4::oid,"
								  " origin_relation = seqrel::oid, origin_timeline = $5"
								  " WHERE sequence_name = $1",
								  seq.cat.schema),
						 5, types, values, SPI_OK_UPDATE);
	}
	values[1] = Int64GetDatum(RANGE_SIZE(r));
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences"
							  " SET values_reserved = values_reserved + $2"
							  " WHERE sequence_name = $1", seq.cat.schema),
					 2, types, values, SPI_OK_UPDATE);
	SPI_finish();
	/* with distseq.standby_ack = all, the answer waits for the standbys */
	if (RANGE_SIZE(r) > 0)
		distseq_standby_ack_at_commit();

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	result[0] = Int64GetDatum(r.lo);
	result[1] = Int64GetDatum(r.hi);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  result, nulls)));
}

/*
 * The servers a sequence draws from, the role it connects as (the
 * sequence's owner) and its first value, or NIL for a sequence with windows
 * of its own.  Also the nodes of the group those servers were found in so
 * far (*nodes NULL when none yet).  Allocated in "cxt".
 */
List *
distseq_catalog_servers(Oid relid, Oid *owner, int64 *start_value, int64 **nodes,
						int *nnodes, MemoryContext cxt)
{
	DistseqCatalog cat = distseq_catalog();
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum((int64) relid)};
	List	   *servers = NIL;

	*nodes = NULL;
	*nnodes = 0;
	if (!cat.peers)
		return NIL;
	distseq_spi_connect();
	if (distseq_spi_exec(psprintf("SELECT unnest(s.servers)::text, c.relowner::int8, %s,"
								  " s.start_value"
								  " FROM %s.distseq_sequences s"
								  " JOIN pg_catalog.pg_class c ON c.oid = s.seqrel"
								  " WHERE s.seqrel = $1::oid",
								  cat.changes ? "s.server_nodes" : "NULL::int8[]", cat.schema),
					 1, types, values, SPI_OK_SELECT) > 0)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);

		for (uint64 i = 0; i < SPI_processed; i++)
			servers = lappend(servers,
							  pstrdup(SPI_getvalue(SPI_tuptable->vals[i],
												   SPI_tuptable->tupdesc, 1)));
		*owner = (Oid) distseq_spi_int8(0, 2);
		*start_value = distseq_spi_int8(0, 4);
		if (!isnull)
			*nodes = distseq_int8_values(d, nnodes);
		MemoryContextSwitchTo(oldcxt);
	}
	SPI_finish();
	return servers;
}

/* Remember the nodes of the group a sequence draws from (version 1.4 on) */
void
distseq_catalog_set_server_nodes(Oid relid, int64 *nodes, int nnodes)
{
	DistseqCatalog cat = distseq_catalog();
	Oid			types[2] = {INT8OID, INT8ARRAYOID};
	Datum		values[2];

	if (!cat.changes)
		return;
	distseq_spi_connect();
	values[0] = Int64GetDatum((int64) relid);
	values[1] = distseq_int8_array(nodes, nnodes);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences SET server_nodes = $2"
							  " WHERE seqrel = $1::oid", cat.schema),
					 2, types, values, SPI_OK_UPDATE);
	SPI_finish();
}

/* A random generation: never the same for two sequences, never 0 */
static uint64
catalog_new_generation(void)
{
	uint64		gen;

	do
	{
		if (!pg_strong_random(&gen, sizeof(gen)))
			elog(ERROR, "could not generate a random number");
		gen &= PG_INT64_MAX;
	} while (gen == 0);
	return gen;
}

/*
 * Make the backing relation of a new sequence, owned by "owner", in schema
 * distseq, and return it: a name in the catalog or in that schema already
 * is refused.  As the bootstrap superuser.
 */
static Oid
catalog_backing_relation(const char *name, Oid owner)
{
	Oid			nspid = get_namespace_oid("distseq", false);
	Oid			relid;
	DistseqDef	def;
	CreateSeqStmt *stmt;

	/* as a SELECT would see the catalog */
	if (names_find(name, false, &def))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("distseq sequence \"%s\" already exists", name)));
	relid = get_relname_relid(name, nspid);

	/*
	 * A sequence that a transaction this snapshot does not see created:
	 * repeatable read can neither see nor make it, as INSERT ... ON
	 * CONFLICT cannot.
	 */
	if (OidIsValid(relid) && IsolationUsesXactSnapshot() &&
		distseq_catalog_lookup_latest(name, &def) && def.relid == relid)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent creation of distseq sequence \"%s\"", name),
				 errhint("The transaction might succeed if retried.")));
	/* from 1.5 on the catalog's tables and indexes live there too */
	if (OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_RESERVED_NAME),
				 errmsg("distseq sequence name \"%s\" is reserved", name),
				 errdetail("Schema \"distseq\" holds a relation of that name that is not a distseq sequence.")));

	/*
	 * What CREATE SEQUENCE distseq.name and ALTER SEQUENCE ... OWNER TO
	 * owner do, without parsing either: the name is not quoted anywhere.
	 * A concurrent creation of the same name makes DefineSequence() wait
	 * on pg_class's unique index and fail there once it commits.
	 */
	stmt = makeNode(CreateSeqStmt);
	stmt->sequence = makeRangeVar("distseq", pstrdup(name), -1);
	relid = DefineSequence(make_parsestate(NULL), stmt).objectId;
	CommandCounterIncrement();
	ATExecChangeOwner(relid, owner, false, AccessExclusiveLock);
	CommandCounterIncrement();
	return relid;
}

/*
 * Create a sequence: its backing relation, owned by "owner", its catalog row
 * and its first windows, all in the caller's transaction.  The row and the
 * windows go in without the executor (rows.c): both callers check the
 * arguments against the table's constraints first (sequence.c, peer.c),
 * and the windows' foreign key points at the row this transaction just
 * inserted.
 */
void
distseq_catalog_create(const char *name, Oid owner, int32 block_size,
					   int64 window_size, int64 start_value, int64 max_value,
					   int32 min_open, int32 stripes, int32 stripe,
					   Datum servers)
{
	DistseqSpiContext cxt;
	DistseqCatalog cat = distseq_catalog();
	int64		first_slot;
	int64		last_slot;
	Relation	rel;
	DistseqRows *row;
	Oid			relid;
	uint64		gen;
	DistseqFirstWindows w = {0};
	bool		local = false;

	if (stripes != 1 && !cat.stripes)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("striped sequences need distseq 1.2"),
				 errhint("Run ALTER EXTENSION distseq UPDATE.")));
	if (servers != (Datum) 0 && !cat.peers)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("sequences that draw from other servers need distseq 1.3"),
				 errhint("Run ALTER EXTENSION distseq UPDATE.")));

	distseq_spi_enter_catalog(&cxt);
	relid = catalog_backing_relation(name, owner);
	gen = catalog_new_generation();
	distseq_slots(start_value, max_value, stripes, stripe, &first_slot, &last_slot);
	/* no windows here for one that draws from other servers */
	if (servers == (Datum) 0)
		local = distseq_windows_first(&cat, stripes, window_size, min_open,
									  first_slot, last_slot, &w);

	/* every column this version has; the others at their defaults */
	rel = names_open(RowExclusiveLock);
	row = distseq_rows_begin(rel);
	distseq_rows_set(row, "sequence_name", TEXTOID, CStringGetTextDatum(name));
	distseq_rows_set(row, "seqrel", REGCLASSOID, ObjectIdGetDatum(relid));
	distseq_rows_set(row, "generation", INT8OID, Int64GetDatum((int64) gen));
	distseq_rows_set(row, "block_size", INT4OID, Int32GetDatum(block_size));
	distseq_rows_set(row, "window_size", INT8OID, Int64GetDatum(window_size));
	distseq_rows_set(row, "min_open_windows", INT4OID, Int32GetDatum(min_open));
	distseq_rows_set(row, "start_value", INT8OID, Int64GetDatum(start_value));
	distseq_rows_set(row, "max_value", INT8OID, Int64GetDatum(max_value));
	/* a new sequence has reserved nothing, nor issued or lost any */
	distseq_rows_set(row, "values_reserved", INT8OID, Int64GetDatum(0));
	distseq_rows_set(row, "values_released", INT8OID, Int64GetDatum(0));
	distseq_rows_set(row, "values_issued", INT8OID, Int64GetDatum(0));
	distseq_rows_set(row, "values_lost", INT8OID, Int64GetDatum(0));
	if (cat.stripes)
	{
		distseq_rows_set(row, "stripes", INT4OID, Int32GetDatum(stripes));
		distseq_rows_set(row, "stripe", INT4OID, Int32GetDatum(stripe));
	}
	if (cat.origin)
	{
		distseq_rows_set(row, "origin_system", INT8OID,
						 Int64GetDatum((int64) GetSystemIdentifier()));
		distseq_rows_set(row, "origin_database", OIDOID, ObjectIdGetDatum(MyDatabaseId));
		distseq_rows_set(row, "origin_relation", OIDOID, ObjectIdGetDatum(relid));
		distseq_rows_set(row, "origin_timeline", INT8OID,
						 Int64GetDatum((int64) distseq_timeline()));
	}
	/* a majority of one: this node's mark is the top of its windows */
	if (local && cat.peers)
		distseq_rows_set(row, "hwm", INT8OID, Int64GetDatum(w.top));
	if (servers != (Datum) 0)
		distseq_rows_set(row, "servers", NAMEARRAYOID, servers);
	distseq_rows_insert(row);
	distseq_rows_end(row);
	table_close(rel, NoLock);

	distseq_windows_first_insert(&cat, name, stripes, &w);
	distseq_spi_leave_catalog(&cxt);
	if (servers != (Datum) 0)
		distseq_created_note(relid, gen, 0, -1, false);
	else
		distseq_created_note(relid, gen, first_slot, last_slot, local);
}

/*
 * Look at a column for distseq_create_for_column(): the value to start
 * above and the largest value its type holds.
 */
void
distseq_catalog_column_bounds(Oid relid, const char *column, int64 *max_in_use,
							  int64 *type_max)
{
	char	   *relname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
													 get_rel_name(relid));
	Oid			typid = get_atttype(relid, get_attnum(relid, column));

	switch (typid)
	{
		case INT2OID:
			*type_max = PG_INT16_MAX;
			break;
		case INT4OID:
			*type_max = PG_INT32_MAX;
			break;
		case INT8OID:
			*type_max = PG_INT64_MAX - 1;
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of relation \"%s\" is not of type smallint, integer or bigint",
							column, get_rel_name(relid))));
	}

	/*
	 * As the caller, who owns the table: nothing runs with our rights.  It
	 * names the caller's table, in the caller's search_path: not kept.
	 */
	distseq_spi_connect();
	distseq_spi_exec_once(psprintf("SELECT pg_catalog.max(%s)::pg_catalog.int8 FROM %s",
						  quote_identifier(column), relname),
				 0, NULL, NULL, SPI_OK_SELECT);
	*max_in_use = distseq_spi_int8(0, 1);
	SPI_finish();
}
