/*-------------------------------------------------------------------------
 *
 * settle.c
 *	  Settling a membership change whose proposer is lost (from version
 *	  1.7): any member finishes the change that may have been decided from
 *	  its membership, or abandons them all for a no-op change.  Run by the
 *	  refill worker before it proposes a change (distseq_change_run).
 *
 * The changes proposed from one membership E0 are one instance of
 * consensus, of which at most one is ever decided.  Phase one is its round
 * 0: moves that need no promise, a node taking one change at a time, and
 * the proposer deciding alone.  When the proposer is lost, any member of
 * E0 settles the instance with the two rounds of Paxos, at a ballot (round
 * >= 1, its node id) above any it saw, on the members of E0:
 *
 * prepare: each node in the instance (active in E0, or pending from it)
 * that promised no ballot as high promises this one, and answers with the
 * change it took and the ballot it took it at (0: round 0).  A node active
 * in the membership after E0 answers with it: that change was decided.
 *
 * choose: a change known decided is taken.  Else, with promises from a
 * majority of E0: the change taken at the highest ballot >= 1, if any;
 * else a change X of round 0 may have been decided only if the promises
 * holding X and the members that gave none make a majority of E0: each
 * member holds one change of round 0 at a time, drops it only when it was
 * not decided, and, once it promised, takes no other and its proposer
 * cannot decide any more (distseq_member_move).  One such change is
 * finished; with none, a no-op change (the same members, a new epoch_id)
 * abandons them all; two cannot be told apart, and nothing is done.
 *
 * accept: each member of E0 that promised no higher ballot takes the
 * change, pending; with this node's own, in the transaction that records
 * the change here, on a majority of E0 the change is decided, and phase two
 * finishes it as its proposer's would (activation takes the members
 * pending in a change abandoned).  test/model/allocator_sim.c checks this
 * protocol ("Settling a change"), with its variants that fail.
 *
 * Each step on a node is member.c's (distseq_member_promise,
 * distseq_member_accept), reached on the peers through peer.c; its locking
 * rules are member.c's.  This node's promise commits on its own before the
 * rounds, the decision in a transaction of its own with the record of the
 * change, under distseq_member_lock_changes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"

typedef struct Settle
{
	MemoryContext cxt;
	int64		self;
	int64		epoch;			/* E0 */
	int64		epoch_id;
	int			nmembers;
	int64	   *members;
	int64		round;
	int			promised;		/* promises, this node's own too */
	int64		seen_round;		/* the highest ballot round refused by */
	bool		known;			/* a member is active after E0: c was decided */
	bool		noop;			/* c abandons every change from E0 */
	int64		best_round;		/* the highest ballot >= 1 of a change taken */
	int64		best_node;
	DistseqChange		best;
	int			ntaken;			/* changes of round 0 taken, and by how many */
	DistseqChange		taken[8];
	int			count[8];
	DistseqChange		c;				/* the change chosen */
} Settle;

static int64 *
copy_ids(MemoryContext cxt, const int64 *v, int n)
{
	int64	   *c = MemoryContextAlloc(cxt, sizeof(int64) * Max(n, 1));

	memcpy(c, v, sizeof(int64) * n);
	return c;
}

