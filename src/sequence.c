/*-------------------------------------------------------------------------
 *
 * sequence.c
 *	  The SQL functions that create and drop distseq sequences:
 *	  distseq_create(), distseq_create_for_column() and distseq_drop().
 *
 * They check their arguments here and leave the catalog work to
 * catalog.c.  Every one runs in the caller's transaction: creating and
 * dropping are ordinary transactional DDL.  Values are reserved only by
 * the refill worker.
 *
 * With if_not_exists, a sequence of the name that exists already is left
 * as it is, whatever it was created with, as CREATE SEQUENCE IF NOT EXISTS
 * does; unlike it, a creation that waited for a concurrent one of the same
 * name and lost finds the winner and skips too.
 *
 * A sequence that a column owns (owned_by, and always for
 * distseq_create_for_column() from 1.7 on) belongs to the table's owner, as
 * serial's does, whoever of the roles with the table owner's rights creates
 * it; ownedby.c links it to the column.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "foreign/foreign.h"
#include "utils/array.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#define DISTSEQ_MAX_VALUE	(PG_INT64_MAX - 1)

static void
check_positive(int64 value, const char *what)
{
	if (value <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be positive", what),
				 errdetail("The value given was " INT64_FORMAT ".", value)));
}

/*
 * The servers a sequence draws from must be distseq peers this role can
 * reach; a striped sequence has nobody to draw from.
 */
static void
check_servers(ArrayType *servers, int32 stripes, Oid owner)
{
	Datum	   *names;
	bool	   *nulls;
	int			n;

	deconstruct_array(servers, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR,
					  &names, &nulls, &n);
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("servers must name at least one server")));
	if (stripes != 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a sequence that draws from other servers cannot be striped")));
	for (int i = 0; i < n; i++)
	{
		ForeignServer *server;

		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("servers must not contain nulls")));
		server = GetForeignServerByName(NameStr(*DatumGetName(names[i])), false);
		if (strcmp(GetForeignDataWrapper(server->fdwid)->fdwname, "distseq") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("server \"%s\" does not use the distseq foreign-data wrapper",
							server->servername)));
		/* the worker connects as the owner, with its user mapping */
		if (distseq_foreign_server_aclcheck(server->serverid, owner, ACL_USAGE) != ACLCHECK_OK)
			aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FOREIGN_SERVER, server->servername);
		(void) GetUserMapping(owner, server->serverid);
	}
}

pg_noreturn static void
report_exists(const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_DUPLICATE_OBJECT),
			 errmsg("distseq sequence \"%s\" already exists", name)));
}

static void
report_skipping(const char *name)
{
	ereport(NOTICE,
			(errcode(ERRCODE_DUPLICATE_OBJECT),
			 errmsg("distseq sequence \"%s\" already exists, skipping", name)));
}

/*
 * Create the sequence in a subtransaction.  A name in the catalog already
 * fails the creation's first check (distseq_catalog_create); a creation of
 * the same name in a transaction that was under way when ours looked makes
 * ours wait on the unique index of the names, and fail there when that
 * transaction commits.  Either way the sequence is then found, and ours
 * skips or reports it.  Returns whether it created one.
 */
static bool
create_or_find(const char *name, Oid seqowner, bool if_not_exists,
			   int32 block_size, int64 window_size, int64 start_value,
			   int64 max_value, int32 min_open, int32 stripes, int32 stripe,
			   Datum servers)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;
	DistseqDef	def;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		distseq_catalog_create(name, seqowner, block_size, window_size,
							   start_value, max_value, min_open, stripes,
							   stripe, servers);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
	if (edata == NULL)
		return true;

	/*
	 * The name was in the catalog already, or (unique violation) a
	 * concurrent creation of it committed: in read committed, the lookup
	 * sees what the winner committed.
	 */
	if ((edata->sqlerrcode != ERRCODE_DUPLICATE_OBJECT &&
		 edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION) ||
		!distseq_catalog_lookup(name, &def))
		ReThrowError(edata);
	if (!if_not_exists)
		report_exists(name);
	report_skipping(name);
	return false;
}

/*
 * Check the arguments common to both creators and create the sequence,
 * owned by "owner", or skip one that exists when if_not_exists.  Returns
 * whether it created one.
 */
