/*-------------------------------------------------------------------------
 *
 * windows.c
 *	  The window allocator.  A sequence's values are reserved from hi-lo
 *	  windows in distseq_windows, counted in slots (slot s is the value
 *	  s * stripes + stripe): this file does the arithmetic of slots, opens
 *	  windows above the highest one a sequence ever had, takes reservations
 *	  from the first open one, merges the closed windows below the one a
 *	  reservation closes into one row (WINDOWS_MERGE), gives unused ranges
 *	  back, and rejoins a catalog restored or moved from elsewhere.
 *
 * Reservations are made only in transactions of their own -- the refill
 * worker's (distseq_catalog_reserve), or the one a peer's libpq session
 * commits (distseq_peer_reserve, catalog.c) -- never in a user's: a
 * rollback there would give back values that are already in use.  The one exception is
 * the transaction that created a sequence, which records at its commit
 * what it drew itself (distseq_windows_record_drawn, increate.c).
 *
 * Locking, all row locks on the catalog tables:
 *	- the sequence's row in distseq_sequences, FOR NO KEY UPDATE, before
 *	  anything is reserved (by the reservation's callers) or a creating
 *	  transaction's draws are recorded: it orders us against distseq_drop,
 *	  distseq_setval and friends.  A release locks it FOR SHARE, then the
 *	  windows it gives back to, and updates the row last;
 *	- a window's row FOR UPDATE SKIP LOCKED to take from it, so that a
 *	  concurrent reserver takes the next window; FOR UPDATE to give back to
 *	  it or close it on a rejoin;
 *	- with peers, windows come only from the agent's majority protocol: the
 *	  share lock on the node row (distseq_has_peers) and the update of it
 *	  (distseq_note_windows) order window making here against a join
 *	  (change.c).
 *
 * A hot standby never gets here: the worker starts only once recovery has
 * ended, distseq_peer_reserve calls distseq_check_writable() (spi.c)
 * first, and a creating transaction on a standby is refused at its
 * creation.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

/*
 * The slots of a sequence: slot s is the value s * stripes + stripe, and
 * [*first, *last] are the slots whose values lie in [start_value,
 * max_value].  *first > *last when there is none.
 */
void
distseq_slots(int64 start_value, int64 max_value, int32 stripes, int32 stripe,
			  int64 *first, int64 *last)
{
	/* create_sequence() keeps both bounds >= PG_INT64_MIN + stripes */
	int64		from = start_value - stripe;
	int64		to = max_value - stripe;

	/* rounding towards the inside of the range, for negative values too */
	*first = from / stripes + ((from % stripes > 0) ? 1 : 0);
	*last = to / stripes - ((to % stripes < 0) ? 1 : 0);
}

/*
 * How many slots from "top" up to "last" (inclusive), at most "size"; no
 * overflow whatever the bounds.
 */
int64
distseq_room(int64 top, int64 last, int64 size)
{
	uint64		room;

	if (top > last || size <= 0)
		return 0;
	room = (uint64) last - (uint64) top + 1;
	if (room == 0)				/* the whole range of int64 */
		return size;
	return (uint64) size < room ? size : (int64) Min(room, (uint64) PG_INT64_MAX);
}

/*
 * Windows were made here: a node never in a group is no longer fresh.  An
 * update of the node row, not just a lock on it, so that a join waiting
 * for the row sees the flag when it goes on (change.c).  SPI connected.
 */
void
distseq_note_windows(const char *schema, bool changes)
{
	if (!changes)					/* before 1.4, no made_windows */
		return;
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET made_windows = true"
							  " WHERE epoch = 0 AND NOT made_windows", schema),
					 0, NULL, NULL, SPI_OK_UPDATE);
}

/*
 * When a reservation closes a window, the closed windows right below it --
 * from the highest window below it that is not closed, or from the first
 * -- and the window itself become one closed row, at most this many at a
 * time.  So a sequence keeps its open windows and, between them, one row
 * for each run of closed ones: the table does not grow with the history.
 *
 * The merged row holds reserved exactly what its windows did, and the
 * values between them that were never this node's windows (the windows of
 * the other members of a group): nothing is lost, and every reader sees
 * the same top (the end of the highest window), the same highest reserved
 * value (max next_hi, which setval and alter refuse below) and the same
 * "has windows" as before.  A range that a pool gives back lies in one of
 * this node's own windows, so in one row: the release splits that row as
 * it splits any closed window (windows_give_back).  No window is ever made
 * below the top, so the values of a gap can come back to no one.  The
 * merge commits with the reservation: a dump, a copy at any point in time
 * or a standby sees a catalog with the same top and reserved values.
 *
 * Bounded per call so that a close never stalls on a long history (a
 * catalog from an older version); each later close merges more.
 */
