/*-------------------------------------------------------------------------
 *
 * agent.c
 *	  The agent: keeps at least min_open_windows open windows of every
 *	  sequence on this node, allocating new ones by a majority
 *	  compare-and-set of the sequence's high-water mark, and introduces
 *	  sequences created here to every peer.
 *
 * Allocating a window of X slots: read the high-water mark (hwm) from every
 * reachable member, take the largest, M, and run on each member in our
 * epoch "SET hwm = M + X WHERE hwm <= M".  The range [M, M + X) is ours
 * only if that succeeded on a majority of the members; then, and only
 * then, the window is inserted here.  hwm only grows, and any two
 * majorities share a node, on which the second winner needed M2 >= M1 + X1:
 * two wins never overlap.  The read only helps liveness.  Every
 * compare-and-set also names the membership epoch, so an agent with a stale
 * view of the membership wins nothing (member.c).
 *
 * A node without peers is a majority of one and runs the same steps
 * locally; the refill worker then allocates inline (windows.c).  A node
 * with peers never creates a window any other way.
 *
 * Runs in the refill worker every distseq.agent_interval and when a
 * reservation finds no open window, and in distseq_maintain().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#define AGENT_TRIES		5

/*
 * What a member's failure may add to an error: a hostile or broken peer
 * must not fill the detail (and the log) with its text
 */
#define AGENT_MEMBER_ERROR_SIZE	256

typedef struct Member
{
	int64		node_id;
	DistseqPeer *peer;			/* NULL for this node */
	bool		reachable;
	bool		in_epoch;		/* in the epoch this node believes in */
	bool		left_us;		/* active in a later one without this node */
	int64		epoch;			/* as it answered */
	int64		epoch_id;
	int			nmembers;
	const int64 *members;
	bool		has_sequence;
	int64		hwm;
	char	   *error;
} Member;

typedef struct AgentSeq
{
	char	   *name;
	int32		block_size;
	int64		window_size;
	int64		start_value;
	int64		max_value;
	int32		min_open;
} AgentSeq;

static MemoryContext pass_cxt = NULL;

/* May a member be asked now: not once it failed, nor while it rests */
static bool
member_ready(Member *m)
{
	const char *why;

	if (!m->reachable)
		return false;
	if (distseq_remote_resting(m->peer->serverid, &why))
	{
		m->reachable = false;
		/* the reason it rests, for who wonders why it is not asked */
		m->error = why[0] ? psprintf("%s (a moment ago)", why) :
			psprintf("%s: did not answer a moment ago", m->peer->name);
		return false;
	}
	return true;
}

/* Whether a call to a member worked; one that failed rests it for a while */
static bool
member_answered(Member *m, bool ok)
{
	if (!ok)
	{
		m->error = distseq_clean_text(m->error, AGENT_MEMBER_ERROR_SIZE);
		distseq_remote_rest(m->peer->serverid, m->error);
		m->reachable = false;
	}
	return ok;
}

/* The members other than this node, with a connection where one works */
static Member *
agent_members(const char *schema, DistseqNodeState *st, int *n)
{
	Member	   *ms = palloc0(sizeof(Member) * st->nmembers);
	int			k = 0;

	for (int i = 0; i < st->nmembers; i++)
	{
		Member	   *m;

		if (st->members[i] == st->node_id)
			continue;
		m = &ms[k++];
		m->node_id = st->members[i];
		m->peer = distseq_client_of(schema, m->node_id);
		m->reachable = m->peer != NULL;
		if (m->peer == NULL)
			m->error = psprintf("no server is registered here for node " INT64_FORMAT,
								m->node_id);
	}
	*n = k;
	return ms;
}

/*
 * No majority: say which members were reached and why each of the others
 * was not, each reason cut to AGENT_MEMBER_ERROR_SIZE
 */
