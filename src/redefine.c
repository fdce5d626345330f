/*-------------------------------------------------------------------------
 *
 * redefine.c
 *	  Changes to a live sequence, made on this server and on every member of
 *	  its group: distseq_setval() moves it forward, so that no server hands
 *	  out a value at or below a given one from then on; distseq_alter()
 *	  changes its block_size, window_size, max_value or min_open_windows, as
 *	  ALTER SEQUENCE does; distseq_redefine_peer() is the part a member runs
 *	  for them, called by distseq_peer_setval() and distseq_peer_alter()
 *	  (peer.c).
 *
 * On each server a change is made in one transaction, like a drop followed
 * by a create that keeps the relation:
 *
 *	- AccessExclusiveLock on the backing relation, and the handshake of
 *	  inuse.c, wait for every transaction that uses the sequence; later ones
 *	  wait for our lock;
 *	- the catalog row gets a new generation: every pool and stream of the
 *	  old one in shared memory is stale, its entries are freed (shmem.c) and the
 *	  worker can reserve nothing more for it (windows.c checks the
 *	  generation); a refill in flight holds the row, and we wait for it;
 *	- setval: every window below the floor is closed (next_hi raised to
 *	  it), the slots between the top of the windows and the floor are
 *	  recorded as one closed window, and the high-water mark is raised to
 *	  the floor: windows opened later, here or won by any majority of
 *	  members that includes a server that applied it, start above it;
 *	- alter: the row gets the new parameters, and a lowered max_value cuts
 *	  the windows above it (none of it was reserved: that is refused); the
 *	  refills and the agent open windows up to a raised one, and chunks are
 *	  cut of the new block_size, since the new generation has none yet;
 *	- the relcache invalidation of the relation, sent at commit, and the
 *	  count of ended drops make every backend read the definition again
 *	  before it draws: it then attaches to an entry of the new generation.
 *
 * A rollback undoes the catalog's part: the old generation and its windows
 * are as they were, and nothing was reserved for the new one.  The entries
 * freed stay free: backends attach new ones and refill, and what the old
 * ones held is lost, never handed out again.
 *
 * With peers, the caller first asks every member how far it has reserved
 * (nothing is changed if one does not answer, or if the value, or the new
 * max_value, is below that), then has every member apply it, each in its own transaction
 * there, and applies it here last, holding nothing while it asks.  An
 * agent inserts a window it won only if the sequence here still has the
 * generation it read before its compare-and-sets (agent.c): a window won
 * before the floor was raised is never opened here after it.
 *
 * Locking: the backing relation's AccessExclusiveLock, the row of the
 * sequence (updated first, so that windows are closed after every
 * reservation that held it), then its windows.
 *
 * The file is a little over 700 lines: setval and alter share every step
 * (read, check, ask the members, apply), and a file of its own for asking
 * the members would call this one back for the checks they share.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"

/* What a member's failure may add to an error */
#define SETVAL_MEMBER_ERROR_SIZE	256

/* What this server's catalog says of a sequence, for setval */
typedef struct SetvalSeq
{
	Oid			relid;
	uint64		gen;
	int64		start_value;
	int64		max_value;
	int32		block_size;
	int64		window_size;
	int32		min_open;
	int32		stripes;
	int32		stripe;
	bool		has_servers;	/* draws from other servers */
	bool		reserved_any;
	int64		reserved_top;	/* the highest value reserved here */
} SetvalSeq;

/*
 * A change: setval's floor, or alter's parameters (the caller's own for
 * those it keeps, so that every member gets the same)
 */
typedef struct SeqChange
{
	const char *fn;				/* "distseq_setval()" or "distseq_alter()" */
	bool		alter;
	int64		value;			/* setval: the floor */
	int32		block_size;		/* alter: the new parameters */
	int64		window_size;
	bool		keep_max;
	int64		max_value;
	int32		min_open;
} SeqChange;

static void
check_minor(const char *fn)
{
	if (!distseq_catalog().redefine_members)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s needs version 1.7 of extension \"distseq\"", fn),
				 errhint("Run ALTER EXTENSION distseq UPDATE on every server.")));
}

