/*-------------------------------------------------------------------------
 *
 * ownedby.c
 *	  The link between a distseq sequence and the table column that owns it,
 *	  as between a serial column and its sequence: dropping the column or
 *	  its table drops the sequence.
 *
 * The link is PostgreSQL's own: an auto dependency of the backing sequence
 * relation (distseq.<name>) on the column, which ALTER SEQUENCE OWNED BY
 * records.  DROP TABLE, ALTER TABLE DROP COLUMN, DROP SCHEMA CASCADE and
 * DROP OWNED drop the backing sequence with the column, and that is a drop
 * of the distseq sequence like DROP SEQUENCE: the object access hook
 * (inuse.c) waits for the transactions that use it, and the event trigger
 * distseq_on_drop removes its catalog rows.  ALTER TABLE OWNER TO hands the
 * backing sequence to the new owner, pg_get_serial_sequence() and psql's \d
 * show the link, and pg_dump writes it as ALTER SEQUENCE ... OWNED BY.
 *
 * PostgreSQL links a sequence only to a table of its own schema, and the
 * backing sequences all live in schema distseq: ALTER SEQUENCE OWNED BY on
 * one of them is carried out here, from the utility hook, with the other
 * checks PostgreSQL makes (the caller owns the sequence, which has the
 * table's owner).  ALTER TABLE SET SCHEMA would move the linked sequences
 * along with their table, out of schema distseq: it is refused while the
 * table owns one.
 *
 * A temporary table cannot own one: a distseq sequence is permanent, and
 * the end of the session drops a temporary table without running the
 * event trigger.
 *
 * Locking: as ALTER SEQUENCE OWNED BY, ShareRowExclusiveLock on the
 * sequence and AccessShareLock on the table, kept to the end of the
 * transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/relation.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "commands/tablecmds.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

/* The owner of a relation */
static Oid
ownedby_rel_owner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/* Whether a relation is the backing sequence of a distseq sequence */
static bool
ownedby_is_backing(Oid relid)
{
	Oid			extid;

	if (get_rel_relkind(relid) != RELKIND_SEQUENCE)
		return false;
	/* schema distseq, which the extension made: not a look-alike */
	extid = get_extension_oid("distseq", true);
	return OidIsValid(extid) &&
		getExtensionOfObject(NamespaceRelationId, get_rel_namespace(relid)) == extid;
}

static void
ownedby_check_table(Relation rel)
{
	char		relkind = rel->rd_rel->relkind;

	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("distseq sequence cannot be owned by relation \"%s\"",
						RelationGetRelationName(rel)),
				 errdetail("Only a column of a table can own a distseq sequence.")));
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("distseq sequence cannot be owned by temporary table \"%s\"",
						RelationGetRelationName(rel)),
				 errdetail("A distseq sequence outlives the session, whose end drops the table without telling distseq."),
				 errhint("Create the sequence with distseq_create() and set the column's default to distseq_nextval().")));
}

/*
 * Check that a table may own a distseq sequence, and lock it against a
 * concurrent drop.  Returns its owner.
 */
Oid
distseq_ownedby_check_table(Oid relid)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	Oid			owner = rel->rd_rel->relowner;

	ownedby_check_table(rel);
	relation_close(rel, NoLock);
	return owner;
}

/*
 * The column that "names" (table.column, the table's name qualified or
 * not) denotes, checked as one that may own a distseq sequence: returns its
 * table, locked, and sets *attnum and *owner (the table's owner).
 */
Oid
distseq_ownedby_column(List *names, AttrNumber *attnum, Oid *owner)
{
	int			nnames = list_length(names);
	List	   *table;
	char	   *column;
	Relation	rel;
	Oid			relid;

	if (nnames < 2)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("\"%s\" does not name a column", NameListToString(names)),
				 errhint("Name the column as table.column or schema.table.column.")));
	column = strVal(llast(names));
	table = list_truncate(list_copy(names), nnames - 1);
	rel = relation_openrv(makeRangeVarFromNameList(table), AccessShareLock);
	ownedby_check_table(rel);
	relid = RelationGetRelid(rel);
	*attnum = get_attnum(relid, column);
	/* nor a system column */
	if (*attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						column, RelationGetRelationName(rel))));
	*owner = rel->rd_rel->relowner;
	relation_close(rel, NoLock);
	return relid;
}