#define WINDOWS_MERGE	256

/* The end of the highest window of sequence $1, by index */
static char *
windows_top(const char *schema)
{
	return psprintf("(SELECT window_end FROM %s.distseq_windows"
					" WHERE sequence_name = $1 ORDER BY window_start DESC LIMIT 1)",
					schema);
}

/*
 * Does this node make the windows of a sequence itself?  With peers,
 * windows of the sequences the agent keeps come only from its majority
 * protocol.  The share lock on the node row, and the note made when
 * windows are made, order this against a join (change.c).
 */
static bool
windows_made_here(const DistseqCatalog *cat, int32 stripes)
{
	return !(cat->peers && distseq_has_peers(cat->schema) && stripes == 1);
}

/*
 * Cut windows from *top up, until there are "want" of them or max_value is
 * passed, into new arrays; *top moves to the end of the last.
 */
static int
windows_cut(int64 *top, int64 max_value, int64 window_size, int64 want,
			int64 **starts, int64 **ends)
{
	int			n = 0;

	*starts = palloc(sizeof(int64) * Max(want, 1));
	*ends = palloc(sizeof(int64) * Max(want, 1));
	for (; n < want && *top <= max_value; n++)
	{
		(*starts)[n] = *top;
		*top += distseq_room(*top, max_value, window_size);
		(*ends)[n] = *top;
	}
	return n;
}

/* Insert windows, in one statement, and note that they were made here */
static void
windows_insert(const DistseqCatalog *cat, const char *name, int32 stripes,
			   int64 *starts, int64 *ends, int n)
{
	Oid			types[3] = {TEXTOID, INT8ARRAYOID, INT8ARRAYOID};
	Datum		values[3];

	values[0] = CStringGetTextDatum(name);
	values[1] = distseq_int8_array(starts, n);
	values[2] = distseq_int8_array(ends, n);
	distseq_spi_exec(psprintf("INSERT INTO %s.distseq_windows"
							  " (sequence_name, window_start, window_end, next_hi)"
							  " SELECT $1, w.s, w.e, w.s"
							  " FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)) AS w(s, e)",
							  cat->schema),
					 3, types, values, SPI_OK_INSERT);
	if (stripes == 1)
		distseq_note_windows(cat->schema, cat->changes);
}

/*
 * Keep at least min_open_windows open windows, each new one above the
 * highest window the sequence ever had.  Needs an SPI connection.  Returns
 * false when windows are not made here but by the agent's majority protocol.
 */
bool
distseq_windows_ensure(const DistseqCatalog *cat, const char *name,
					   int32 stripes, int64 window_size, int64 min_open,
					   int64 start_value, int64 max_value)
{
	const char *schema = cat->schema;
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		values[2];
	int64		open;
	int64		top;

	if (!windows_made_here(cat, stripes))
		return false;

	values[0] = CStringGetTextDatum(name);
	/*
	 * Closed windows are never deleted: count only open ones (the partial
	 * index), and find the top through the highest window_start (windows
	 * never overlap), so neither grows with the history.
	 */
	distseq_spi_exec(psprintf("SELECT (SELECT count(*) FROM %s.distseq_windows"
						  "         WHERE sequence_name = $1 AND next_hi < window_end),"
						  " GREATEST(COALESCE(%s, $2), %s)",
						  schema, windows_top(schema),
						  cat->peers ?
						  psprintf("(SELECT hwm FROM %s.distseq_sequences WHERE sequence_name = $1)",
								   schema) : "NULL"),
				 2, types, (Datum[]) {values[0], Int64GetDatum(start_value)},
				 SPI_OK_SELECT);
	open = distseq_spi_int8(0, 1);
	top = distseq_spi_int8(0, 2);

	/* the windows missing, in one statement */
	if (open < min_open)
	{
		int64	   *starts;
		int64	   *ends;
		int			n;

		n = windows_cut(&top, max_value, window_size, min_open - open,
						&starts, &ends);
		if (n > 0)
			windows_insert(cat, name, stripes, starts, ends, n);
	}
	/* a majority of one: this node's mark is the top */
	if (cat->peers)
	{
		values[1] = Int64GetDatum(top);
		distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences SET hwm = $2"
							  " WHERE sequence_name = $1 AND hwm IS DISTINCT FROM $2",
							  schema),
					 2, types, values, SPI_OK_UPDATE);
	}
	return true;
}

