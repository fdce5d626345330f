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
 *	- a record lives at a home found from the hash of its name alone: the
 *	  homes are an array of records, sized once from the number of names
 *	  the caller expects to be in use at once (two thirds full with that
 *	  many), and a name takes the first free one of the NAMETAB_PROBES
 *	  homes from its hash on.  A lookup reads the record itself, with no
 *	  index to read first: one miss where the index made two in a row.
 *	  The array is allocated NAMETAB_CHUNK records at a time, when a name
 *	  first comes to them, and such a chunk is freed when its last name is
 *	  removed: a backend holds at most the whole array, rec_size bytes per
 *	  home, and about a chunk per name while it knows few;
 *	- a name whose homes are all taken goes to the index, an array of
 *	  { hash, record } pairs, four to a line, probed linearly from the
 *	  hash, kept at most three quarters full, and compared by name only
 *	  where the whole hash matches.  Its records are allocated in batches.
 *	  A backend that knows more names than expected keeps the others there,
 *	  and finds them one miss later;
 *	- records start on a 64-byte line, the name first, so that the caller
 *	  can lay out its hot fields on whole lines after the name.  A lookup
 *	  asks the CPU for those lines as soon as it has a record to compare,
 *	  while it compares the name;
 *	- records never move, so pointers to them stay good until removed.  A
 *	  removed home is zeroed, free for the next name, and its chunk is
 *	  freed once it holds no name; a removed record of the index goes to a
 *	  free list and is used again.  Either way, a pointer to a removed
 *	  record must not be read again.
 *
 * A home is free when its name is zero.  Homes never move, so removing one
 * leaves the names placed after it where they are: a lookup probes all of
 * a name's homes, and stops early only where it finds the name.  A name
 * found at none of its homes may still be in the index although one of
 * them is free now, so a lookup that misses goes on to the index, and a
 * name is placed only once it is found in neither.
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
#include "port/pg_bitutils.h"
#include "utils/memutils.h"

/* the CPU's cache line, not PG_CACHE_LINE_SIZE (which is 128 for padding) */
#define NAMETAB_LINE	64

/* records of the index allocated at once */
#define NAMETAB_BATCH	32

/* homes a name may take, from the one its hash points to */
#define NAMETAB_PROBES	8

/*
 * homes allocated at once: 8 kB of records of 256 bytes, a block of its own
 * for the allocator, like a batch of the index
 */
#define NAMETAB_CHUNK	32

typedef struct NametabSlot
{
	uint32		hash;
	void	   *rec;			/* NULL when the slot is empty */
} NametabSlot;

typedef struct NametabChunk
{
	void	   *mem;			/* as allocated, before alignment */
	int			names;			/* homes of the chunk that hold a name */
} NametabChunk;

struct DistseqNametab
{
	MemoryContext cxt;
	Size		rec_size;		/* a multiple of NAMETAB_LINE */
	Size		hot_size;		/* bytes the caller reads after a lookup */

	/* the homes: home_mask + 1 records, in chunks allocated when used */
	char	  **chunks;			/* a chunk's first home, or NULL */
	uint32		home_mask;
	NametabChunk *chunk_info;	/* read by enter and remove, never by a
								 * lookup */

	/* the index, for names whose homes are all taken */
	NametabSlot *slots;
	uint32		mask;			/* number of slots - 1 */
	uint32		count;			/* records in the index */
	void	   *free_recs;		/* removed records, linked by their first
								 * pointer */
	char	   *batch;			/* the batch records are cut from */
	int			batch_left;		/* records left in it */
};

StaticAssertDecl(NAMETAB_LINE % MAXIMUM_ALIGNOF == 0,
				 "records must be aligned for any field");

/*
 * A table of records of rec_size bytes, whose first hot_size bytes a caller
 * reads right after a lookup, for about names_expected names at once; what
 * names it, and must live on.
 */
DistseqNametab *
distseq_nametab_create(const char *what, Size rec_size, Size hot_size,
					   int names_expected)
{
	MemoryContext cxt;
	DistseqNametab *tab;
	uint32		homes;

	Assert(rec_size >= NAMEDATALEN);
	cxt = AllocSetContextCreate(TopMemoryContext, "distseq name table",
								ALLOCSET_DEFAULT_SIZES);
	MemoryContextSetIdentifier(cxt, what);
	tab = MemoryContextAllocZero(cxt, sizeof(DistseqNametab));
	tab->cxt = cxt;
	tab->rec_size = TYPEALIGN(NAMETAB_LINE, rec_size);
	tab->hot_size = Min(hot_size, tab->rec_size);

	/*
	 * At most two thirds full with the names expected; a power of 2, and a
	 * whole number of chunks.  The clamp keeps the sum in range.
	 */
	names_expected = Min(Max(names_expected, 1), PG_INT32_MAX / 4);
	homes = Max(pg_nextpower2_32((uint32) names_expected * 3 / 2 + 1),
				4 * NAMETAB_CHUNK);
	tab->home_mask = homes - 1;
	tab->chunks = MemoryContextAllocZero(cxt, (homes / NAMETAB_CHUNK) *
										 sizeof(char *));
	tab->chunk_info = MemoryContextAllocZero(cxt, (homes / NAMETAB_CHUNK) *
											 sizeof(NametabChunk));

	tab->mask = 15;
	tab->slots = MemoryContextAllocZero(cxt, 16 * sizeof(NametabSlot));
	return tab;
}

static inline uint32
nametab_hash(const char *name, int len)
{
	return hash_bytes((const unsigned char *) name, len);
}

/*
 * The first home of a hash.  The index takes the hash's low bits: names
 * that crowd one run of homes should not crowd one run of the index too.
 */