static void
no_majority(AgentSeq *seq, DistseqNodeState *st, int got, Member *ms, int n)
{
	StringInfoData detail;
	bool		first = true;

	initStringInfo(&detail);
	appendStringInfoString(&detail, "Reached: this node");
	for (int i = 0; i < n; i++)
	{
		if (ms[i].reachable && ms[i].in_epoch)
			appendStringInfo(&detail, ", %s", ms[i].peer->name);
	}
	for (int i = 0; i < n; i++)
	{
		if (!ms[i].reachable || !ms[i].in_epoch)
		{
			appendStringInfo(&detail, "%s%s: %s", first ? ". Not reached: " : "; ",
							 ms[i].peer ? ms[i].peer->name : "?",
							 !ms[i].reachable ? ms[i].error : "in another membership epoch");
			first = false;
		}
	}
	appendStringInfoChar(&detail, '.');
	ereport(ERROR,
			(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("could not reach a majority of the %d members to allocate a window of distseq sequence \"%s\" (%d reached)",
					st->nmembers, seq->name, got),
			 errdetail_internal("%s", detail.data),
			 errhint("Open windows keep serving values; the agent tries again every distseq.agent_interval.")));
}

/*
 * Read the high-water mark from every reachable member, introducing the
 * sequence to those that lack it.  Returns how many members in our epoch
 * were read, this node included, the largest mark in *top and the
 * sequence's generation here in *gen.
 */
static int
agent_read(const char *schema, AgentSeq *seq, DistseqNodeState *st,
		   Member *ms, int n, int64 *top, int64 *gen)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(seq->name)};
	int			read = 1;

	distseq_spi_exec(psprintf("SELECT %s, s.generation FROM %s.distseq_sequences s"
							  " WHERE s.sequence_name = $1",
					  distseq_hwm_expr(schema), schema),
			 1, types, values, SPI_OK_SELECT);
	*top = distseq_spi_int8(0, 1);
	*gen = distseq_spi_int8(0, 2);

	for (int i = 0; i < n; i++)
	{
		Member	   *m = &ms[i];
		DistseqMemberView v;
		bool		has_hwm;

		m->in_epoch = false;
		m->left_us = false;
		if (!member_ready(m) ||
			!member_answered(m, distseq_call_view(m->peer, seq->name, &v, &m->error)))
			continue;
		m->has_sequence = v.has_sequence;
		m->epoch = v.epoch;
		m->epoch_id = v.epoch_id;
		m->members = v.members;
		m->nmembers = v.nmembers;
		m->in_epoch = m->epoch == st->epoch && m->epoch_id == st->epoch_id;
		if (!m->in_epoch)
		{
			bool		has_us = false;

			for (int j = 0; j < m->nmembers; j++)
				has_us |= m->members[j] == st->node_id;
			m->left_us = m->epoch > st->epoch && !has_us && v.active;
			continue;
		}
		/* a member without the sequence answers with its seed, if any */
		if (!member_ready(m) ||
			!member_answered(m, distseq_call_hwm(m->peer, seq->name, &has_hwm, &m->hwm,
												 &m->error)))
		{
			m->in_epoch = false;
			continue;
		}
		if (has_hwm)
			*top = Max(*top, m->hwm);
		read++;
	}
	return read;
}

/*
 * No majority in this node's membership: is it because the group went on
 * without this node, removed while it could not hear of it?  Only if a
 * majority of its members answered that they are active in later
 * memberships that leave it out (distseq_change_learn says why that is
 * proof).  Then this node takes the newest of them, and is out.
 */
static bool
agent_learn(const char *schema, DistseqNodeState *st, Member *ms, int n)
{
	Member	   *newest = NULL;
	int			said = 0;

	if (st->pending || !distseq_is_member(st, st->node_id))
		return false;
	for (int i = 0; i < n; i++)
	{
		if (!ms[i].left_us)
			continue;
		said++;
		if (newest == NULL || ms[i].epoch > newest->epoch)
			newest = &ms[i];
	}
	return said >= distseq_majority(st->nmembers) &&
		distseq_change_learn(schema, st, newest->epoch, newest->epoch_id,
							 newest->members, newest->nmembers, newest->node_id);
}

/* Create the sequence on members in our epoch that lack it, at mark "top" */
static void
agent_introduce(AgentSeq *seq, Member *ms, int n, int64 top)
{
	for (int i = 0; i < n; i++)
	{
		Member	   *m = &ms[i];

		if (!m->reachable || !m->in_epoch || m->has_sequence)
			continue;
		if (member_ready(m) &&
			member_answered(m, distseq_call_create(m->peer, seq->name, seq->block_size,
												   seq->window_size, seq->start_value,
												   seq->max_value, seq->min_open, top,
												   &m->error)))
		{
			m->has_sequence = true;
			m->hwm = top;
		}
	}
}