/*
 * The first windows of a sequence being created, from first_slot up: what
 * distseq_windows_ensure makes for a sequence with no windows and no mark,
 * cut before its catalog row is inserted so that the row carries its mark
 * (w->top) from the start; distseq_windows_first_insert() inserts them once
 * the row is in.  Returns false, with none cut, when the agent's majority
 * protocol makes them.  Needs an SPI connection.
 */
bool
distseq_windows_first(const DistseqCatalog *cat, int32 stripes,
					  int64 window_size, int64 min_open, int64 first_slot,
					  int64 last_slot, DistseqFirstWindows *w)
{
	w->n = 0;
	w->top = first_slot;
	if (!windows_made_here(cat, stripes))
		return false;
	w->n = windows_cut(&w->top, last_slot, window_size, min_open,
					   &w->starts, &w->ends);
	return true;
}

/*
 * The sequence's row is this transaction's own, so no other can delete it:
 * the windows go in without the executor (rows.c) and without the check of
 * their foreign key to that row, which the executor would run.
 */
void
distseq_windows_first_insert(const DistseqCatalog *cat, const char *name,
							 int32 stripes, DistseqFirstWindows *w)
{
	static DistseqTableCache cache;
	Relation	rel;
	DistseqRows *rows;

	if (w->n == 0)
		return;
	rel = distseq_catalog_open("distseq_windows", &cache, RowExclusiveLock);
	rows = distseq_rows_begin(rel);
	for (int i = 0; i < w->n; i++)
	{
		distseq_rows_set(rows, "sequence_name", TEXTOID, CStringGetTextDatum(name));
		distseq_rows_set(rows, "window_start", INT8OID, Int64GetDatum(w->starts[i]));
		distseq_rows_set(rows, "window_end", INT8OID, Int64GetDatum(w->ends[i]));
		distseq_rows_set(rows, "next_hi", INT8OID, Int64GetDatum(w->starts[i]));
		distseq_rows_insert(rows);
	}
	distseq_rows_end(rows);
	table_close(rel, NoLock);
	if (stripes == 1)
		distseq_note_windows(cat->schema, cat->changes);
}

/*
 * Advance next_hi of the first open window by at most "count" slots and
 * return what was taken; an empty range when no window is open.  *closed
 * says whether it took the window's last slot.  SKIP LOCKED lets a
 * concurrent reserver take the next window.
 */
static DistseqRange
windows_take(const char *schema, const char *name, int64 count, bool *closed)
{
	Oid			types[3] = {TEXTOID, INT8OID, INT8OID};
	Datum		values[3];
	DistseqRange r = {0, 0};
	int64		end;

	*closed = false;
	values[0] = CStringGetTextDatum(name);
	if (distseq_spi_exec(psprintf("SELECT window_start, next_hi, window_end"
							  " FROM %s.distseq_windows"
							  " WHERE sequence_name = $1 AND next_hi < window_end"
							  " ORDER BY window_start LIMIT 1"
							  " FOR UPDATE SKIP LOCKED", schema),
					 1, types, values, SPI_OK_SELECT) != 1)
		return r;

	r.lo = distseq_spi_int8(0, 2);
	end = distseq_spi_int8(0, 3);
	r.hi = r.lo + distseq_room(r.lo, end - 1, count);
	values[1] = distseq_spi_int8(0, 1);
	values[2] = Int64GetDatum(r.hi);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_windows SET next_hi = $3"
						  " WHERE sequence_name = $1 AND window_start = $2",
						  schema),
				 3, types, values, SPI_OK_UPDATE);

	/* it closed the window: merge the run of closed windows it ends */
	*closed = r.hi == end;
	if (*closed)
		distseq_spi_exec(psprintf("WITH run AS (SELECT window_start FROM %s.distseq_windows"
								  "  WHERE sequence_name = $1 AND window_start <= $2"
								  "  AND window_start > COALESCE((SELECT max(window_start)"
								  "   FROM %s.distseq_windows WHERE sequence_name = $1"
								  "   AND window_start < $2 AND next_hi < window_end),"
								  "   '-9223372036854775808'::int8)"
								  "  ORDER BY window_start DESC LIMIT %d),"
								  " gone AS (DELETE FROM %s.distseq_windows"
								  "  WHERE sequence_name = $1 AND window_start <= $2"
								  "  AND window_start > (SELECT min(window_start) FROM run))"
								  " UPDATE %s.distseq_windows SET window_end = $3, next_hi = $3"
								  " WHERE sequence_name = $1 AND window_start < $2"
								  " AND window_start = (SELECT min(window_start) FROM run)",
								  schema, schema, WINDOWS_MERGE, schema, schema),
						 3, types, values, SPI_OK_UPDATE);
	return r;
}