/*
 * Read a sequence for setval, SPI connected.  With "lock", its row is
 * locked: the refills in flight have ended, and no other will start before
 * the end of our transaction.  False if there is no such sequence.
 */
static bool
setval_read(const char *schema, const char *name, bool lock, SetvalSeq *s)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(name)};
	bool		isnull;

	if (distseq_spi_exec(psprintf("SELECT seqrel::oid::int8, start_value, max_value,"
								  " stripes::int8, stripe::int8, (servers IS NOT NULL)::int::int8,"
								  " (SELECT max(w.next_hi) FROM %s.distseq_windows w"
								  "  WHERE w.sequence_name = s.sequence_name"
								  "  AND w.next_hi > w.window_start), generation,"
								  " block_size::int8, window_size, min_open_windows::int8"
								  " FROM %s.distseq_sequences s WHERE sequence_name = $1%s",
								  schema, schema, lock ? " FOR NO KEY UPDATE" : ""),
						 1, types, values, SPI_OK_SELECT) != 1)
		return false;
	s->relid = (Oid) distseq_spi_int8(0, 1);
	s->start_value = distseq_spi_int8(0, 2);
	s->max_value = distseq_spi_int8(0, 3);
	s->stripes = (int32) distseq_spi_int8(0, 4);
	s->stripe = (int32) distseq_spi_int8(0, 5);
	s->has_servers = distseq_spi_int8(0, 6) != 0;
	(void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 7, &isnull);
	s->reserved_any = !isnull;
	s->gen = (uint64) distseq_spi_int8(0, 8);
	s->block_size = (int32) distseq_spi_int8(0, 9);
	s->window_size = distseq_spi_int8(0, 10);
	s->min_open = (int32) distseq_spi_int8(0, 11);
	/* next_hi is the slot after the last one reserved */
	s->reserved_top = isnull ? 0 :
		DISTSEQ_VALUE(distseq_spi_int8(0, 7) - 1, s->stripes, s->stripe);
	return true;
}

/* The first slot of the sequence whose value is above "value" */
static int64
setval_floor_slot(const SetvalSeq *s, int64 value)
{
	/* value >= start_value, which create_sequence() keeps this far from the end */
	int64		x = value - s->stripe;
	int64		q = x / s->stripes;

	if (x % s->stripes < 0)
		q--;
	return q + 1;
}

pg_noreturn static void
change_below(const SeqChange *c, const char *name, int64 top, const char *where)
{
	if (c->alter)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distseq_alter: max_value " INT64_FORMAT " is below what distseq sequence \"%s\" may have handed out",
						c->max_value, name),
				 errdetail("%s has reserved values up to " INT64_FORMAT ", and any of them may have been handed out.",
						   where, top),
				 errhint("Set a max_value of at least " INT64_FORMAT ".", top)));
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("distseq_setval: value " INT64_FORMAT " is below what distseq sequence \"%s\" may have handed out",
					c->value, name),
			 errdetail("%s has reserved values up to " INT64_FORMAT ", and any of them may have been handed out.",
					   where, top),
			 errhint("distseq_setval() only moves a sequence forward: set a value of at least " INT64_FORMAT ".",
					 top)));
}

/* Whether "top", reserved somewhere, forbids the change */
static bool
change_refused(const SeqChange *c, int64 top)
{
	return c->alter ? top > c->max_value : c->value < top;
}