typedef enum AgentOutcome
{
	AGENT_DONE,					/* enough open windows, or no slot left */
	AGENT_WON,					/* won a window; there may be more to win */
	AGENT_LOST,					/* another agent won this round */
	AGENT_OUT					/* learned this node is out of its group */
} AgentOutcome;

/*
 * One attempt to win a window for this node.  Errors out without a
 * majority.  The caller commits right after, win or lose: no lock taken
 * here may be held while the next attempt asks peers anything, or agents
 * on different nodes would wait for each other.
 */
static AgentOutcome
agent_allocate(const char *schema, AgentSeq *seq, DistseqNodeState *st,
			   Member *ms, int n)
{
	int64		top;
	int64		gen;
	int64		size;
	int			wins = 0;
	int			read = agent_read(schema, seq, st, ms, n, &top, &gen);

	if (read < distseq_majority(st->nmembers))
		no_majority(seq, st, read, ms, n);
	if (top > seq->max_value)
		return AGENT_DONE;
	agent_introduce(seq, ms, n, top);

	size = distseq_room(top, seq->max_value, seq->window_size);
	for (int i = 0; i < n; i++)
	{
		Member	   *m = &ms[i];
		bool		won;

		if (!m->reachable || !m->in_epoch || !m->has_sequence)
			continue;
		if (member_ready(m) &&
			member_answered(m, distseq_call_cas(m->peer, seq->name, st->epoch, st->epoch_id,
												top, top + size, &won, &m->error)) &&
			won)
			wins++;
	}
	if (distseq_member_cas(schema, CStringGetTextDatum(seq->name), st->epoch,
						   st->epoch_id, top, top + size))
		wins++;

	if (wins >= distseq_majority(st->nmembers))
	{
		Oid			types[4] = {TEXTOID, INT8OID, INT8OID, INT8OID};
		Datum		values[4];

		values[0] = CStringGetTextDatum(seq->name);
		values[1] = Int64GetDatum(top);
		values[2] = Int64GetDatum(gen);
		values[3] = Int64GetDatum(top + size);

		/*
		 * Our own mark too, when it was not part of the majority; first, and
		 * only if the sequence kept the generation we read: a
		 * distseq_setval() committed here since then gave it a new one, and
		 * must not see a window below its floor opened after it (the win is
		 * given up).  One still in progress holds the row: it closes the
		 * window once we commit.
		 */
		distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences SET hwm = GREATEST(hwm, $4)"
						  " WHERE sequence_name = $1 AND generation = $3", schema),
				 4, types, values, SPI_OK_UPDATE);
		if (SPI_processed != 1)
			return AGENT_LOST;
		values[2] = Int64GetDatum(top + size);
		distseq_spi_exec(psprintf("INSERT INTO %s.distseq_windows"
						  " (sequence_name, window_start, window_end, next_hi)"
						  " VALUES ($1, $2, $3, $2)", schema),
				 3, types, values, SPI_OK_INSERT);
		distseq_note_windows(schema, distseq_catalog().changes);
		return AGENT_WON;
	}
	return AGENT_LOST;
}

/* The sequences of this node that may have peers (not striped ones) */
static List *
agent_sequences(const char *schema)
{
	List	   *seqs = NIL;

	distseq_spi_exec(psprintf("SELECT sequence_name, block_size::int8, window_size, start_value,"
					  " max_value, min_open_windows::int8 FROM %s.distseq_sequences"
					  " WHERE stripes = 1 AND servers IS NULL ORDER BY sequence_name", schema),
			 0, NULL, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		AgentSeq   *s = palloc(sizeof(AgentSeq));

		s->name = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		s->block_size = (int32) distseq_spi_int8(i, 2);
		s->window_size = distseq_spi_int8(i, 3);
		s->start_value = distseq_spi_int8(i, 4);
		s->max_value = distseq_spi_int8(i, 5);
		s->min_open = (int32) distseq_spi_int8(i, 6);
		seqs = lappend(seqs, s);
	}
	return seqs;
}

/*
 * One step for one sequence, in a transaction of its own that commits
 * before the next step talks to any peer: introduce the sequence where it
 * is missing, and try to win one window if fewer than min_open_windows
 * are open.
 */
