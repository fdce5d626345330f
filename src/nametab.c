/*-------------------------------------------------------------------------
 *
 * nametab.c
 *	  A backend-local table of records keyed by a sequence name: what
 *	  nextval.c keeps per sequence, found in as few cache lines as possible.
 *
 * A backend that draws from a random one of thousands of sequences misses
 * the CPU's caches on every line a lookup touches, so the table is built
 * for that:
 *
 *	- the index is an array of { hash, record } pairs, four to a line,
 *	  probed linearly from the hash and kept at most three quarters full:
 *	  a lookup usually reads one line of it, and compares a name only
 *	  where the whole hash matches;
 *	- records start on a 64-byte line, the name first, and are allocated
 *	  in batches, so that the caller can lay out its hot fields on whole
 *	  lines after the name.  A lookup asks the CPU for those lines as soon
 *	  as it has found a record whose hash matches, while it compares the
 *	  name;
 *	- records never move, so pointers to them stay good until removed.  A
 *	  removed record goes to a free list and is used again.
 *
 * The table lives in its own memory context under TopMemoryContext, named
 * "distseq name table" with the caller's name as its identifier.  Each step
 * allocates what it needs before it changes the table, so an error (out of
 * memory) leaves the table whole: the same records, in an index that may
 * have grown.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"

#include "common/hashfn.h"
#include "utils/memutils.h"

/* the CPU's cache line, not PG_CACHE_LINE_SIZE (which is 128 for padding) */
#define NAMETAB_LINE	64

/* records allocated at once */
#define NAMETAB_BATCH	32

typedef struct NametabSlot
{
	uint32		hash;
	void	   *rec;			/* NULL when the slot is empty */
} NametabSlot;

struct DistseqNametab
{
	MemoryContext cxt;
	Size		rec_size;		/* a multiple of NAMETAB_LINE */
	Size		hot_size;		/* bytes the caller reads after a lookup */
	NametabSlot *slots;
	uint32		mask;			/* number of slots - 1 */
	uint32		count;			/* records in the table */
	void	   *free_recs;		/* removed records, linked by their first
								 * pointer */
	char	   *batch;			/* the batch records are cut from */
	int			batch_left;		/* records left in it */
};

StaticAssertDecl(NAMETAB_LINE % MAXIMUM_ALIGNOF == 0,
				 "records must be aligned for any field");

/*
 * A table of records of rec_size bytes, whose first hot_size bytes a caller
 * reads right after a lookup; what names it, and must live on.
 */
DistseqNametab *
distseq_nametab_create(const char *what, Size rec_size, Size hot_size)
{
	MemoryContext cxt;
	DistseqNametab *tab;

	Assert(rec_size >= NAMEDATALEN);
	cxt = AllocSetContextCreate(TopMemoryContext, "distseq name table",
								ALLOCSET_DEFAULT_SIZES);
	MemoryContextSetIdentifier(cxt, what);
	tab = MemoryContextAllocZero(cxt, sizeof(DistseqNametab));
	tab->cxt = cxt;
	tab->rec_size = TYPEALIGN(NAMETAB_LINE, rec_size);
	tab->hot_size = Min(hot_size, tab->rec_size);
	tab->mask = 15;
	tab->slots = MemoryContextAllocZero(cxt, 16 * sizeof(NametabSlot));
	return tab;
}

static inline uint32
nametab_hash(const char *name, int len)
{
	return hash_bytes((const unsigned char *) name, len);
}

/* The slot that holds this name, or the empty slot where it would go */
static inline uint32
nametab_slot(DistseqNametab *tab, const char *name, int len, uint32 hash)
{
	uint32		i = hash & tab->mask;

	for (;;)
	{
		NametabSlot *slot = &tab->slots[i];

		if (slot->rec == NULL)
			return i;
		if (slot->hash == hash)
		{
			for (Size off = NAMETAB_LINE; off < tab->hot_size;
				 off += NAMETAB_LINE)
				distseq_prefetch((char *) slot->rec + off);
			if (distseq_name_is(slot->rec, name, len))
				return i;
		}
		i = (i + 1) & tab->mask;
	}
}

