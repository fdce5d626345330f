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
 * table owns one, and so is ALTER EXTENSION SET SCHEMA of an extension
 * that such a table is a member of.
 *
 * A temporary table cannot own one: a distseq sequence is permanent, and
 * the end of the session drops a temporary table without running the
 * event trigger.  A permanent column can still go with a temporary object
 * (its type a temporary domain, say): the end of the session, DISCARD TEMP
 * and ON COMMIT DROP drop it, and the sequence, as internal deletions, which
 * no event trigger sees, nor does any under session_replication_role =
 * replica.  The object access hook (inuse.c) hands such drops of a backing
 * relation to distseq_ownedby_drop, which forgets the sequence as the event
 * trigger would.  Where the trigger refuses the drop of one that peers
 * share, it refuses that under replica too, but keeps it, with a warning,
 * after an internal deletion: that is no command to refuse (the end of the
 * session cannot fail).
 *
 * Locking: as ALTER SEQUENCE OWNED BY, ShareRowExclusiveLock on the
 * sequence and AccessShareLock on the table, kept to the end of the
 * transaction.  distseq_ownedby_drop runs under the dropper's
 * AccessExclusiveLock on the backing relation and deletes the catalog rows
 * directly (RowExclusiveLock), waiting for a refill that updates them:
 * the sequence's row first, then its windows, in the order in which every
 * reservation and write-back locks them (windows.c), or a reservation that
 * merges windows would wait for a window deleted here while we wait for
 * its row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/heapam.h"
#include "access/genam.h"
#include "access/relation.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "commands/tablecmds.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
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
	if (!distseq_catalog().owned_by)
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

/* Moving table relid to another schema would take its backing sequences */
static void
ownedby_check_move(Oid relid)
{
	ListCell   *lc;

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
 * ALTER TABLE SET SCHEMA would take the linked backing sequences along, and
 * so would ALTER EXTENSION SET SCHEMA, with the tables that are members of
 * the extension (PostgreSQL then fails on an assertion, or with an internal
 * error)
 */
static void
ownedby_check_set_schema(AlterObjectSchemaStmt *stmt)
{
	Oid			extid;
	Relation	depend;
	ScanKeyData key[2];
	SysScanDesc scan;
	HeapTuple	tup;

	if (stmt->objectType == OBJECT_TABLE)
	{
		Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);

		if (OidIsValid(relid))
			ownedby_check_move(relid);
		return;
	}
	extid = get_extension_oid(strVal(stmt->object), true);
	if (!OidIsValid(extid))
		return;
	depend = table_open(DependRelationId, AccessShareLock);
	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(ExtensionRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(extid));
	scan = systable_beginscan(depend, DependReferenceIndexId, true, NULL, 2, key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tup);

		if (dep->deptype == DEPENDENCY_EXTENSION &&
			dep->classid == RelationRelationId && dep->objsubid == 0)
			ownedby_check_move(dep->objid);
	}
	systable_endscan(scan);
	table_close(depend, AccessShareLock);
}

/* A column of one of distseq's catalog tables */
static AttrNumber
forget_attnum(Relation rel, const char *name)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(rel), name);

	if (attnum == InvalidAttrNumber)
		elog(ERROR, "column \"%s\" of relation \"%s\" not found",
			 name, RelationGetRelationName(rel));
	return attnum;
}