/*
 * The catalog of this sequence was made somewhere else -- restored from a
 * dump, or marked by distseq_rejoin() after a point-in-time recovery -- so
 * the place it came from may have reserved more than it says.  Close every
 * open window and skip one more round of windows above the highest, so no
 * value reserved there after the copy was taken is reserved again.
 * Returns the number of values skipped.
 */
static int64
windows_rejoin(const DistseqCatalog *cat, const char *name, int64 window_size,
			   int64 min_open, int64 start_value, int64 max_value)
{
	const char *schema = cat->schema;
	Oid			types[3] = {TEXTOID, INT8OID, INT8OID};
	Datum		values[3];
	int64		skipped;
	int64		top;
	int64		margin;

	values[0] = CStringGetTextDatum(name);
	distseq_spi_exec(psprintf("WITH closed AS ("
						  " UPDATE %s.distseq_windows w SET next_hi = w.window_end"
						  " FROM (SELECT window_start, window_end - next_hi AS rest"
						  "       FROM %s.distseq_windows"
						  "       WHERE sequence_name = $1 AND next_hi < window_end"
						  "       FOR UPDATE) o"
						  " WHERE w.sequence_name = $1 AND w.window_start = o.window_start"
						  " RETURNING o.rest)"
						  " SELECT COALESCE(sum(rest), 0)::int8 FROM closed",
						  schema, schema),
				 1, types, values, SPI_OK_SELECT);
	skipped = distseq_spi_int8(0, 1);

	values[1] = Int64GetDatum(start_value);
	/* above the high-water mark too: it may know wins newer than any window */
	distseq_spi_exec(psprintf("SELECT GREATEST(COALESCE(%s, $2), %s)",
							  windows_top(schema),
							  cat->peers ?
							  psprintf("(SELECT hwm FROM %s.distseq_sequences WHERE sequence_name = $1)",
									   schema) : "NULL"),
				 2, types, values, SPI_OK_SELECT);
	top = distseq_spi_int8(0, 1);
	if (top > max_value)
		return skipped;

	/* the skipped values stay on record as one closed window */
	margin = distseq_room(top, max_value,
						  window_size > PG_INT64_MAX / min_open ? PG_INT64_MAX :
						  window_size * min_open);
	values[1] = Int64GetDatum(top);
	values[2] = Int64GetDatum(top + margin);
	distseq_spi_exec(psprintf("INSERT INTO %s.distseq_windows"
						  " (sequence_name, window_start, window_end, next_hi)"
						  " VALUES ($1, $2, $3, $3)", schema),
				 3, types, values, SPI_OK_INSERT);
	return skipped + margin;
}

/*
 * Reserve up to "count" slots of a sequence from its first open window, for
 * the worker (below) and for a peer (distseq_peer_reserve, catalog.c), in
 * a transaction of its own whose caller holds the sequence's row FOR NO
 * KEY UPDATE.  A catalog restored or moved here
 * rejoins before it serves anyone (*skipped: the values it skipped, 0
 * otherwise); then at least min_open_windows windows are kept open before
 * the reservation, and after it if it closed one.  Returns an empty range
 * when no window is open.
 */