static bool
ids_have(const int64 *v, int n, int64 x)
{
	for (int i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static void
settle_change(Settle *s, DistseqChange *c, int64 epoch, int64 epoch_id, const int64 *members, int n)
{
	c->epoch = epoch;
	c->epoch_id = epoch_id;
	c->prev_epoch = s->epoch;
	c->prev_epoch_id = s->epoch_id;
	c->nmembers = n;
	c->members = copy_ids(s->cxt, members, n);
	c->nprev = s->nmembers;
	c->prev = s->members;
}

/* Count what a member answered a prepare with */
static void
settle_tally(Settle *s, const DistseqPromise *p)
{
	int			i;

	if (p->answer == 'd')
	{
		if (!s->known)
			settle_change(s, &s->c, p->epoch, p->epoch_id, p->members, p->nmembers);
		s->known = true;
		return;
	}
	if (p->answer != 'p')
	{
		s->seen_round = Max(s->seen_round, p->promised_round);
		return;
	}
	s->promised++;
	if (!p->pending)
		return;
	if (p->accepted_round > 0)
	{
		if (p->accepted_round > s->best_round ||
			(p->accepted_round == s->best_round && p->accepted_node > s->best_node))
		{
			s->best_round = p->accepted_round;
			s->best_node = p->accepted_node;
			settle_change(s, &s->best, p->epoch, p->epoch_id, p->members, p->nmembers);
		}
		return;
	}
	for (i = 0; i < s->ntaken && s->taken[i].epoch_id != p->epoch_id; i++)
		;
	if (i == s->ntaken && i < lengthof(s->taken))
	{
		settle_change(s, &s->taken[i], p->epoch, p->epoch_id, p->members, p->nmembers);
		s->count[i] = 0;
		s->ntaken++;
	}
	if (i < s->ntaken)
		s->count[i]++;
}

/* The change to settle on, or why there is none; SPI connected */
static char *
settle_choose(Settle *s)
{
	int			q = distseq_majority(s->nmembers);
	int			unseen = s->nmembers - s->promised;
	int			k = -1;
	int			possible = 0;
	int64		id;

	if (s->known)
		return NULL;
	if (s->promised < q)
		return psprintf("%d of the %d members promised ballot " INT64_FORMAT ", %d needed",
						s->promised, s->nmembers, s->round, q);
	if (s->best_round > 0)
	{
		s->c = s->best;
		return NULL;
	}
	for (int i = 0; i < s->ntaken; i++)
		if (s->count[i] + unseen >= q)
		{
			possible++;
			k = i;
		}
	if (possible > 1 || s->ntaken == lengthof(s->taken))
		return pstrdup("more than one change proposed from that membership may have been decided");
	if (possible == 1)
	{
		s->c = s->taken[k];
		return NULL;
	}
	/* none was decided, nor ever will be: a no-op change abandons them */
	do
	{
		if (!pg_strong_random(&id, sizeof(id)))
			elog(ERROR, "could not generate a random number");
		id &= PG_INT64_MAX;
	} while (id == 0);
	settle_change(s, &s->c, s->epoch + 1, id, s->members, s->nmembers);
	s->noop = true;
	return NULL;
}

/* Prepares on the other members, each answer tallied; SPI connected */
static void
settle_prepares(const char *schema, Settle *s)
{
	for (int i = 0; i < s->nmembers; i++)
	{
		DistseqPeer *peer;
		char	   *error = NULL;
		DistseqPromise p;

		if (s->members[i] != s->self &&
			(peer = distseq_client_or_error(schema, s->members[i], &error)) != NULL &&
			distseq_call_prepare(peer, s->epoch, s->epoch_id, s->round, s->self,
								 s->members[i], &p, &error))
			settle_tally(s, &p);
	}
}

/* Prepares on the other members, then accepts; SPI connected */
static char *
settle_rounds(const char *schema, Settle *s, int *accepted)
{
	char	   *problem;

	settle_prepares(schema, s);
	if ((problem = settle_choose(s)) != NULL)
		return problem;
	if (!ids_have(s->c.members, s->c.nmembers, s->self))
		return pstrdup("that change leaves this node out: a member that stays must settle it");
	if (s->known)
		return NULL;

	/* a joiner first, as in phase one; it may be pending in it already */
	for (int i = 0; i < s->c.nmembers; i++)
	{
		DistseqPeer *peer;
		char	   *ignored;

		if (ids_have(s->members, s->nmembers, s->c.members[i]) ||
			(peer = distseq_client_of(schema, s->c.members[i])) == NULL)
			continue;
		(void) distseq_call_join(peer, &s->c, s->self, s->c.members[i], &ignored);
	}
	for (int i = 0; i < s->nmembers; i++)
	{
		DistseqPeer *peer;
		char	   *error = NULL;
		bool		took;

		if (s->members[i] == s->self)
			continue;
		if ((peer = distseq_client_or_error(schema, s->members[i], &error)) != NULL &&
			distseq_call_accept(peer, s->epoch, s->epoch_id, s->round, s->self, &s->c,
								s->members[i], &took, &error) && took)
			(*accepted)++;
	}
	if (*accepted < distseq_majority(s->nmembers))
		return psprintf("%d of the %d members took the change, %d needed",
						*accepted, s->nmembers, distseq_majority(s->nmembers));
	return NULL;
}

/* This node takes the change and records it: decided.  SPI connected. */
static char *
settle_decide(const char *schema, Settle *s)
{
	Oid			types[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(s->c.epoch), Int64GetDatum(s->c.epoch_id)};
	Datum		members = distseq_int8_array(s->c.members, s->c.nmembers);

	if (s->known)
	{
		Oid			ktypes[2] = {INT8OID, INT8OID};
		Datum		kvalues[2] = {Int64GetDatum(s->round), Int64GetDatum(s->self)};

		/* decided already: this node takes it, from where it is */
		if (!distseq_member_accept(schema, s->epoch, s->epoch_id, s->round, s->self,
								   s->c.epoch, s->c.epoch_id, members, s->self))
		{
			distseq_spi_exec(psprintf("SELECT 1 FROM %s.distseq_node WHERE pending"
									  " AND epoch = $1 AND epoch_id = $2", schema),
							 2, types, values, SPI_OK_SELECT);
			if (SPI_processed != 1)
				return pstrdup("this node moved on meanwhile");
		}
		distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET proposer = $2,"
								  " accepted_round = $1, accepted_node = $2", schema),
						 2, ktypes, kvalues, SPI_OK_UPDATE);
	}
	else if (!distseq_member_accept(schema, s->epoch, s->epoch_id, s->round, s->self,
									s->c.epoch, s->c.epoch_id, members, s->self))
		return pstrdup("a higher ballot reached this node meanwhile");
	distseq_member_record_change(schema, &s->c);
	return NULL;
}

/*
 * The instance this node settles, and its own promise, committed: once it
 * made its promise known, it must keep it.  Returns NULL, or (in s->cxt)
 * why it cannot settle.
 */