/* setval's part of change_apply(): close everything below the floor */
static void
setval_floor(const char *schema, const char *name, const SetvalSeq *s,
			 int64 value)
{
	Oid			types[3] = {TEXTOID, INT8OID, INT8OID};
	Datum		values[3];
	int64		floor;
	int64		first;
	int64		last;
	int64		top;
	int64		skipped;

	floor = setval_floor_slot(s, value);
	distseq_slots(s->start_value, s->max_value, s->stripes, s->stripe, &first, &last);
	values[0] = CStringGetTextDatum(name);
	values[1] = Int64GetDatum(floor);
	values[2] = Int64GetDatum(first);
	distseq_spi_exec(psprintf("WITH closed AS ("
							  " UPDATE %s.distseq_windows w SET next_hi = LEAST(w.window_end, $2)"
							  " WHERE w.sequence_name = $1 AND w.next_hi < $2"
							  " AND w.next_hi < w.window_end"
							  " RETURNING LEAST(w.window_end, $2) - w.next_hi AS rest)"
							  " SELECT COALESCE(sum(rest), 0)::int8 FROM closed",
							  schema),
					 2, types, values, SPI_OK_SELECT);
	skipped = distseq_spi_int8(0, 1);

	/*
	 * The slots from the top of every window and mark up to the floor stay
	 * on record as one closed window, as a rejoin's do: what was reserved
	 * goes up to the floor, and windows opened later start above it.
	 */
	distseq_spi_exec(psprintf("SELECT GREATEST(COALESCE((SELECT w.window_end FROM %s.distseq_windows w"
							  "  WHERE w.sequence_name = $1 ORDER BY w.window_start DESC LIMIT 1), $3),"
							  " COALESCE(s.hwm, $3))"
							  " FROM %s.distseq_sequences s WHERE s.sequence_name = $1",
							  schema, schema),
					 3, types, values, SPI_OK_SELECT);
	top = distseq_spi_int8(0, 1);
	if (top < floor)
	{
		values[2] = Int64GetDatum(top);
		distseq_spi_exec(psprintf("INSERT INTO %s.distseq_windows"
								  " (sequence_name, window_start, window_end, next_hi)"
								  " VALUES ($1, $3, $2, $2)", schema),
						 3, types, values, SPI_OK_INSERT);
		skipped += floor - top;
	}

	values[2] = Int64GetDatum(skipped);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences s"
							  " SET hwm = GREATEST(s.hwm, $2),"
							  " values_reserved = s.values_reserved + $3,"
							  " values_lost = s.values_lost + $3"
							  " WHERE s.sequence_name = $1",
							  schema),
					 3, types, values, SPI_OK_UPDATE);
}

/*
 * alter's part of change_apply(): the new parameters, and no window above
 * the new max_value
 */
static void
alter_params(const char *schema, const char *name, const SetvalSeq *s,
			 const SeqChange *c)
{
	Oid			types[5] = {TEXTOID, INT8OID, INT8OID, INT8OID, INT8OID};
	Datum		values[5];
	int64		first;
	int64		last;

	/* reserved since the caller asked: refused all the same */
	if (s->reserved_any && change_refused(c, s->reserved_top))
		change_below(c, name, s->reserved_top, "This server");

	/* slots above "last" were never reserved: cut the windows there */
	distseq_slots(s->start_value, c->max_value, s->stripes, s->stripe, &first, &last);
	values[0] = CStringGetTextDatum(name);
	values[1] = Int64GetDatum(last);
	distseq_spi_exec(psprintf("DELETE FROM %s.distseq_windows w"
							  " WHERE w.sequence_name = $1 AND w.window_start > $2",
							  schema),
					 2, types, values, SPI_OK_DELETE);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_windows w SET window_end = $2 + 1"
							  " WHERE w.sequence_name = $1 AND w.window_end > $2 + 1",
							  schema),
					 2, types, values, SPI_OK_UPDATE);

	/*
	 * Without the majority protocol, the mark is the top of this server's
	 * windows (windows.c): a raised max_value opens windows from the new
	 * top again.  With it, the mark is the group's compare-and-set word and
	 * stays: a member that did not apply this may still reserve below it,
	 * so windows opened later start above it.
	 */
	if (s->stripes > 1 || !distseq_has_peers(schema))
		distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences s SET hwm = $2 + 1"
								  " WHERE s.sequence_name = $1 AND s.hwm > $2 + 1",
								  schema),
						 2, types, values, SPI_OK_UPDATE);

	values[1] = Int64GetDatum((int64) c->block_size);
	values[2] = Int64GetDatum(c->window_size);
	values[3] = Int64GetDatum(c->max_value);
	values[4] = Int64GetDatum((int64) c->min_open);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences s"
							  " SET block_size = $2::int4, window_size = $3,"
							  " max_value = $4, min_open_windows = $5::int4"
							  " WHERE s.sequence_name = $1",
							  schema),
					 5, types, values, SPI_OK_UPDATE);
}

