/*-------------------------------------------------------------------------
 *
 * setval.c
 *	  distseq_setval(): move a live sequence forward, on this server and on
 *	  every member of its group, so that no server hands out a value at or
 *	  below a given one from then on; and distseq_peer_setval(), the part a
 *	  member runs for it.
 *
 * On each server the move is made in one transaction, like a drop followed
 * by a create that keeps the relation:
 *
 *	- AccessExclusiveLock on the backing relation, and the handshake of
 *	  inuse.c, wait for every transaction that uses the sequence; later ones
 *	  wait for our lock;
 *	- the catalog row gets a new generation: every pool and block of the old
 *	  one in shared memory is stale, its entries are freed (shmem.c) and the
 *	  worker can reserve nothing more for it (catalog.c checks the
 *	  generation); a refill in flight holds the row, and we wait for it;
 *	- every window below the floor is closed (next_hi raised to it), the
 *	  slots between the top of the windows and the floor are recorded as one
 *	  closed window, and the high-water mark is raised to the floor: windows
 *	  opened later, here or won by any majority of members that includes a
 *	  server that applied it, start above it;
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
 * (nothing is changed if one does not answer, or if the value is below
 * that), then has every member apply it, each in its own transaction
 * there, and applies it here last, holding nothing while it asks.  An
 * agent inserts a window it won only if the sequence here still has the
 * generation it read before its compare-and-sets (agent.c): a window won
 * before the floor was raised is never opened here after it.
 *
 * Locking: the backing relation's AccessExclusiveLock, the row of the
 * sequence (updated first, so that windows are closed after every
 * reservation that held it), then its windows.
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
	int32		stripes;
	int32		stripe;
	bool		has_servers;	/* draws from other servers */
	bool		reserved_any;
	int64		reserved_top;	/* the highest value reserved here */
} SetvalSeq;

static void
check_minor(void)
{
	if (distseq_catalog_minor() < 7)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("distseq_setval() needs version 1.7 of extension \"distseq\""),
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
								  "  AND w.next_hi > w.window_start), generation"
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
setval_below(const char *name, int64 value, int64 top, const char *where)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("distseq_setval: value " INT64_FORMAT " is below what distseq sequence \"%s\" may have handed out",
					value, name),
			 errdetail("%s has reserved values up to " INT64_FORMAT ", and any of them may have been handed out.",
					   where, top),
			 errhint("distseq_setval() only moves a sequence forward: set a value of at least " INT64_FORMAT ".",
					 top)));
}

/*
 * Apply the floor "value" on this server, in the caller's transaction; SPI
 * connected.  False if there is no such sequence here.
 */
static bool
setval_apply(const char *schema, const char *name, int64 value)
{
	SetvalSeq	s;
	Oid			types[4] = {TEXTOID, INT8OID, INT8OID, INT8OID};
	Datum		values[4];
	int64		floor;
	int64		first;
	int64		last;
	int64		top;
	int64		skipped;
	uint64		gen;

	if (!setval_read(schema, name, false, &s))
		return false;

	/*
	 * Wait for the transactions that use the sequence, before we hold its
	 * row: one of them may be waiting for a refill that needs the row.
	 */
	LockRelationOid(s.relid, AccessExclusiveLock);
	distseq_inuse_wait(s.relid);
	if (!setval_read(schema, name, true, &s))
		return false;

	/*
	 * What was reserved since the caller checked it is not refused: once
	 * members applied the floor, agents win windows above it, and values
	 * reserved there stay valid.
	 */

	distseq_seq_forget(s.relid);

	floor = setval_floor_slot(&s, value);
	distseq_slots(s.start_value, s.max_value, s.stripes, s.stripe, &first, &last);
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

	/* a random generation, never 0, never the one it had */
	do
	{
		if (!pg_strong_random(&gen, sizeof(gen)))
			elog(ERROR, "could not generate a random number");
		gen &= PG_INT64_MAX;
	} while (gen == 0 || gen == s.gen);
	values[1] = Int64GetDatum(floor);
	values[2] = Int64GetDatum(skipped);
	values[3] = Int64GetDatum((int64) gen);
	distseq_spi_exec(psprintf("UPDATE %s.distseq_sequences s"
							  " SET generation = $4, hwm = GREATEST(s.hwm, $2),"
							  " values_reserved = s.values_reserved + $3,"
							  " values_lost = s.values_lost + $3"
							  " WHERE s.sequence_name = $1",
							  schema),
					 4, types, values, SPI_OK_UPDATE);

	CacheInvalidateRelcacheByRelid(s.relid);
	distseq_local_reset(s.relid);
	return true;
}