DistseqRange
distseq_windows_reserve(const DistseqWindowsSeq *seq, int64 count,
						int64 *skipped)
{
	DistseqRange r;
	bool		closed;

	*skipped = 0;
	if (seq->moved)
		*skipped = windows_rejoin(&seq->cat, seq->name,
								  seq->window_size, seq->min_open,
								  seq->first, seq->last);
	distseq_windows_ensure(&seq->cat, seq->name, seq->stripes,
						   seq->window_size, seq->min_open, seq->first, seq->last);
	r = windows_take(seq->cat.schema, seq->name, count, &closed);
	/* it closed a window: open the next one */
	if (closed)
		distseq_windows_ensure(&seq->cat, seq->name, seq->stripes,
							   seq->window_size, seq->min_open, seq->first,
							   seq->last);
	return r;
}

/*
 * Lock and read the row of the sequence of relation relid, generation gen,
 * for the worker's reservation (columns as the query below lists them).
 * *seq gets the sequence; moved when the row says it was made elsewhere.
 */
static void
reserve_lookup(Oid relid, uint64 gen, Datum *where, DistseqWindowsSeq *seq)
{
	Oid			types[4] = {INT8OID, INT8OID, INT8OID, INT8OID};
	bool		isnull;

	/* the row lock orders us against distseq_drop and friends */
	if (distseq_spi_exec(psprintf("SELECT sequence_name, generation, window_size,"
							  " min_open_windows::int8, start_value, max_value,"
							  " values_reserved - values_released - values_issued - values_lost,"
							  " values_issued, values_lost, %s, %s"
							  " FROM %s.distseq_sequences WHERE seqrel = $1::oid"
							  " FOR NO KEY UPDATE",
							  seq->cat.stripes ? "stripes::int8, stripe::int8" : "1::int8, 0::int8",
							  seq->cat.origin ? "origin_system IS NOT NULL,"
							  " origin_system = 0 OR origin_system <> $2"
							  " OR origin_database <> $3::oid OR origin_relation <> $1::oid"
							  " OR origin_timeline <> $4"
							  : "false, false",
							  seq->cat.schema),
					 4, types, where, SPI_OK_SELECT) != 1 ||
		(uint64) distseq_spi_int8(0, 2) != gen)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("distseq sequence with relation %u does not exist", relid),
				 errdetail("It was dropped, or the transaction that creates it has not committed yet.")));
	seq->name = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	seq->window_size = distseq_spi_int8(0, 3);
	seq->min_open = distseq_spi_int8(0, 4);
	/* windows count slots; see distseq_slots() */
	seq->stripes = (int32) distseq_spi_int8(0, 10);
	distseq_slots(distseq_spi_int8(0, 5), distseq_spi_int8(0, 6),
				  seq->stripes, (int32) distseq_spi_int8(0, 11),
				  &seq->first, &seq->last);
	seq->moved = seq->cat.origin &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
								   12, &isnull)) &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
								   13, &isnull));
}

/*
 * Nothing was reserved for a sequence whose windows the agent makes: it
 * needs windows unless its mark is past the end, and a node out of its
 * group, where the agent never opens one, says so at once.
 */
static bool
reserve_needs_windows(const DistseqWindowsSeq *seq)
{
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		values[2] = {CStringGetTextDatum(seq->name), Int64GetDatum(seq->last)};
	bool		need;

	distseq_spi_exec(psprintf("SELECT (%s <= $2)::int::int8 FROM %s.distseq_sequences s"
							  " WHERE s.sequence_name = $1",
							  distseq_hwm_expr(seq->cat.schema), seq->cat.schema),
					 2, types, values, SPI_OK_SELECT);
	need = distseq_spi_int8(0, 1) == 1;
	if (need)
		distseq_check_in_group(seq->cat.schema);
	return need;
}

/*
 * Reserve up to "count" values of a sequence from its first open window, in
 * the worker's own transaction (the caller starts and commits it).  On the
 * first reservation since the server started ("account"), values that were
 * reserved but neither issued, released nor counted lost were in pools when
 * the server crashed: count them as lost.  *issued and *lost come in as
 * the entry's totals and go out as what the catalog now holds.
 *
 * Returns an empty range when the sequence has no value left.
 */