/*
 * Apply a change on this server, in the caller's transaction; SPI
 * connected.  False if there is no such sequence here.
 */
static bool
change_apply(const char *schema, const char *name, const SeqChange *c)
{
	SetvalSeq	s;
	Oid			types[2] = {TEXTOID, INT8OID};
	Datum		values[2];
	uint64		gen;
	Oid			locked;

	if (!setval_read(schema, name, false, &s))
		return false;

	/*
	 * Wait for the transactions that use the sequence, before we hold its
	 * row: one of them may be waiting for a refill that needs the row.
	 */
	locked = s.relid;
	LockRelationOid(locked, AccessExclusiveLock);
	distseq_inuse_wait(locked);
	if (!setval_read(schema, name, true, &s))
		return false;

	/*
	 * Dropped and created again while we waited for the lock: nobody waited
	 * for the users of the new one, which may be drawing from blocks that
	 * the change would leave below its floor or above its maximum.
	 */
	if (s.relid != locked)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distseq sequence \"%s\" was dropped and created again during %s",
						name, c->fn),
				 errhint("Run %s again.", c->fn)));

	/*
	 * A floor is not refused for what was reserved since the caller checked
	 * it: once members applied it, agents win windows above it, and values
	 * reserved there stay valid.
	 */

	distseq_seq_forget(s.relid);

	if (c->alter)
		alter_params(schema, name, &s, c);
	else
		setval_floor(schema, name, &s, c->value);

	/* a random generation, never 0, never the one it had */
	do
	{
		if (!pg_strong_random(&gen, sizeof(gen)))
			elog(ERROR, "could not generate a random number");
		gen &= PG_INT64_MAX;
	} while (gen == 0 || gen == s.gen);
	values[0] = CStringGetTextDatum(name);
	values[1] = Int64GetDatum((int64) gen);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences s SET generation = $2"
							  " WHERE s.sequence_name = $1",
							  schema),
					 2, types, values, SPI_OK_UPDATE);

	CacheInvalidateRelcacheByRelid(s.relid);
	distseq_local_reset(s.relid);
	return true;
}

/* A member, asked or told about a change */
typedef struct SetvalMember
{
	DistseqPeer *peer;
	int64		node_id;
	bool		answered;
	bool		has_top;
	int64		top;
	char	   *error;
} SetvalMember;

static bool
change_ask(SetvalMember *m, const char *name, const SeqChange *c, bool apply)
{
	if (m->peer == NULL)
		return false;
	if (c->alter)
		m->answered = distseq_call_alter(m->peer, name, c->block_size, c->window_size,
										 c->max_value, c->min_open, apply, &m->has_top,
										 &m->top, &m->error);
	else
		m->answered = distseq_call_setval(m->peer, name, c->value, apply, &m->has_top,
										  &m->top, &m->error);
	if (!m->answered)
	{
		m->error = distseq_clean_text(m->error, SETVAL_MEMBER_ERROR_SIZE);
		return false;
	}
	return true;
}

/* The members that did not answer, and why, for an error's detail */
static char *
setval_failures(SetvalMember *ms, int n, bool *any)
{
	StringInfoData buf;

	initStringInfo(&buf);
	*any = false;
	for (int i = 0; i < n; i++)
	{
		if (ms[i].answered)
			continue;
		appendStringInfo(&buf, "%s%s: %s", *any ? "; " : "",
						 ms[i].peer ? ms[i].peer->name :
						 psprintf("node " INT64_FORMAT, ms[i].node_id),
						 ms[i].error ? ms[i].error : "no server is registered here for it");
		*any = true;
	}
	return buf.data;
}

/*
 * Every member other than this node applies the change, after each has
 * said how far it reserved; SPI connected.
 */