static bool
create_sequence(const char *name, Oid owner, bool if_not_exists,
				int32 block_size, int64 window_size, int64 start_value,
				int64 max_value, int32 min_open, int32 stripes, int32 stripe,
				Datum servers)
{
	int64		first;
	int64		last;

	distseq_check_name(name);
	check_positive(block_size, "block_size");
	check_positive(window_size, "window_size");
	check_positive(min_open, "min_open_windows");
	if (min_open > DISTSEQ_MAX_OPEN_WINDOWS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("min_open_windows must be at most %d", DISTSEQ_MAX_OPEN_WINDOWS)));
	if (max_value > DISTSEQ_MAX_VALUE)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_value must be at most " INT64_FORMAT, DISTSEQ_MAX_VALUE)));
	if (start_value > max_value)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("start_value (" INT64_FORMAT ") cannot be greater than max_value (" INT64_FORMAT ")",
						start_value, max_value)));

	check_positive(stripes, "stripes");
	if (start_value < PG_INT64_MIN + stripes || max_value < PG_INT64_MIN + stripes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("start_value and max_value must be at least " INT64_FORMAT,
						PG_INT64_MIN + stripes)));
	if (stripe < 0 || stripe >= stripes)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("stripe must be between 0 and stripes - 1 (%d)", stripes - 1),
				 errdetail("The value given was %d.", stripe)));
	distseq_slots(start_value, max_value, stripes, stripe, &first, &last);
	if (first > last)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no value from start_value to max_value is in stripe %d of %d",
						stripe, stripes)));

	if (servers != (Datum) 0)
		check_servers(DatumGetArrayTypeP(servers), stripes, owner);

	return create_or_find(name, owner, if_not_exists, block_size,
						  window_size, start_value, max_value, min_open,
						  stripes, stripe, servers);
}

static bool
column_is_identity(Oid relid, const char *column)
{
	HeapTuple	tup = SearchSysCacheAttName(relid, column);
	bool		identity = false;

	if (HeapTupleIsValid(tup))
	{
		identity = ((Form_pg_attribute) GETSTRUCT(tup))->attidentity != '\0';
		ReleaseSysCache(tup);
	}
	return identity;
}

#define ARG_OR(n, getter, dflt)	(PG_ARGISNULL(n) ? (dflt) : getter(n))

/* The backing relation of a sequence this transaction created */
static Oid
backing_relid(const char *name)
{
	return get_relname_relid(name, get_namespace_oid("distseq", false));
}

PG_FUNCTION_INFO_V1(distseq_create);

Datum
distseq_create(PG_FUNCTION_ARGS)
{
	char	   *name;
	Oid			owner = GetUserId();
	Oid			relid = InvalidOid;
	AttrNumber	attnum = InvalidAttrNumber;
	bool		created;

	distseq_check_loaded();
	distseq_check_writable("distseq_create()");
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("distseq sequence name must not be null")));
	name = text_to_cstring(PG_GETARG_TEXT_PP(0));

	/* owned_by came with 1.7: the caller must have the table owner's rights */
	if (PG_NARGS() > 10 && !PG_ARGISNULL(10))
	{
		List	   *names;

		names = distseq_qualified_name_list(text_to_cstring(PG_GETARG_TEXT_PP(10)));
		relid = distseq_ownedby_column(names, &attnum, &owner);
		if (!distseq_rel_ownercheck(relid, GetUserId()))
			aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));
	}

	created = create_sequence(name, owner,
	/* if_not_exists came with 1.6 */
							  PG_NARGS() > 9 && ARG_OR(9, PG_GETARG_BOOL, false),
							  ARG_OR(1, PG_GETARG_INT32, distseq_default_block_size),
							  ARG_OR(2, PG_GETARG_INT64, 100000),
							  ARG_OR(3, PG_GETARG_INT64, 1),
							  ARG_OR(4, PG_GETARG_INT64, DISTSEQ_MAX_VALUE),
							  ARG_OR(5, PG_GETARG_INT32, 2),
	/* the 1.0 and 1.1 definitions have no stripes */
							  PG_NARGS() > 6 ? ARG_OR(6, PG_GETARG_INT32, 1) : 1,
							  PG_NARGS() > 7 ? ARG_OR(7, PG_GETARG_INT32, 0) : 0,
	/* servers came with 1.3 */
							  PG_NARGS() > 8 && !PG_ARGISNULL(8) ? PG_GETARG_DATUM(8) : (Datum) 0);
	/* one that if_not_exists skipped keeps its link, or none */
	if (created && OidIsValid(relid))
		distseq_ownedby_link(backing_relid(name), relid, attnum);
	PG_RETURN_VOID();
}

/* The table and column distseq_create_for_column() is given, checked */
static void
check_column(Oid relid, const char *column)
{
	char		relkind;

	if (get_rel_name(relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	relkind = get_rel_relkind(relid);
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", get_rel_name(relid))));
	if (!distseq_rel_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));
	if (get_attnum(relid, column) == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						column, get_rel_name(relid))));
}

/*
 * Make sequence "name" the default of the column, instead of an identity
 * if it has one; as the caller, who owns the table.
 */