DistseqRange
distseq_catalog_reserve(Oid relid, uint64 gen, int64 count, bool account,
						int64 *issued, int64 *lost, int64 *skipped,
						bool *need_windows)
{
	DistseqWindowsSeq	seq;
	Oid			types[5] = {INT8OID, INT8OID, INT8OID, INT8OID, INT8OID};
	Datum		values[5];
	DistseqRange r;

	seq.cat = distseq_catalog();
	*need_windows = false;
	distseq_spi_connect();

	values[0] = Int64GetDatum((int64) relid);
	values[1] = Int64GetDatum((int64) GetSystemIdentifier());
	values[2] = Int64GetDatum((int64) MyDatabaseId);
	values[3] = Int64GetDatum((int64) distseq_timeline());
	reserve_lookup(relid, gen, values, &seq);
	if (account)
	{
		*issued = distseq_spi_int8(0, 8);
		*lost = distseq_spi_int8(0, 9) + Max(distseq_spi_int8(0, 7), 0);
	}

	r = distseq_windows_reserve(&seq, count, skipped);
	if (seq.moved)
	{
		*lost += *skipped;
		ereport(LOG,
				(errmsg("distseq sequence \"%s\" was restored or moved: skipped " INT64_FORMAT " values",
						seq.name, *skipped)));
	}
	/* from now on it lives here */
	if (seq.cat.origin)
		distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences"
								  " SET origin_system = $2, origin_database = $3::oid,"
								  " origin_relation = $1::oid, origin_timeline = $4"
								  " WHERE seqrel = $1::oid", seq.cat.schema),
						 4, types, values, SPI_OK_UPDATE);
	if (RANGE_SIZE(r) == 0 && seq.cat.peers && seq.stripes == 1 &&
		distseq_has_peers(seq.cat.schema))
		*need_windows = reserve_needs_windows(&seq);

	values[1] = Int64GetDatum(RANGE_SIZE(r));
	values[2] = Int64GetDatum(*issued);
	values[3] = Int64GetDatum(*lost);
	values[4] = Int64GetDatum(*skipped);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences"
							  " SET values_reserved = values_reserved + $2 + $5,"
							  " values_issued = $3, values_lost = $4"
							  " WHERE seqrel = $1::oid", seq.cat.schema),
					 5, types, values, SPI_OK_UPDATE);

	SPI_finish();
	return r;
}

static int
range_cmp_desc(const void *a, const void *b)
{
	const DistseqRange *ra = a;
	const DistseqRange *rb = b;

	return (ra->lo < rb->lo) ? 1 : (ra->lo > rb->lo) ? -1 : 0;
}

/*
 * Give one range back, window by window, where its windows still have it
 * reserved (see below); returns how much went back.  The windows are
 * locked FOR UPDATE.
 */