static void
change_members(const char *schema, const char *name, const SeqChange *c)
{
	DistseqNodeState st;
	SetvalMember *ms;
	int			n = 0;
	bool		failed;
	char	   *why;
	const char *verb = c->alter ? "alter" : "set";
	StringInfoData applied;

	distseq_node_state(schema, &st);
	if (!distseq_is_member(&st, st.node_id))
		distseq_not_member_error(schema, &st);
	ms = palloc0(sizeof(SetvalMember) * st.nmembers);
	for (int i = 0; i < st.nmembers; i++)
	{
		if (st.members[i] == st.node_id)
			continue;
		ms[n].node_id = st.members[i];
		ms[n].peer = distseq_client_of(schema, st.members[i]);
		n++;
	}

	/* first ask: nothing changes anywhere unless every member answers */
	for (int i = 0; i < n; i++)
		(void) change_ask(&ms[i], name, c, false);
	why = setval_failures(ms, n, &failed);
	if (failed)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not %s distseq sequence \"%s\": not every member answered",
						verb, name),
				 errdetail_internal("Not reached: %s. Nothing was changed.", why),
				 errhint("Call %s again once every member answers; distseq_peers shows them.",
						 c->fn)));
	for (int i = 0; i < n; i++)
	{
		if (ms[i].has_top && change_refused(c, ms[i].top))
			change_below(c, name, ms[i].top,
						 psprintf("Member \"%s\"", ms[i].peer->name));
	}

	for (int i = 0; i < n; i++)
		(void) change_ask(&ms[i], name, c, true);
	why = setval_failures(ms, n, &failed);
	if (failed)
	{
		bool		first = true;

		initStringInfo(&applied);
		for (int i = 0; i < n; i++)
		{
			if (!ms[i].answered)
				continue;
			appendStringInfo(&applied, "%s%s", first ? "" : ", ", ms[i].peer->name);
			first = false;
		}
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not %s distseq sequence \"%s\" on every member", verb, name),
				 c->alter ?
				 errdetail_internal("Not reached: %s. Applied on: %s; not on this server nor on those not reached, which keep the parameters they had.",
									why, first ? "none" : applied.data) :
				 errdetail_internal("Not reached: %s. Applied on: %s; not on this server nor on those not reached, which may still hand out values up to " INT64_FORMAT ".",
									why, first ? "none" : applied.data, c->value),
				 errhint("Call %s again once every member answers.", c->fn)));
	}
}

/*
 * May the caller (save_userid) change sequence "s" this way?  As ALTER
 * SEQUENCE or setval() on the backing sequence, and only a sequence whose
 * creation has committed and that draws from this server's own windows.
 */
static void
change_check(const char *name, SeqChange *c, SetvalSeq *s, Oid save_userid)
{
	/*
	 * A function or DO block is no transaction block: the sequence may have
	 * been created by this very transaction.  Its first values come from
	 * the creation's counter, recorded at commit under the generation it
	 * was created with (increate.c): a new one would lose that record, and
	 * they would come again.
	 */
	if (distseq_created_here(s->relid, s->gen))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distseq sequence \"%s\" was created by the current transaction", name),
				 errdetail("%s changes only a sequence whose creation has committed.", c->fn),
				 errhint("Commit the transaction that created the sequence first.")));
	if (c->alter)
	{
		/* as ALTER SEQUENCE on the backing sequence */
		if (!distseq_rel_ownercheck(s->relid, save_userid))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("must be owner of distseq sequence \"%s\"", name),
					 errdetail("distseq_alter() may be called by the owner of distseq.%s, as ALTER SEQUENCE.",
							   quote_identifier(name))));
	}
	/* as setval() on the backing sequence */
	else if (pg_class_aclcheck(s->relid, save_userid, ACL_UPDATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for distseq sequence \"%s\"", name),
				 errhint("The owner can grant it with GRANT UPDATE ON SEQUENCE distseq.%s.",
						 quote_identifier(name))));
	if (s->has_servers)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("distseq sequence \"%s\" draws from other servers", name),
				 errhint("Call %s on the servers it draws from.", c->fn)));
}