/* Whether this node has peers, as the event trigger asks it */
static bool
forget_has_peers(Oid nspid, Snapshot snap)
{
	Relation	rel = table_open(get_relname_relid("distseq_node", nspid),
								 AccessShareLock);
	AttrNumber	epoch_att = forget_attnum(rel, "epoch");
	AttrNumber	members_att = forget_attnum(rel, "members");
	TableScanDesc scan = table_beginscan(rel, snap, 0, NULL);
	HeapTuple	tup;
	bool		peers = false;

	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		isnull;
		Datum		d;

		d = heap_getattr(tup, epoch_att, RelationGetDescr(rel), &isnull);
		if (!isnull && DatumGetInt64(d) > 0)
			peers = true;
		d = heap_getattr(tup, members_att, RelationGetDescr(rel), &isnull);
		if (!isnull)
		{
			ArrayType  *members = DatumGetArrayTypeP(d);

			if (ArrayGetNItems(ARR_NDIM(members), ARR_DIMS(members)) > 1)
				peers = true;
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	return peers;
}

/*
 * Delete the rows of catalog table "table" whose column "column" holds
 * relid (an oid) or name (a text).  The refill worker updates them in
 * transactions of its own: one it updated meanwhile is looked for again,
 * as is one this transaction updated in the current command.
 */
static void
forget_rows(Oid nspid, const char *table, const char *column, Oid relid,
			const char *name)
{
	Relation	rel = table_open(get_relname_relid(table, nspid), RowExclusiveLock);
	AttrNumber	att = forget_attnum(rel, column);
	bool		again;

	do
	{
		Snapshot	snap = RegisterSnapshot(GetLatestSnapshot());
		TableScanDesc scan = table_beginscan(rel, snap, 0, NULL);
		HeapTuple	tup;

		again = false;
		while (!again && (tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
		{
			bool		isnull;
			Datum		d = heap_getattr(tup, att, RelationGetDescr(rel), &isnull);
			TM_FailureData tmfd;

			if (isnull || (name ? strcmp(TextDatumGetCString(d), name) != 0
						   : DatumGetObjectId(d) != relid))
				continue;
			switch (heap_delete(rel, &tup->t_self, GetCurrentCommandId(true),
								InvalidSnapshot, true, &tmfd, false))
			{
				case TM_Ok:
					break;
				case TM_SelfModified:
				case TM_Updated:
				case TM_Deleted:
					/* seen again after CommandCounterIncrement, if it lives */
					again = true;
					break;
				default:
					elog(ERROR, "could not delete from %s", table);
			}
		}
		table_endscan(scan);
		UnregisterSnapshot(snap);
		CommandCounterIncrement();
	} while (again);
	table_close(rel, RowExclusiveLock);
}

/*
 * The object access hook's part: relation relid is being dropped, with
 * dropflags.  If it backs a distseq sequence and the event trigger will not
 * see the drop, forget the sequence here, as the trigger would.  No SQL:
 * an ON COMMIT DROP runs after the last moment a transaction may run any.
 */
void
distseq_ownedby_drop(Oid relid, int dropflags)
{
	Oid			nspid;
	Relation	rel;
	Snapshot	snap;
	TableScanDesc scan;
	HeapTuple	tup;
	char	   *name = NULL;
	bool		shared = false;

	if (!(dropflags & PERFORM_DELETION_INTERNAL) &&
		SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA)
		return;
	if (!ownedby_is_backing(relid))
		return;
	/* not in DROP EXTENSION, which may have dropped the catalog already */
	nspid = get_rel_namespace(relid);
	if (!OidIsValid(get_relname_relid("distseq_sequences", nspid)) ||
		!OidIsValid(get_relname_relid("distseq_windows", nspid)) ||
		!distseq_catalog().owned_by)
		return;

	rel = table_open(get_relname_relid("distseq_sequences", nspid), AccessShareLock);
	snap = RegisterSnapshot(GetLatestSnapshot());
	scan = table_beginscan(rel, snap, 0, NULL);
	while ((tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		bool		servers_null;
		Datum		d = heap_getattr(tup, forget_attnum(rel, "seqrel"), desc, &isnull);

		if (isnull || DatumGetObjectId(d) != relid)
			continue;
		name = TextDatumGetCString(heap_getattr(tup, forget_attnum(rel, "sequence_name"),
												desc, &isnull));
		d = heap_getattr(tup, forget_attnum(rel, "stripes"), desc, &isnull);
		(void) heap_getattr(tup, forget_attnum(rel, "servers"), desc, &servers_null);
		shared = DatumGetInt32(d) == 1 && servers_null &&
			forget_has_peers(nspid, snap);
		break;
	}
	table_endscan(scan);
	UnregisterSnapshot(snap);
	table_close(rel, AccessShareLock);
	if (name == NULL)
		return;

	if (!shared)
	{
		/* the row before the windows, as windows.c locks them */
		forget_rows(nspid, "distseq_sequences", "seqrel", relid, NULL);
		forget_rows(nspid, "distseq_windows", "sequence_name", InvalidOid, name);
	}
	else if (!(dropflags & PERFORM_DELETION_INTERNAL))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("cannot drop distseq sequence \"%s\" on a node with peers", name),
				 errhint("Its high-water mark here guards the windows of the other members.")));
	else
		ereport(WARNING,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("distseq sequence \"%s\" is kept on a node with peers", name),
				 errdetail("Its backing sequence was dropped with a temporary object, but its high-water mark here guards the windows of the other members.")));
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
		(((AlterObjectSchemaStmt *) stmt)->objectType == OBJECT_TABLE ||
		 ((AlterObjectSchemaStmt *) stmt)->objectType == OBJECT_EXTENSION))
		ownedby_check_set_schema((AlterObjectSchemaStmt *) stmt);
	return false;
}