/* Double the index, before adding a record would fill it over 3/4 */
static void
nametab_grow(DistseqNametab *tab)
{
	uint32		old_n = tab->mask + 1;
	uint32		new_mask = old_n * 2 - 1;
	NametabSlot *slots;

	slots = MemoryContextAllocZero(tab->cxt,
								   (Size) (new_mask + 1) * sizeof(NametabSlot));
	for (uint32 i = 0; i < old_n; i++)
	{
		NametabSlot *from = &tab->slots[i];
		uint32		j;

		if (from->rec == NULL)
			continue;
		j = from->hash & new_mask;
		while (slots[j].rec != NULL)
			j = (j + 1) & new_mask;
		slots[j] = *from;
	}
	pfree(tab->slots);
	tab->slots = slots;
	tab->mask = new_mask;
}

/* A zeroed record, line-aligned */
static void *
nametab_new_record(DistseqNametab *tab)
{
	void	   *rec;

	if (tab->free_recs != NULL)
	{
		rec = tab->free_recs;
		tab->free_recs = *(void **) rec;
	}
	else
	{
		if (tab->batch_left == 0)
		{
			char	   *mem;

			mem = MemoryContextAlloc(tab->cxt, tab->rec_size * NAMETAB_BATCH +
									 NAMETAB_LINE);
			tab->batch = (char *) TYPEALIGN(NAMETAB_LINE, mem);
			tab->batch_left = NAMETAB_BATCH;
		}
		rec = tab->batch;
		tab->batch += tab->rec_size;
		tab->batch_left--;
	}
	memset(rec, 0, tab->rec_size);
	return rec;
}

/*
 * The record of a name of len bytes (0 < len < NAMEDATALEN), not
 * necessarily terminated: the one in the table, or a new zeroed one that
 * holds only the name.  *found says which.
 */
void *
distseq_nametab_enter(DistseqNametab *tab, const char *name, int len,
					  bool *found)
{
	uint32		hash = nametab_hash(name, len);
	uint32		i = nametab_slot(tab, name, len, hash);
	void	   *rec;

	Assert(len > 0 && len < NAMEDATALEN);
	*found = tab->slots[i].rec != NULL;
	if (*found)
		return tab->slots[i].rec;

	if ((tab->count + 1) * 4 > (tab->mask + 1) * 3)
	{
		nametab_grow(tab);
		i = nametab_slot(tab, name, len, hash);
	}
	rec = nametab_new_record(tab);
	memcpy(rec, name, len);
	tab->slots[i].hash = hash;
	tab->slots[i].rec = rec;
	tab->count++;
	return rec;
}

/*
 * Remove a record.  The slots after it that would no longer be reached
 * from their own hash move back into the gap, so that a lookup still ends
 * at the first empty slot.
 */
void
distseq_nametab_remove(DistseqNametab *tab, void *rec)
{
	const char *name = rec;
	int			len = strnlen(name, NAMEDATALEN);
	uint32		gap = nametab_slot(tab, name, len, nametab_hash(name, len));
	uint32		i = gap;

	Assert(tab->slots[gap].rec == rec);
	for (;;)
	{
		uint32		home;

		i = (i + 1) & tab->mask;
		if (tab->slots[i].rec == NULL)
			break;
		home = tab->slots[i].hash & tab->mask;
		/* leave it if its home lies cyclically in (gap, i] */
		if (((i - home) & tab->mask) < ((i - gap) & tab->mask))
			continue;
		tab->slots[gap] = tab->slots[i];
		gap = i;
	}
	tab->slots[gap].rec = NULL;
	tab->count--;
	*(void **) rec = tab->free_recs;
	tab->free_recs = rec;
}

/*
 * The next record after position *pos (start at 0), or NULL at the end.
 * Records must not be added or removed during a scan.
 */
void *
distseq_nametab_next(DistseqNametab *tab, uint32 *pos)
{
	while (*pos <= tab->mask)
	{
		void	   *rec = tab->slots[(*pos)++].rec;

		if (rec != NULL)
			return rec;
	}
	return NULL;
}