/*
 * Fill in what alter keeps from sequence "s" as this server has it (every
 * member gets the same), and check the new bounds, or setval's value.
 */
static void
change_complete(const char *name, SeqChange *c, SetvalSeq *s)
{
	int64		first;
	int64		last;

	if (!c->alter)
	{
		if (c->value < s->start_value || c->value > s->max_value)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("distseq_setval: value " INT64_FORMAT " is out of bounds for distseq sequence \"%s\" (" INT64_FORMAT ".." INT64_FORMAT ")",
							c->value, name, s->start_value, s->max_value)));
		return;
	}
	if (c->block_size == 0)
		c->block_size = s->block_size;
	if (c->window_size == 0)
		c->window_size = s->window_size;
	if (c->min_open == 0)
		c->min_open = s->min_open;
	if (c->keep_max)
		c->max_value = s->max_value;
	if (c->max_value < s->start_value)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_value (" INT64_FORMAT ") cannot be less than start_value (" INT64_FORMAT ")",
						c->max_value, s->start_value)));
	distseq_slots(s->start_value, c->max_value, s->stripes, s->stripe, &first, &last);
	if (first > last)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("no value from start_value to max_value is in stripe %d of %d",
						s->stripe, s->stripes)));
}

/*
 * The part of distseq_setval() and distseq_alter() run here: check the
 * caller and the change against this server's catalog (alter's kept
 * parameters are filled in from it), then apply it on every member and
 * here.  The catalog is not readable by PUBLIC: it is read and changed as
 * the bootstrap superuser (distseq_spi_enter_catalog) once the caller's
 * right is checked; an error restores the caller's identity.
 */
static void
change_run(const char *name, SeqChange *c)
{
	DistseqSpiContext cxt;
	const char *schema;
	SetvalSeq	s;

	distseq_check_loaded();
	distseq_check_writable(c->fn);
	distseq_check_name(name);
	check_minor(c->fn);
	PreventInTransactionBlock(true, c->fn);
	distseq_spi_enter_catalog(&cxt);
	schema = distseq_catalog_schema();
	if (!setval_read(schema, name, false, &s))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("distseq sequence \"%s\" does not exist", name)));
	change_check(name, c, &s, cxt.save_userid);
	change_complete(name, c, &s);
	if (s.reserved_any && change_refused(c, s.reserved_top))
		change_below(c, name, s.reserved_top, "This server");

	/* striped sequences are this server's alone */
	if (s.stripes == 1 && distseq_has_peers(schema))
		change_members(schema, name, c);
	if (!change_apply(schema, name, c))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("distseq sequence \"%s\" does not exist", name)));
	distseq_spi_leave_catalog(&cxt);
}

PG_FUNCTION_INFO_V1(distseq_setval);

/*
 * distseq_setval(sequence_name, value): from now on no server hands out a
 * value of the sequence at or below "value".  Returns "value", as setval().
 */
Datum
distseq_setval(PG_FUNCTION_ARGS)
{
	SeqChange	c = {.fn = "distseq_setval()", .value = PG_GETARG_INT64(1)};

	change_run(text_to_cstring(PG_GETARG_TEXT_PP(0)), &c);
	PG_RETURN_INT64(c.value);
}

/* A parameter of distseq_alter(), checked; "dflt" if NULL */
static int64
alter_arg(FunctionCallInfo fcinfo, int n, const char *what, int64 max, int64 dflt)
{
	int64		v;

	if (PG_ARGISNULL(n))
		return dflt;
	v = PG_GETARG_INT64(n);
	if (v <= 0 || v > max)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be between 1 and " INT64_FORMAT, what, max),
				 errdetail("The value given was " INT64_FORMAT ".", v)));
	return v;
}

PG_FUNCTION_INFO_V1(distseq_alter);

/*
 * distseq_alter(sequence_name, block_size, window_size, max_value,
 * min_open_windows): change the parameters that are not NULL, on every
 * member.
 */
