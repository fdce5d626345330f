/*-------------------------------------------------------------------------
 *
 * rows.c
 *	  Rows put into distseq's catalog tables without the executor: the heap
 *	  tuple and its index entries, as PostgreSQL's own catalogs get theirs.
 *	  A creation inserts a sequence's row and its first windows this way:
 *	  through SPI, planning and executing the two INSERTs, re-reading the
 *	  tables' CHECK constraints and running the foreign key's check cost
 *	  about as much as the backing sequence's CREATE SEQUENCE itself.
 *	  Also the lookup of a column by name, which reading them uses too.
 *
 * The caller names the columns it sets, with their types; every other
 * column gets its default, as an INSERT naming the same columns would.
 * NOT NULL is checked here.  CHECK constraints, foreign keys and triggers
 * are not: a caller inserts only rows that hold the constraints (its
 * arguments checked first), and the only foreign key, of distseq_windows,
 * points at a row the same creation inserted just before.  Unique indexes
 * check as for any insert, waiting for a concurrent inserter of the same
 * key; partial indexes get an entry only for rows their predicate admits.
 *
 * Locks: the caller holds RowExclusiveLock on the table, as an INSERT
 * does, to the end of the transaction; its indexes get the same while rows
 * go in.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "rewrite/rewriteHandler.h"
#include "utils/builtins.h"
#include "utils/rel.h"

struct DistseqRows
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	bool	   *set;			/* per attribute: set for the next row */
	bool		inserted;		/* some row went in since the last CCI */
};

/* Insert rows into "rel", which the caller opened with RowExclusiveLock */
DistseqRows *
distseq_rows_begin(Relation rel)
{
	DistseqRows *rows = palloc0(sizeof(DistseqRows));
	TupleDesc	desc;

	rows->rel = rel;
	desc = RelationGetDescr(rows->rel);
	rows->estate = CreateExecutorState();
	rows->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rows->rri, rows->rel, 1, NULL, 0);
	ExecOpenIndices(rows->rri, false);
	rows->slot = ExecInitExtraTupleSlot(rows->estate, desc, &TTSOpsVirtual);
	rows->set = palloc0(desc->natts * sizeof(bool));
	ExecClearTuple(rows->slot);
	return rows;
}

/* The number of a table's column by name, or InvalidAttrNumber */
AttrNumber
distseq_column(TupleDesc desc, const char *column)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), column) == 0)
			return att->attnum;
	}
	return InvalidAttrNumber;
}

/* Set a column of the next row: "type" must be the column's type */
void
distseq_rows_set(DistseqRows *rows, const char *column, Oid type, Datum value)
{
	TupleDesc	desc = RelationGetDescr(rows->rel);
	AttrNumber	attnum = distseq_column(desc, column);
	Form_pg_attribute att;

	if (attnum == InvalidAttrNumber)
		elog(ERROR, "distseq: %s has no column %s",
			 RelationGetRelationName(rows->rel), column);
	att = TupleDescAttr(desc, attnum - 1);
	if (att->atttypid != type)
		elog(ERROR, "distseq: column %s of %s has type %s, not %s",
			 column, RelationGetRelationName(rows->rel),
			 format_type_be(att->atttypid), format_type_be(type));
	rows->slot->tts_values[attnum - 1] = value;
	rows->slot->tts_isnull[attnum - 1] = false;
	rows->set[attnum - 1] = true;
}

/* Insert the row set so far, every other column at its default */
void
distseq_rows_insert(DistseqRows *rows)
{
	TupleDesc	desc = RelationGetDescr(rows->rel);
	TupleTableSlot *slot = rows->slot;
	ExprContext *econtext = GetPerTupleExprContext(rows->estate);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (rows->set[i])
			continue;
		slot->tts_values[i] = (Datum) 0;
		slot->tts_isnull[i] = true;
		if (att->attisdropped)
			continue;
		if (att->attgenerated)
			elog(ERROR, "distseq: column %s of %s is generated",
				 NameStr(att->attname), RelationGetRelationName(rows->rel));
		if (att->atthasdef)
		{
			Expr	   *expr = (Expr *) build_column_default(rows->rel, i + 1);

			if (expr != NULL)
				slot->tts_values[i] =
					ExecEvalExprSwitchContext(ExecPrepareExpr(expr, rows->estate),
											  econtext, &slot->tts_isnull[i]);
		}
		if (att->attnotnull && slot->tts_isnull[i])
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("null value in column \"%s\" of relation \"%s\" violates not-null constraint",
							NameStr(att->attname), RelationGetRelationName(rows->rel))));
	}
	ExecStoreVirtualTuple(slot);
	simple_table_tuple_insert(rows->rel, slot);
	(void) distseq_insert_index_tuples(rows->rri, slot, rows->estate);
	ResetPerTupleExprContext(rows->estate);
	ExecClearTuple(slot);
	memset(rows->set, 0, desc->natts * sizeof(bool));
	rows->inserted = true;
}

/*
 * Done: the rows inserted are visible to the transaction's next command.
 * The caller closes the table.
 */
void
distseq_rows_end(DistseqRows *rows)
{
	ExecCloseIndices(rows->rri);
	ExecResetTupleTable(rows->estate->es_tupleTable, false);
	FreeExecutorState(rows->estate);
	if (rows->inserted)
		CommandCounterIncrement();
	pfree(rows->set);
	pfree(rows);
}