static AgentOutcome
agent_step(const char *name)
{
	const char *schema;
	DistseqNodeState st;
	Member	   *ms;
	int			n;
	AgentSeq   *seq = NULL;
	ListCell   *lc;
	AgentOutcome outcome = AGENT_DONE;

	distseq_xact_begin();
	distseq_spi_connect();

	/* everything of a step lives in SPI's memory, gone at SPI_finish */
	schema = distseq_catalog_schema();
	distseq_node_verify(schema);
	foreach(lc, agent_sequences(schema))
	{
		if (strcmp(((AgentSeq *) lfirst(lc))->name, name) == 0)
			seq = lfirst(lc);
	}
	if (seq)
	{
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {CStringGetTextDatum(seq->name)};
		int64		top;
		int64		gen;
		int			read;

		distseq_node_state(schema, &st);
		/* a change may have left this node out since the pass began */
		if (!distseq_is_member(&st, st.node_id))
			distseq_not_member_error(schema, &st);
		ms = agent_members(schema, &st, &n);
		read = agent_read(schema, seq, &st, ms, n, &top, &gen);
		if (read < distseq_majority(st.nmembers) && agent_learn(schema, &st, ms, n))
		{
			/* committed, the next step says so */
			SPI_finish();
			distseq_xact_commit();
			return AGENT_OUT;
		}
		if (read < distseq_majority(st.nmembers))
			no_majority(seq, &st, read, ms, n);
		agent_introduce(seq, ms, n, top);

		distseq_spi_exec(psprintf("SELECT count(*) FROM %s.distseq_windows"
						  " WHERE sequence_name = $1 AND next_hi < window_end", schema),
				 1, types, values, SPI_OK_SELECT);
		/* a change may have moved this node since the pass began */
		if (distseq_spi_int8(0, 1) < seq->min_open &&
			!st.pending && distseq_is_member(&st, st.node_id))
			outcome = agent_allocate(schema, seq, &st, ms, n);
	}

	SPI_finish();
	distseq_xact_commit();
	return outcome;
}

/* Keep one sequence's windows open, with retries when other agents win */
static void
agent_sequence(const char *name)
{
	int			lost = 0;

	for (;;)
	{
		AgentOutcome outcome = agent_step(name);

		CHECK_FOR_INTERRUPTS();
		distseq_between_steps();
		if (outcome == AGENT_DONE)
			return;
		/* the next step says why */
		if (outcome == AGENT_OUT)
			continue;
		if (outcome == AGENT_WON)
		{
			lost = 0;
			continue;
		}
		if (++lost >= AGENT_TRIES)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not win a window of distseq sequence \"%s\" in %d tries",
							name, AGENT_TRIES),
					 errdetail("Other agents kept raising the high-water mark first.")));
		/* another agent won this round: back off a random while */
		pg_usleep(10000L + (long) (DISTSEQ_RANDOM_FRACTION() * 90000));
	}
}

/* A node that is not an active member of its group opens no window */
static void
agent_check_member(const char *schema)
{
	DistseqNodeState st;

	distseq_node_state(schema, &st);
	if (!distseq_is_member(&st, st.node_id))
		distseq_not_member_error(schema, &st);
	if (st.pending)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("this distseq node is in a membership change that is not active here yet"),
				 errhint("Its proposer finishes it, or abandons it; distseq_peers shows the members.")));
}

/*
 * One pass of the agent over every sequence of this node.  Only the refill
 * worker runs it, outside any transaction: each step commits on its own,
 * so no row lock here is held while a peer is asked anything, and the
 * worker serves the refills asked for meanwhile between steps.  "afresh":
 * try the peers that did not answer lately too.  "focus", if not NULL, is
 * a sequence whose refill waits for this pass: it goes first.
 *
 * One sequence failing does not keep the others from their windows:
 * returns a DistseqAgentFailure for each sequence that failed, in the
 * order tried, valid until the next pass.  An error before any sequence
 * (this node is no member, say) is raised.
 */