static int64
windows_give_back(const char *schema, Oid relid, uint64 gen,
				  DistseqRange range)
{
	Oid			types[4] = {INT8OID, INT8OID, INT8OID, INT8OID};
	Datum		values[4];
	int64		back = 0;
	uint64		nwindows;
	struct
	{
		int64		start;
		int64		end;
		int64		next_hi;
	}		   *w;

	values[0] = Int64GetDatum((int64) relid);
	values[1] = Int64GetDatum((int64) gen);
	values[2] = Int64GetDatum(range.lo);
	values[3] = Int64GetDatum(range.hi);

	/*
	 * Windows never overlap: of those that start at or below the range's
	 * start only the highest can reach into it, so the scan starts there
	 * and not at the sequence's first window.
	 */
	nwindows = distseq_spi_exec(psprintf("SELECT w.window_start, w.window_end, w.next_hi"
										 " FROM %s.distseq_windows w"
										 " JOIN %s.distseq_sequences s"
										 " ON w.sequence_name = s.sequence_name"
										 " WHERE s.seqrel = $1::oid AND s.generation = $2"
										 " AND w.window_start < $4 AND w.window_end > $3"
										 " AND w.window_start >= COALESCE((SELECT b.window_start"
										 "  FROM %s.distseq_windows b"
										 "  WHERE b.sequence_name = s.sequence_name"
										 "  AND b.window_start <= $3"
										 "  ORDER BY b.window_start DESC LIMIT 1), $3)"
										 " ORDER BY w.window_start"
										 " FOR UPDATE OF w",
										 schema, schema, schema),
								4, types, values, SPI_OK_SELECT);
	w = palloc(sizeof(*w) * Max(nwindows, 1));
	for (uint64 k = 0; k < nwindows; k++)
	{
		w[k].start = distseq_spi_int8(k, 1);
		w[k].end = distseq_spi_int8(k, 2);
		w[k].next_hi = distseq_spi_int8(k, 3);
	}
	for (uint64 k = 0; k < nwindows; k++)
	{
		Oid			wtypes[5] = {INT8OID, INT8OID, INT8OID, INT8OID, INT8OID};
		Datum		wvalues[5];
		int64		lo = Max(range.lo, w[k].start);
		int64		hi = Min(range.hi, w[k].end);

		/* not all of it reserved here: it is not ours to give back */
		if (hi > w[k].next_hi)
			continue;
		wvalues[0] = Int64GetDatum((int64) relid);
		wvalues[1] = Int64GetDatum((int64) gen);
		wvalues[2] = Int64GetDatum(w[k].start);
		wvalues[3] = Int64GetDatum(lo);
		wvalues[4] = Int64GetDatum(hi);
		if (hi == w[k].next_hi)
			distseq_spi_exec(psprintf("UPDATE %s.distseq_windows w SET next_hi = $4"
									  " FROM %s.distseq_sequences s"
									  " WHERE s.seqrel = $1::oid AND s.generation = $2"
									  " AND w.sequence_name = s.sequence_name"
									  " AND w.window_start = $3",
									  schema, schema),
							 5, wtypes, wvalues, SPI_OK_UPDATE);
		else
		{
			/* the upper piece first: it keeps the window's next_hi */
			distseq_spi_exec(psprintf("INSERT INTO %s.distseq_windows"
									  " (sequence_name, window_start, window_end, next_hi)"
									  " SELECT w.sequence_name, $5, w.window_end, w.next_hi"
									  " FROM %s.distseq_windows w"
									  " JOIN %s.distseq_sequences s"
									  " ON w.sequence_name = s.sequence_name"
									  " WHERE s.seqrel = $1::oid AND s.generation = $2"
									  " AND w.window_start = $3",
									  schema, schema, schema),
							 5, wtypes, wvalues, SPI_OK_INSERT);
			distseq_spi_exec(psprintf("UPDATE %s.distseq_windows w"
									  " SET window_end = $5, next_hi = $4"
									  " FROM %s.distseq_sequences s"
									  " WHERE s.seqrel = $1::oid AND s.generation = $2"
									  " AND w.sequence_name = s.sequence_name"
									  " AND w.window_start = $3",
									  schema, schema),
							 5, wtypes, wvalues, SPI_OK_UPDATE);
		}
		back += hi - lo;
	}
	pfree(w);
	return back;
}

/*
 * Give unused ranges back to the windows they came from, in the worker's
 * own transaction, so that a clean restart skips none of them.  A range is
 * handed back only where its window still has it reserved (below next_hi):
 * one at the top of what its window reserved lowers next_hi; one below it
 * -- a rest given back by a session while later blocks were issued above it
 * -- splits the window in two at the range's end: the lower piece reserved
 * up to the range's start, the upper one as reserved as the window was.
 * The pieces cover exactly the window, so windows still never overlap, and
 * every value the catalog holds reserved stays so.  A range that crosses
 * windows (rests that touched merge in the pool) is handed back window by
 * window.  A window merged into a closed row below it (WINDOWS_MERGE) is
 * in that row.  Going from the highest range down lets adjacent ranges go
 * back one after the other.
 *
 * The sequence's row is locked FOR SHARE first, as a reservation locks it
 * before its windows: a reservation that merges windows, a setval or an
 * alter (which update the row, then close or cut windows) has committed
 * before our first look at the windows, or waits for us.
 *
 * Returns the number of values lost (parts no window has reserved: the
 * sequence was dropped meanwhile, or the range came from another server);
 * *issued and *lost are the entry's totals, stored as they are plus the
 * values lost here.
 */