/*
 * Link a backing sequence to a column, replacing any link it had, or only
 * unlink it when attnum is InvalidAttrNumber.
 */
void
distseq_ownedby_link(Oid seqid, Oid relid, AttrNumber attnum)
{
	ObjectAddress seq;
	ObjectAddress col;

	deleteDependencyRecordsForClass(RelationRelationId, seqid,
									RelationRelationId, DEPENDENCY_AUTO);
	if (attnum == InvalidAttrNumber)
		return;
	ObjectAddressSet(seq, RelationRelationId, seqid);
	ObjectAddressSubSet(col, RelationRelationId, relid, attnum);
	recordDependencyOn(&seq, &col, DEPENDENCY_AUTO);
}

/*
 * ALTER SEQUENCE distseq.<name> OWNED BY table.column | NONE, alone: what
 * pg_dump writes.  With any other option the statement is PostgreSQL's.
 */
static bool
ownedby_alter_sequence(AlterSeqStmt *stmt)
{
	DefElem    *opt;
	List	   *names;
	Oid			seqid;

	if (list_length(stmt->options) != 1)
		return false;
	opt = linitial_node(DefElem, stmt->options);
	if (strcmp(opt->defname, "owned_by") != 0)
		return false;
	seqid = RangeVarGetRelid(stmt->sequence, NoLock, true);
	if (!OidIsValid(seqid) || !ownedby_is_backing(seqid))
		return false;

	/* what standard_ProcessUtility checks for it */
	PreventCommandIfReadOnly("ALTER SEQUENCE");
	PreventCommandIfParallelMode("ALTER SEQUENCE");
	PreventCommandDuringRecovery("ALTER SEQUENCE");
	if (distseq_catalog_minor() < 7)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("distseq sequences owned by a column need distseq 1.7"),
				 errhint("Run ALTER EXTENSION distseq UPDATE.")));

	seqid = RangeVarGetRelidExtended(stmt->sequence, ShareRowExclusiveLock, 0,
									 RangeVarCallbackOwnsRelation, NULL);
	names = (List *) opt->arg;
	if (list_length(names) == 1 && strcmp(strVal(linitial(names)), "none") == 0)
		distseq_ownedby_link(seqid, InvalidOid, InvalidAttrNumber);
	else
	{
		AttrNumber	attnum;
		Oid			owner;
		Oid			relid = distseq_ownedby_column(names, &attnum, &owner);

		if (owner != ownedby_rel_owner(seqid))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("sequence must have same owner as table it is linked to")));
		distseq_ownedby_link(seqid, relid, attnum);
	}
	InvokeObjectPostAlterHook(RelationRelationId, seqid, 0);
	return true;
}

/* ALTER TABLE SET SCHEMA would take the linked backing sequences along */
static void
ownedby_check_set_schema(AlterObjectSchemaStmt *stmt)
{
	Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	ListCell   *lc;

	if (!OidIsValid(relid))
		return;
	foreach(lc, getOwnedSequences(relid))
	{
		Oid			seqid = lfirst_oid(lc);

		if (ownedby_is_backing(seqid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot move table \"%s\" to another schema", get_rel_name(relid)),
					 errdetail("A column of it owns distseq sequence \"%s\", whose backing sequence must stay in schema distseq.",
							   get_rel_name(seqid)),
					 errhint("Unlink it first with ALTER SEQUENCE distseq.%s OWNED BY NONE, and link it again afterwards.",
							 quote_identifier(get_rel_name(seqid)))));
	}
}

/*
 * The utility hook's part: returns whether it carried out the statement,
 * which then must not run again.
 */
bool
distseq_ownedby_utility(Node *stmt)
{
	if (IsA(stmt, AlterSeqStmt))
		return ownedby_alter_sequence((AlterSeqStmt *) stmt);
	if (IsA(stmt, AlterObjectSchemaStmt) &&
		((AlterObjectSchemaStmt *) stmt)->objectType == OBJECT_TABLE)
		ownedby_check_set_schema((AlterObjectSchemaStmt *) stmt);
	return false;
}