static void
column_set_default(Oid relid, const char *relname, const char *column,
				   const char *name)
{
	distseq_spi_connect();
	if ((column_is_identity(relid, column) &&
		 SPI_execute(psprintf("ALTER TABLE %s ALTER COLUMN %s DROP IDENTITY",
							  relname, quote_identifier(column)),
					 false, 0) != SPI_OK_UTILITY) ||
		SPI_execute(psprintf("ALTER TABLE %s ALTER COLUMN %s SET DEFAULT %s.distseq_nextval(%s::pg_catalog.text)",
							 relname, quote_identifier(column),
							 distseq_extension_schema(), quote_literal_cstr(name)),
					false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not set the default of %s.%s", relname, column);
	SPI_finish();
}

PG_FUNCTION_INFO_V1(distseq_create_for_column);

/*
 * Create a sequence that starts above the values a column already holds
 * and make it the column's default, replacing a serial default or an
 * identity.  From 1.7 on the column owns it, as a serial column owns its
 * sequence.  Returns the sequence's name.  With if_not_exists, a sequence
 * of that name that exists leaves the table and its default as they are.
 */
Datum
distseq_create_for_column(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *column;
	char	   *name;
	char	   *relname;
	int64		max_in_use;
	int64		type_max;
	int64		max_value;
	bool		if_not_exists;
	bool		owned;
	Oid			owner = GetUserId();
	DistseqDef	def;

	distseq_check_loaded();
	distseq_check_writable("distseq_create_for_column()");
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("table and column must not be null")));
	relid = PG_GETARG_OID(0);
	column = NameStr(*PG_GETARG_NAME(1));
	check_column(relid, column);
	/* a catalog older than 1.7 would keep a sequence dropped with its table */
	owned = distseq_catalog().owned_by;
	if (owned)
		owner = distseq_ownedby_check_table(relid);

	name = PG_ARGISNULL(2) ? psprintf("%s_%s", get_rel_name(relid), column)
		: text_to_cstring(PG_GETARG_TEXT_PP(2));
	/* if_not_exists came with 1.6 */
	if_not_exists = PG_NARGS() > 7 && ARG_OR(7, PG_GETARG_BOOL, false);
	if (if_not_exists)
	{
		distseq_check_name(name);
		if (distseq_catalog_lookup(name, &def))
		{
			report_skipping(name);
			PG_RETURN_TEXT_P(cstring_to_text(name));
		}
	}
	relname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
										 get_rel_name(relid));

	/* lock out writers first, then read the largest value in use */
	distseq_spi_connect();
	if (SPI_execute(psprintf("LOCK TABLE %s IN SHARE ROW EXCLUSIVE MODE", relname),
					false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not lock table %s", relname);
	SPI_finish();

	distseq_catalog_column_bounds(relid, column, &max_in_use, &type_max);
	max_value = ARG_OR(5, PG_GETARG_INT64, type_max);
	if (max_value > type_max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_value " INT64_FORMAT " does not fit column \"%s\"", max_value, column),
				 errdetail("Its type holds values up to " INT64_FORMAT ".", type_max)));
	if (max_in_use >= max_value)
		ereport(ERROR,
				(errcode(ERRCODE_SEQUENCE_GENERATOR_LIMIT_EXCEEDED),
				 errmsg("column \"%s\" already holds the value " INT64_FORMAT ", not below max_value " INT64_FORMAT,
						column, max_in_use, max_value)));

	if (!create_sequence(name, owner, if_not_exists,
						 ARG_OR(3, PG_GETARG_INT32, distseq_default_block_size),
						 ARG_OR(4, PG_GETARG_INT64, 100000),
						 Max(max_in_use + 1, 1),
						 max_value,
						 ARG_OR(6, PG_GETARG_INT32, 2),
						 1, 0, (Datum) 0))
		PG_RETURN_TEXT_P(cstring_to_text(name));
	if (owned)
		distseq_ownedby_link(backing_relid(name), relid,
							 get_attnum(relid, column));

	column_set_default(relid, relname, column, name);

	PG_RETURN_TEXT_P(cstring_to_text(name));
}

PG_FUNCTION_INFO_V1(distseq_drop);

/*
 * Drop a sequence: drop its backing relation as the caller, so that the
 * ownership check is PostgreSQL's own; the event trigger distseq_on_drop
 * removes the catalog rows.
 */
Datum
distseq_drop(PG_FUNCTION_ARGS)
{
	DistseqDef	def;
	char	   *name;

	distseq_check_loaded();
	distseq_check_writable("distseq_drop()");
	name = distseq_name_arg(fcinfo);
	if (!distseq_catalog_lookup(name, &def))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("distseq sequence \"%s\" does not exist", name)));

	distseq_spi_connect();
	if (SPI_execute(psprintf("DROP SEQUENCE distseq.%s", quote_identifier(name)),
					false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not drop sequence distseq.%s", name);
	SPI_finish();
	PG_RETURN_VOID();
}