static inline uint32
nametab_first_home(uint32 hash)
{
	return pg_rotate_right32(hash, 16);
}

/* Home i, or NULL if its chunk is not allocated (so it is free) */
static inline char *
nametab_home(DistseqNametab *tab, uint32 i)
{
	char	   *chunk;

	i &= tab->home_mask;
	chunk = tab->chunks[i / NAMETAB_CHUNK];
	if (chunk == NULL)
		return NULL;
	return chunk + (i % NAMETAB_CHUNK) * tab->rec_size;
}

/* Ask the CPU for the lines of a record the caller reads after the name */
static inline void
nametab_prefetch(DistseqNametab *tab, const char *rec)
{
	for (Size off = NAMETAB_LINE; off < tab->hot_size; off += NAMETAB_LINE)
		distseq_prefetch(rec + off);
}

/*
 * The home that holds this name, or NULL; *free_home is set to the first
 * free one of its homes, if any, else to NAMETAB_PROBES.
 */
static inline char *
nametab_home_find(DistseqNametab *tab, const char *name, int len,
				  uint32 hash, int *free_home)
{
	*free_home = NAMETAB_PROBES;
	for (int p = 0; p < NAMETAB_PROBES; p++)
	{
		char	   *rec = nametab_home(tab, nametab_first_home(hash) + p);

		if (rec == NULL)
		{
			if (*free_home == NAMETAB_PROBES)
				*free_home = p;
			continue;
		}
		/* the name is most likely at its first home */
		if (p == 0)
			nametab_prefetch(tab, rec);
		if (rec[0] == '\0')
		{
			if (*free_home == NAMETAB_PROBES)
				*free_home = p;
			continue;
		}
		if (distseq_name_is(rec, name, len))
		{
			if (p != 0)
				nametab_prefetch(tab, rec);
			return rec;
		}
	}
	return NULL;
}

/*
 * The slot of the index that holds this name, or the empty slot where it
 * would go
 */
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
			nametab_prefetch(tab, slot->rec);
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
	char	   *rec;
	int			free_home;
	uint32		i;

	Assert(len > 0 && len < NAMEDATALEN);
	rec = nametab_home_find(tab, name, len, hash, &free_home);
	*found = rec != NULL;
	if (*found)
		return rec;
	if (tab->count > 0)
	{
		i = nametab_slot(tab, name, len, hash);
		*found = tab->slots[i].rec != NULL;
		if (*found)
			return tab->slots[i].rec;
	}

	if (free_home < NAMETAB_PROBES)
	{
		uint32		h = (nametab_first_home(hash) + free_home) & tab->home_mask;
		uint32		c = h / NAMETAB_CHUNK;

		if (tab->chunks[c] == NULL)
		{
			char	   *mem;

			mem = MemoryContextAllocZero(tab->cxt, tab->rec_size *
										 NAMETAB_CHUNK + NAMETAB_LINE);
			tab->chunk_info[c].mem = mem;
			tab->chunks[c] = (char *) TYPEALIGN(NAMETAB_LINE, mem);
		}
		rec = nametab_home(tab, h);
		memset(rec, 0, tab->rec_size);
		memcpy(rec, name, len);
		tab->chunk_info[c].names++;
		return rec;
	}

	if ((tab->count + 1) * 4 > (tab->mask + 1) * 3)
		nametab_grow(tab);
	i = nametab_slot(tab, name, len, hash);
	rec = nametab_new_record(tab);
	memcpy(rec, name, len);
	tab->slots[i].hash = hash;
	tab->slots[i].rec = rec;
	tab->count++;
	return rec;
}

/*
 * Remove a record.  A home is zeroed, which frees it (its name is zero), and
 * its chunk is freed if no other name is left in it.  In the index, the
 * slots after the record that would no longer be reached from their own
 * hash move back into the gap, so that a lookup still ends at the first
 * empty slot.
 */
void
distseq_nametab_remove(DistseqNametab *tab, void *rec)
{
	const char *name = rec;
	int			len = strnlen(name, NAMEDATALEN);
	uint32		hash = nametab_hash(name, len);
	uint32		gap;
	uint32		i;

	Assert(len > 0);
	for (int p = 0; p < NAMETAB_PROBES; p++)
	{
		uint32		h = (nametab_first_home(hash) + p) & tab->home_mask;
		uint32		c = h / NAMETAB_CHUNK;

		if (nametab_home(tab, h) != rec)
			continue;
		if (--tab->chunk_info[c].names == 0)
		{
			pfree(tab->chunk_info[c].mem);
			tab->chunk_info[c].mem = NULL;
			tab->chunks[c] = NULL;
		}
		else
			memset(rec, 0, tab->rec_size);
		return;
	}

	gap = nametab_slot(tab, name, len, hash);
	i = gap;
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
 * The next record after position *pos (start at 0), or NULL at the end:
 * the homes, then the index.  Records must not be added or removed during
 * a scan.
 */
void *
distseq_nametab_next(DistseqNametab *tab, uint32 *pos)
{
	while (*pos <= tab->home_mask)
	{
		char	   *rec;

		if (tab->chunks[*pos / NAMETAB_CHUNK] == NULL)
		{
			*pos = TYPEALIGN(NAMETAB_CHUNK, *pos + 1);
			continue;
		}
		rec = nametab_home(tab, (*pos)++);
		if (rec[0] != '\0')
			return rec;
	}
	while (*pos - (tab->home_mask + 1) <= tab->mask)
	{
		void	   *rec = tab->slots[*pos - (tab->home_mask + 1)].rec;

		(*pos)++;
		if (rec != NULL)
			return rec;
	}
	return NULL;
}