static char *
settle_begin(Settle *s, const char **schema_out)
{
	const char *schema;
	DistseqNodeState st;
	DistseqPromise own;
	bool		isnull;
	char	   *problem = NULL;

	distseq_xact_begin();
	distseq_spi_connect();
	schema = distseq_catalog_schema();
	*schema_out = schema;
	distseq_node_state(schema, &st);
	s->self = st.node_id;
	distseq_spi_exec(psprintf("SELECT COALESCE(prev_epoch, 0), COALESCE(prev_epoch_id, 0),"
							  " COALESCE(prev_members, '{}'), promised_round FROM %s.distseq_node",
							  schema), 0, NULL, NULL, SPI_OK_SELECT);
	s->round = distseq_spi_int8(0, 4) + 1;
	if (st.pending)
	{
		int64	   *m;

		s->epoch = distseq_spi_int8(0, 1);
		s->epoch_id = distseq_spi_int8(0, 2);
		m = distseq_int8_values(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3,
											  &isnull), &s->nmembers);
		s->members = copy_ids(s->cxt, m, s->nmembers);
	}
	else
	{
		s->epoch = st.epoch;
		s->epoch_id = st.epoch_id;
		s->nmembers = st.nmembers;
		s->members = copy_ids(s->cxt, st.members, st.nmembers);
	}
	if (s->epoch == 0 || !ids_have(s->members, s->nmembers, s->self))
		problem = MemoryContextStrdup(s->cxt,
									  "this node is no member of the membership it is in");
	else
	{
		distseq_member_promise(schema, s->epoch, s->epoch_id, s->round, s->self, s->self, &own);
		settle_tally(s, &own);
	}
	SPI_finish();
	distseq_xact_commit();
	return problem;
}

/*
 * Settle the change from the membership this node is in, or pending from.
 * In the worker, outside any transaction: this node's promise commits on
 * its own first (once it made its promise known, it must keep it), then the
 * rounds, then the decision with the record of the change.  Phase two is
 * left to change_finish.  Returns NULL, or (in "cxt") why it did nothing.
 */
char *
distseq_settle_run(MemoryContext cxt)
{
	const char *schema;
	Settle		s;
	char	   *problem;
	int			accepted = 1;	/* this node, at the end */

	memset(&s, 0, sizeof(s));
	s.cxt = cxt;
	if ((problem = settle_begin(&s, &schema)) != NULL)
		return problem;

	distseq_xact_begin();
	distseq_spi_connect();
	problem = settle_rounds(schema, &s, &accepted);
	if (problem && s.seen_round >= s.round)
	{
		Oid			types[1] = {INT8OID};
		Datum		values[1] = {Int64GetDatum(s.seen_round)};

		/*
		 * Refused for a higher ballot: the next try goes above it.  Raising
		 * its own promise only makes this node refuse more.
		 */
		distseq_spi_exec(psprintf("UPDATE %s.distseq_node SET promised_round = $1, promised_node = 0"
								  " WHERE promised_round < $1", schema),
						 1, types, values, SPI_OK_UPDATE);
	}
	if (problem)
		problem = MemoryContextStrdup(cxt, problem);
	SPI_finish();
	distseq_xact_commit();
	if (problem)
		return problem;

	distseq_xact_begin();
	distseq_spi_connect();
	distseq_member_lock_changes(schema);
	problem = settle_decide(schema, &s);
	if (problem)
		problem = MemoryContextStrdup(cxt, problem);
	SPI_finish();
	distseq_xact_commit();
	if (problem == NULL)
		ereport(LOG,
				(errmsg("distseq membership change from membership " INT64_FORMAT " settled here: %s membership " INT64_FORMAT " of %d members",
						s.epoch, s.known ? "it was decided," :
						s.noop ? "nothing was decided, abandoned for" : "finished,",
						s.c.epoch, s.c.nmembers)));
	return problem;
}

/*
 * Must this node settle the change from its membership before it proposes
 * one: pending in a change of another node; having promised a ballot (its
 * own moves of round 0 would be refused); or active while a member it
 * reaches is in a change from its membership: pending (in flight, or left
 * by a proposer that is lost: moves of round 0 would not reach a
 * majority), or active in it (decided, and this node, left behind, waits
 * for a phase two that a lost proposer never runs; settling takes it).
 * SPI connected.
 */
bool
distseq_settle_needed(const char *schema, DistseqNodeState *st)
{
	if (!distseq_member_settles())
		return false;
	if (st->pending)
		return st->proposer != st->node_id;
	distseq_spi_exec(psprintf("SELECT 1 FROM %s.distseq_node WHERE promised_round > 0", schema),
					 0, NULL, NULL, SPI_OK_SELECT);
	if (SPI_processed == 1)
		return true;
	if (!distseq_is_member(st, st->node_id))
		return false;
	for (int i = 0; i < st->nmembers; i++)
	{
		DistseqPeer *peer;
		char	   *error = NULL;
		int64		epoch;

		if (st->members[i] != st->node_id &&
			(peer = distseq_client_of(schema, st->members[i])) != NULL &&
			distseq_call_epoch(peer, &epoch, &error) && epoch == st->epoch + 1)
			return true;
	}
	return false;
}
