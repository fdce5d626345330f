/*-------------------------------------------------------------------------
 *
 * windows.c
 *	  The window allocator: a sequence's values are reserved from hi-lo
 *	  windows in distseq_windows, counted in slots (slot s is the value
 *	  s * stripes + stripe), and this file does the arithmetic of slots and
 *	  the high-water mark every window lies below.
 *
 * No locks of its own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"

#include "executor/spi.h"

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
 * The high-water mark of a sequence row "s", in slots: at least the top of
 * its highest window, whatever the column says (a rejoin adds windows).
 */
char *
distseq_hwm_expr(const char *schema)
{
	return psprintf("GREATEST(COALESCE(s.hwm, s.start_value),"
					" COALESCE((SELECT w.window_end FROM %s.distseq_windows w"
					" WHERE w.sequence_name = s.sequence_name"
					" ORDER BY w.window_start DESC LIMIT 1), s.start_value))",
					schema);
}

/*
 * Windows were made here: a node never in a group is no longer fresh.  An
 * update of the node row, not just a lock on it, so that a join waiting
 * for the row sees the flag when it goes on (change.c).  SPI connected.
 */
void
distseq_note_windows(const char *schema, int minor)
{
	if (minor < 4)
		return;
	distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET made_windows = true"
							  " WHERE epoch = 0 AND NOT made_windows", schema),
					 0, NULL, NULL, SPI_OK_UPDATE);
}