List *
distseq_agent_run(bool afresh, const char *focus)
{
	MemoryContext oldcxt;
	MemoryContext cxt;
	List	   *seqs;
	List	   *volatile names = NIL;
	ListCell   *lc;
	List	   *volatile failed = NIL;

	/* one context for every pass, emptied at the start: a pass may fail */
	if (pass_cxt == NULL)
		pass_cxt = AllocSetContextCreate(TopMemoryContext, "distseq agent",
										 ALLOCSET_DEFAULT_SIZES);
	MemoryContextReset(pass_cxt);
	cxt = pass_cxt;
	if (afresh)
		distseq_remote_wake_all();

	distseq_change_resume();

	distseq_xact_begin();
	distseq_spi_connect();
	agent_check_member(distseq_catalog_schema());
	seqs = agent_sequences(distseq_catalog_schema());
	/* SPI's memory goes at SPI_finish: keep the names in ours */
	oldcxt = MemoryContextSwitchTo(cxt);
	foreach(lc, seqs)
	{
		char	   *name = pstrdup(((AgentSeq *) lfirst(lc))->name);

		if (focus && strcmp(name, focus) == 0)
			names = lcons(name, names);
		else
			names = lappend(names, name);
	}
	MemoryContextSwitchTo(oldcxt);
	SPI_finish();
	distseq_xact_commit();

	foreach(lc, names)
	{
		PG_TRY();
		{
			agent_sequence(lfirst(lc));
		}
		PG_CATCH();
		{
			DistseqAgentFailure *f;

			MemoryContextSwitchTo(cxt);
			f = palloc(sizeof(DistseqAgentFailure));
			f->sequence_name = lfirst(lc);
			f->error = CopyErrorData();
			failed = lappend(failed, f);
			FlushErrorState();
			AbortCurrentTransaction();
		}
		PG_END_TRY();
	}
	MemoryContextSwitchTo(oldcxt);
	return failed;
}

PG_FUNCTION_INFO_V1(distseq_maintain);

/*
 * Run the agent now: the refill worker does it and this backend waits for
 * it, so that no user transaction holds catalog rows while peers are asked
 * anything.  One row per sequence: windows it opened, windows open now.
 */
Datum
distseq_maintain(PG_FUNCTION_ARGS)
{
	int			search_path_level;
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	const char *schema;
	const char *count_sql;
	HTAB	   *before;
	HASHCTL		ctl;
	struct
	{
		char		name[NAMEDATALEN];
		int64		open;
	}		   *e;

	distseq_check_loaded();
	distseq_check_writable("distseq_maintain()");
	search_path_level = distseq_pin_search_path();
	InitMaterializedSRF(fcinfo, 0);
	schema = distseq_catalog_schema();
	count_sql = psprintf("SELECT s.sequence_name, count(w.*) FILTER (WHERE w.next_hi < w.window_end)"
						 " FROM %s.distseq_sequences s LEFT JOIN %s.distseq_windows w"
						 " USING (sequence_name) WHERE s.stripes = 1 AND s.servers IS NULL"
						 " GROUP BY 1 ORDER BY 1", schema, schema);

	ctl.keysize = NAMEDATALEN;
	ctl.entrysize = sizeof(*e);
	ctl.hcxt = CurrentMemoryContext;
	before = hash_create("distseq maintain", 16, &ctl,
						 HASH_ELEM | HASH_CONTEXT | DISTSEQ_HASH_STRINGS);
	distseq_spi_connect();
	/* a node that knows it is out says so here, in full (the hint too) */
	if (distseq_catalog().peers)
		distseq_check_in_group(schema);
	distseq_spi_exec(count_sql, 0, NULL, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char		key[NAMEDATALEN] = {0};

		strlcpy(key, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1),
				NAMEDATALEN);
		e = hash_search(before, key, HASH_ENTER, NULL);
		e->open = distseq_spi_int8(i, 2);
	}
	SPI_finish();

	distseq_worker_agent_pass(MyDatabaseId);

	/* the worker committed: see what it did */
	distseq_spi_connect();
	distseq_spi_exec(count_sql, 0, NULL, NULL, SPI_OK_SELECT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char		key[NAMEDATALEN] = {0};
		Datum		values[3];
		bool		nulls[3] = {0};
		int64		open = distseq_spi_int8(i, 2);
		bool		found;

		strlcpy(key, SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1),
				NAMEDATALEN);
		e = hash_search(before, key, HASH_FIND, &found);
		values[0] = CStringGetTextDatum(key);
		values[1] = Int32GetDatum((int32) Max(open - (found ? e->open : 0), 0));
		values[2] = Int64GetDatum(open);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
	distseq_unpin_search_path(search_path_level);
	return (Datum) 0;
}