Datum
distseq_alter(PG_FUNCTION_ARGS)
{
	SeqChange	c = {.fn = "distseq_alter()", .alter = true};

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("sequence_name must not be null")));
	/* 0: kept, filled in by change_run() */
	c.block_size = (int32) alter_arg(fcinfo, 1, "block_size", PG_INT32_MAX, 0);
	c.window_size = alter_arg(fcinfo, 2, "window_size", PG_INT64_MAX, 0);
	c.min_open = (int32) alter_arg(fcinfo, 4, "min_open_windows",
								   DISTSEQ_MAX_OPEN_WINDOWS, 0);
	c.keep_max = PG_ARGISNULL(3);
	if (!c.keep_max)
		c.max_value = PG_GETARG_INT64(3);
	if (c.max_value > PG_INT64_MAX - 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("max_value must be at most " INT64_FORMAT, PG_INT64_MAX - 1)));
	change_run(text_to_cstring(PG_GETARG_TEXT_PP(0)), &c);
	PG_RETURN_VOID();
}

/*
 * A member's part of a change: how far this server reserved the sequence
 * (NULL if nothing, or if it has no such sequence), and with "apply", the
 * change applied here first.
 */
static Datum
change_peer(FunctionCallInfo fcinfo, const char *name, const SeqChange *c,
			bool apply)
{
	const char *schema;
	SetvalSeq	s;
	bool		found;

	distseq_check_loaded();
	distseq_check_writable(c->fn);
	distseq_check_name(name);
	distseq_spi_connect();
	schema = distseq_catalog_schema();

	/*
	 * A member that does not have the sequence yet keeps a setval's floor as
	 * its seed, the mark it starts from once an agent introduces the
	 * sequence here: the agent may have read the marks before the floor was
	 * raised.  Peers are not striped: the slot above the value is value + 1
	 * (the caller checked the value against max_value, which is below the
	 * end).  An alter leaves no such note: a member without the sequence
	 * takes its parameters from the node that introduces it.
	 */
	if (apply && !change_apply(schema, name, c) && !c->alter)
	{
		Oid			types[2] = {TEXTOID, INT8OID};
		Datum		values[2] = {PG_GETARG_DATUM(0),
		Int64GetDatum(c->value < PG_INT64_MAX ? c->value + 1 : c->value)};

		distseq_spi_exec(psprintf("INSERT INTO %s.distseq_seed (sequence_name, hwm)"
								  " VALUES ($1, $2) ON CONFLICT (sequence_name)"
								  " DO UPDATE SET hwm = GREATEST(%s.distseq_seed.hwm, EXCLUDED.hwm)",
								  schema, schema),
						 2, types, values, SPI_OK_INSERT);
	}
	found = setval_read(schema, name, false, &s);
	SPI_finish();
	if (!found || !s.reserved_any)
		PG_RETURN_NULL();
	PG_RETURN_INT64(s.reserved_top);
}

/*
 * distseq_peer_setval() and distseq_peer_alter() (peer.c), with their
 * arguments: the parts of distseq_setval() and distseq_alter() a member
 * runs.
 */
Datum
distseq_redefine_peer(FunctionCallInfo fcinfo, bool alter)
{
	SeqChange	c = {.fn = "distseq_peer_setval()"};

	if (!alter)
	{
		c.value = PG_GETARG_INT64(1);
		return change_peer(fcinfo, text_to_cstring(PG_GETARG_TEXT_PP(0)), &c,
						   PG_GETARG_BOOL(2));
	}
	c.fn = "distseq_peer_alter()";
	c.alter = true;
	c.block_size = (int32) alter_arg(fcinfo, 1, "block_size", PG_INT32_MAX, 0);
	c.window_size = alter_arg(fcinfo, 2, "window_size", PG_INT64_MAX, 0);
	c.max_value = PG_GETARG_INT64(3);
	c.min_open = (int32) alter_arg(fcinfo, 4, "min_open_windows",
								   DISTSEQ_MAX_OPEN_WINDOWS, 0);
	return change_peer(fcinfo, text_to_cstring(PG_GETARG_TEXT_PP(0)), &c,
					   PG_GETARG_BOOL(5));
}