/* A member, asked or told about a setval */
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
setval_ask(SetvalMember *m, const char *name, int64 value, bool apply)
{
	DistseqRemoteResult *res;
	const char *params[3];

	if (m->peer == NULL)
		return false;
	params[0] = name;
	params[1] = psprintf(INT64_FORMAT, value);
	params[2] = apply ? "true" : "false";
	res = distseq_peer_exec(m->peer,
							"SELECT %s.distseq_peer_setval($1::pg_catalog.text,"
							" $2::pg_catalog.int8, $3::pg_catalog.bool)",
							3, params, "l?", 1, &m->error);
	m->answered = res != NULL;
	if (res == NULL)
	{
		m->error = distseq_clean_text(m->error, SETVAL_MEMBER_ERROR_SIZE);
		return false;
	}
	m->has_top = !distseq_remote_isnull(res, 0, 0);
	if (m->has_top)
		m->top = distseq_remote_int8(res, 0, 0);
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
 * Every member other than this node applies the floor, after each has said
 * how far it reserved; SPI connected.
 */
static void
setval_members(const char *schema, const char *name, int64 value)
{
	DistseqNodeState st;
	SetvalMember *ms;
	int			n = 0;
	bool		failed;
	char	   *why;
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
		ms[n].peer = distseq_peer_of(schema, st.members[i]);
		n++;
	}

	/* first ask: nothing changes anywhere unless every member answers */
	for (int i = 0; i < n; i++)
		(void) setval_ask(&ms[i], name, value, false);
	why = setval_failures(ms, n, &failed);
	if (failed)
		ereport(ERROR,
				(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
				 errmsg("could not set distseq sequence \"%s\": not every member answered", name),
				 errdetail_internal("Not reached: %s. Nothing was changed.", why),
				 errhint("Call distseq_setval() again once every member answers; distseq_peers shows them.")));
	for (int i = 0; i < n; i++)
	{
		if (ms[i].has_top && value < ms[i].top)
			setval_below(name, value, ms[i].top,
						 psprintf("Member \"%s\"", ms[i].peer->name));
	}

	for (int i = 0; i < n; i++)
		(void) setval_ask(&ms[i], name, value, true);
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
				 errmsg("could not set distseq sequence \"%s\" on every member", name),
				 errdetail_internal("Not reached: %s. Applied on: %s; not on this server nor on those not reached, which may still hand out values up to " INT64_FORMAT ".",
									why, first ? "none" : applied.data, value),
				 errhint("Call distseq_setval() again once every member answers.")));
	}
}

PG_FUNCTION_INFO_V1(distseq_setval);

/*
 * distseq_setval(sequence_name, value): from now on no server hands out a
 * value of the sequence at or below "value".  Returns "value", as setval().
 */
Datum
distseq_setval(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		value = PG_GETARG_INT64(1);
	int			search_path_level;
	const char *schema;
	SetvalSeq	s;
	Oid			save_userid;
	int			save_sec_context;

	distseq_check_loaded();
	distseq_check_writable("distseq_setval()");
	distseq_check_name(name);
	check_minor();
	PreventInTransactionBlock(true, "distseq_setval()");
	search_path_level = distseq_pin_search_path();
	schema = distseq_catalog_schema();

	/*
	 * The catalog is not readable by PUBLIC: read and change it as the
	 * bootstrap superuser, as catalog.c does, once the caller's right is
	 * checked.  An error restores the caller's identity.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	distseq_spi_connect();
	if (!setval_read(schema, name, false, &s))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("distseq sequence \"%s\" does not exist", name)));
	/* as setval() on the backing sequence */
	if (pg_class_aclcheck(s.relid, save_userid, ACL_UPDATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for distseq sequence \"%s\"", name),
				 errhint("The owner can grant it with GRANT UPDATE ON SEQUENCE distseq.%s.",
						 quote_identifier(name))));
	if (s.has_servers)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("distseq sequence \"%s\" draws from other servers", name),
				 errhint("Call distseq_setval() on the servers it draws from.")));
	if (value < s.start_value || value > s.max_value)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("distseq_setval: value " INT64_FORMAT " is out of bounds for distseq sequence \"%s\" (" INT64_FORMAT ".." INT64_FORMAT ")",
						value, name, s.start_value, s.max_value)));
	if (s.reserved_any && value < s.reserved_top)
		setval_below(name, value, s.reserved_top, "This server");

	/* striped sequences are this server's alone */
	if (s.stripes == 1 && distseq_has_peers(schema))
		setval_members(schema, name, value);
	if (!setval_apply(schema, name, value))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("distseq sequence \"%s\" does not exist", name)));
	SPI_finish();
	SetUserIdAndSecContext(save_userid, save_sec_context);
	distseq_unpin_search_path(search_path_level);
	PG_RETURN_INT64(value);
}

PG_FUNCTION_INFO_V1(distseq_peer_setval);

/*
 * A member's part of distseq_setval(): how far this server reserved the
 * sequence (NULL if nothing, or if it has no such sequence), and with
 * "apply", the floor applied here first.
 */
Datum
distseq_peer_setval(PG_FUNCTION_ARGS)
{
	char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		value = PG_GETARG_INT64(1);
	bool		apply = PG_GETARG_BOOL(2);
	const char *schema;
	SetvalSeq	s;
	bool		found;

	distseq_check_loaded();
	distseq_check_writable("distseq_peer_setval()");
	distseq_check_name(name);
	distseq_spi_connect();
	schema = distseq_catalog_schema();

	/*
	 * A member that does not have the sequence yet keeps the floor as its
	 * seed, the mark it starts from once an agent introduces the sequence
	 * here: the agent may have read the marks before the floor was raised.
	 * Peers are not striped: the slot above the value is value + 1 (the
	 * caller checked the value against max_value, which is below the end).
	 */
	if (apply && !setval_apply(schema, name, value))
	{
		Oid			types[2] = {TEXTOID, INT8OID};
		Datum		values[2] = {PG_GETARG_DATUM(0), Int64GetDatum(value < PG_INT64_MAX ? value + 1 : value)};

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