int64
distseq_catalog_release(Oid relid, uint64 gen, DistseqRange *ranges,
						int nranges, int64 issued, int64 lost)
{
	const char *schema;
	Oid			types[5] = {INT8OID, INT8OID, INT8OID, INT8OID, INT8OID};
	Datum		values[5];
	int64		released = 0;
	int64		dropped = 0;
	bool		found;

	/* a sequence dropped meanwhile has nothing to take back */
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		return 0;
	schema = distseq_catalog_schema();

	distseq_spi_connect();

	values[0] = Int64GetDatum((int64) relid);
	values[1] = Int64GetDatum((int64) gen);
	found = distseq_spi_exec(psprintf("SELECT FROM %s.distseq_sequences"
									  " WHERE seqrel = $1::oid AND generation = $2"
									  " FOR SHARE", schema),
							 2, types, values, SPI_OK_SELECT) == 1;

	qsort(ranges, nranges, sizeof(DistseqRange), range_cmp_desc);
	for (int i = 0; i < nranges; i++)
	{
		int64		back = found ? windows_give_back(schema, relid, gen,
													 ranges[i]) : 0;

		released += back;
		dropped += RANGE_SIZE(ranges[i]) - back;
	}

	values[2] = Int64GetDatum(released);
	values[3] = Int64GetDatum(lost + dropped);
	values[4] = Int64GetDatum(issued);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences"
						  " SET values_released = values_released + $3,"
						  " values_lost = $4, values_issued = $5"
						  " WHERE seqrel = $1::oid AND generation = $2",
						  schema),
				 5, types, values, SPI_OK_UPDATE);

	SPI_finish();
	return dropped;
}

/*
 * The transaction that created a sequence drew slots [first, top) from it
 * itself (increate.c): record them as reserved and issued, in that
 * transaction, at its commit or PREPARE, so that once it commits the
 * worker's first refill starts above them.  Its windows are all this
 * transaction's, made from first up, and seen by nobody else yet: each
 * window below top is taken up to top, and the highest grows to top if top
 * lies above it.  No window is ever made below the highest, so no slot
 * below top can be reserved again.  Only updates, no insert: this runs
 * after the transaction's deferred triggers have fired.  A sequence dropped
 * meanwhile is left alone.
 */
void
distseq_windows_record_drawn(Oid relid, uint64 gen, int64 first, int64 top)
{
	DistseqSpiContext cxt;
	DistseqCatalog cat = distseq_catalog();
	const char *schema = cat.schema;
	Oid			types[3] = {TEXTOID, INT8OID, INT8OID};
	Datum		values[3];

	distseq_spi_enter_catalog(&cxt);
	if (distseq_spi_exec(psprintf("SELECT sequence_name FROM %s.distseq_sequences"
								  " WHERE seqrel = $1::oid AND generation = $2"
								  " FOR NO KEY UPDATE", schema),
						 2, (Oid[]) {INT8OID, INT8OID},
						 (Datum[]) {Int64GetDatum((int64) relid), Int64GetDatum((int64) gen)},
						 SPI_OK_SELECT) != 1)
	{
		distseq_spi_leave_catalog(&cxt);
		return;
	}
	values[0] = CStringGetTextDatum(SPI_getvalue(SPI_tuptable->vals[0],
												 SPI_tuptable->tupdesc, 1));
	values[1] = Int64GetDatum(top);
	values[2] = Int64GetDatum(top - first);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_windows"
							  " SET next_hi = LEAST(window_end, $2)"
							  " WHERE sequence_name = $1 AND window_start < $2"
							  " AND next_hi < LEAST(window_end, $2)",
							  schema),
					 2, types, values, SPI_OK_UPDATE);
	if (distseq_spi_exec(psprintf("UPDATE %s.distseq_windows SET window_end = $2, next_hi = $2"
								  " WHERE sequence_name = $1 AND window_end < $2"
								  " AND window_start = (SELECT window_start FROM %s.distseq_windows"
								  "  WHERE sequence_name = $1 ORDER BY window_start DESC LIMIT 1)",
								  schema, schema),
						 2, types, values, SPI_OK_UPDATE) == 0 &&
		distseq_spi_exec(psprintf("SELECT 1 FROM %s.distseq_windows"
								  " WHERE sequence_name = $1 AND window_end >= $2",
								  schema),
						 2, types, values, SPI_OK_SELECT) == 0)
		elog(ERROR, "distseq sequence \"%s\" has no window to record its first values in",
			 TextDatumGetCString(values[0]));
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences"
							  " SET values_reserved = values_reserved + $3,"
							  " values_issued = values_issued + $3%s"
							  " WHERE sequence_name = $1",
							  schema, cat.peers ? ", hwm = GREATEST(hwm, $2)" : ""),
					 3, types, values, SPI_OK_UPDATE);
	distseq_spi_leave_catalog(&cxt);
}
