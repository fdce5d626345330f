/*-------------------------------------------------------------------------
 *
 * remote.c
 *	  Connections to peers over libpq, made with the servers and user
 *	  mappings of the foreign-data wrapper "distseq" (fdw.c): a cache per
 *	  process, bounded connect and commands, peers that rest.
 *
 * Used by the refill worker (the agent, remote refills) and by
 * administrators' backends (distseq_add_peer, distseq_peers); never by
 * distseq_nextval.  No libpq call here blocks: connections are made with
 * PQconnectStartParams/PQconnectPoll and used in non-blocking mode, and
 * every wait -- connecting, sending, reading -- is a WaitLatchOrSocket
 * bounded by distseq.remote_timeout, so cancel, SIGTERM and postmaster
 * death end it.  Only the host name lookup inside PQconnectStartParams is
 * the system resolver's (a hostaddr needs none).
 *
 * A command that times out is not cancelled: the connection is closed
 * (PQfinish, which in non-blocking mode never waits to send its Terminate
 * message).  A cancel request is a second connection to a peer that did
 * not answer the first, and PQcancel blocks until the peer closes it
 * (libpq 17's PQcancelPoll could be bounded, but not older ones).  Instead
 * the peer's session runs with statement_timeout = distseq.remote_timeout,
 * so its backend ends a command we gave up on by itself, as a cancel would,
 * and notices the closed connection at its next read.  A command that
 * timed out may still have committed there, as it could when a cancel came
 * too late: callers take the effect of a failed command as unknown (a
 * raised mark or a reservation loses values at worst).
 *
 * While the refill worker waits on a peer outside any transaction (a
 * remote refill), it serves the other refills of its database between
 * wake-ups (distseq_between_steps): one slow peer costs only the
 * sequence that waits on it.  Peers that did not answer rest for a while
 * (rest.c) so that a hung one costs a timeout only now and then.
 *
 * Connections are kept per process, one per user mapping and local role
 * (the PUBLIC mapping serves many roles, and whether a role must use a
 * password depends on the role), and dropped after a failure that leaves
 * their state unknown.  A change of the foreign server, of the user mapping
 * or of the role marks the connection (syscache invalidation callbacks, as
 * postgres_fdw's), and the next call to any peer closes it, as it closes
 * one that an error or a cancel left in the middle of a command: a refill
 * never runs on another role's connection, nor on credentials that were
 * changed, and a dropped mapping's connection does not stay open.
 *
 * Credentials come only from user mappings.  A connection made for a role
 * that is not a superuser must use a password (the rule dblink applies), so
 * the server's own OS identity is never lent out.  No message shows a
 * password; errors name the foreign server, and a failed connection shows
 * libpq's message, which may name the host, port and user.
 *
 * Every answer is checked before use: its status, its number of rows and
 * columns, NULLs, and each value parsed strictly (distseq_remote_query, by
 * answer.c); a bad answer is an error naming the peer, and no value of it
 * is used.  A PGresult never outlives the function that received it, on
 * any path.
 *
 * The remote session's search_path is pg_catalog, pg_temp, and the SQL sent
 * names the schema of every function and operator and the type of every
 * parameter: an overload that a role there created in distseq's schema
 * (untyped parameters would prefer one taking text) or an operator in
 * another schema never resolves in place of distseq's or PostgreSQL's.
 *
 * Over 700 lines, and one job: the life of a connection (plan, connect,
 * run, report, check, close), every step of which reads and changes the
 * same RemoteConn; split, each part would need the others' internals.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"


#include "access/xact.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

typedef struct RemoteConnKey
{
	Oid			umid;			/* the user mapping */
	Oid			userid;			/* the local role it is used for */
} RemoteConnKey;

struct RemoteConn
{
	RemoteConnKey key;			/* hash key */
	PGconn	   *conn;
	bool		busy;			/* waiting on a command or a connect */
	bool		invalidated;	/* server, mapping or role changed */
	bool		superuser;		/* the local role, when looked up */
	int			timeout;		/* statement_timeout set there, ms */
	const char **keys;			/* libpq options until connected */
	const char **vals;
	bool		public_mapping; /* made with the PUBLIC mapping */
	uint32		server_hash;	/* syscache hash values of the above */
	uint32		mapping_hash;
	uint32		role_hash;
	char		warning[256];	/* a WARNING the peer sent, or "" */
	char		schema[NAMEDATALEN * 2 + 3];	/* distseq's schema there, quoted */
	char		name[NAMEDATALEN];	/* the foreign server's name */
};

static HTAB *remote_conns = NULL;

pg_noreturn static void remote_connect_failed(RemoteConn *rc);

pg_noreturn static void remote_report(RemoteConn *rc, PGresult *res,
									  const char *sql);

static void
remote_close_all(int code, Datum arg)
{
	HASH_SEQ_STATUS status;
	RemoteConn *rc;

	if (remote_conns == NULL)
		return;
	hash_seq_init(&status, remote_conns);
	while ((rc = hash_seq_search(&status)) != NULL)
	{
		if (rc->conn)
			PQfinish(rc->conn);
		rc->conn = NULL;
	}
}

/*
 * A foreign server, user mapping or role changed: mark the connections made
 * with it, to be closed before their next use (not now: one may be in the
 * middle of a command).  A connection made with the PUBLIC mapping goes on
 * any change of a mapping, since a new mapping of its role may now apply.
 */
static void
remote_inval(Datum arg, int cacheid, uint32 hashvalue)
{
	HASH_SEQ_STATUS status;
	RemoteConn *rc;

	/* a changed server or mapping deserves a fresh try */
	if (cacheid != AUTHOID)
		distseq_remote_wake_all();
	hash_seq_init(&status, remote_conns);
	while ((rc = hash_seq_search(&status)) != NULL)
	{
		if (rc->conn == NULL)
			continue;
		if (hashvalue == 0 ||
			(cacheid == FOREIGNSERVEROID && rc->server_hash == hashvalue) ||
			(cacheid == USERMAPPINGOID &&
			 (rc->mapping_hash == hashvalue || rc->public_mapping)) ||
			(cacheid == AUTHOID && rc->role_hash == hashvalue))
			rc->invalidated = true;
	}
}

/*
 * Text from a peer or from libpq (which passes on what the peer said when
 * it refused the connection) for a message of ours: cleaned and bounded
 * (distseq_clean_text), so that a hostile peer's control characters, bytes
 * that are no text in our encoding or megabytes of text reach neither a
 * client, nor a view, nor the log.  Palloc'd.
 */
#define REMOTE_TEXT_SIZE	1024

static char *
remote_clean(const char *text)
{
	char	   *chomped = pchomp(text);
	char	   *clean = distseq_clean_text(chomped, REMOTE_TEXT_SIZE);

	pfree(chomped);
	return clean;
}

/*
 * A WARNING from a peer makes the command fail: the one that matters is a
 * synchronous-replication wait cancelled there, which commits without the
 * standby's acknowledgement.  A value of such a commit must not count.
 */
static void
remote_notice(void *arg, const PGresult *res)
{
	RemoteConn *rc = arg;
	const char *severity = PQresultErrorField(res, PG_DIAG_SEVERITY_NONLOCALIZED);
	const char *message = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

	if (severity && strcmp(severity, "WARNING") == 0 && rc->warning[0] == '\0')
	{
		/* cleaned and cut: the message ends up in errors, views and the log */
		char	   *clean;

		if (message == NULL)
			message = "warning";
		clean = distseq_clean_text(message, sizeof(rc->warning));
		strlcpy(rc->warning, clean, sizeof(rc->warning));
		pfree(clean);
	}
}

/* Forget a connection whose state is unknown */
static void
remote_drop(RemoteConn *rc)
{
	if (rc->conn)
		PQfinish(rc->conn);
	rc->conn = NULL;
}

/*
 * Wait until the socket is ready or the deadline passes.  Returns false on
 * timeout; errors out when the process is told to stop.  Outside a
 * transaction, the refill worker serves the refills asked for meanwhile.
 */
static bool
remote_wait(RemoteConn *rc, int events, TimestampTz deadline)
{
	for (;;)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
														   deadline);
		int			rv;

		if (left <= 0)
			return false;
		rv = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH | events,
							   PQsocket(rc->conn), left, PG_WAIT_EXTENSION);
		if (rv & WL_LATCH_SET)
		{
			ResetLatch(MyLatch);
			if (distseq_worker_stopping())
			{
				remote_drop(rc);
				ereport(ERROR,
						(errcode(ERRCODE_ADMIN_SHUTDOWN),
						 errmsg("distseq worker stopping: talk to peer \"%s\" abandoned",
								rc->name)));
			}
			CHECK_FOR_INTERRUPTS();
			if (!IsTransactionState())
			{
				/* nothing served may use this connection meanwhile */
				rc->busy = true;
				PG_TRY();
				{
					distseq_between_steps();
				}
				PG_FINALLY();
				{
					rc->busy = false;
				}
				PG_END_TRY();
			}
		}
		if (rv & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
			return true;
	}
}

/*
 * The libpq options of a connection, kept from the catalog look-up to the
 * connect, which needs no catalog (and may run outside a transaction).
 */
static void
remote_plan(RemoteConn *rc, ForeignServer *server, UserMapping *um, Oid userid)
{
	static MemoryContext cxt = NULL;
	List	   *opts = list_concat(list_copy(server->options), um->options);
	HASH_SEQ_STATUS status;
	RemoteConn *other;
	MemoryContext oldcxt;
	int			n = 0;
	bool		has_password = false;
	ListCell   *lc;

	rc->superuser = superuser_arg(userid);
	if (cxt == NULL)
		cxt = AllocSetContextCreate(TopMemoryContext, "distseq peer options",
									ALLOCSET_SMALL_SIZES);
	/* one plan at a time in this process: forget any older one */
	hash_seq_init(&status, remote_conns);
	while ((other = hash_seq_search(&status)) != NULL)
		other->keys = other->vals = NULL;
	MemoryContextReset(cxt);
	oldcxt = MemoryContextSwitchTo(cxt);
	rc->keys = palloc0(sizeof(char *) * (list_length(opts) + 3));
	rc->vals = palloc0(sizeof(char *) * (list_length(opts) + 3));
	foreach(lc, opts)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		rc->keys[n] = pstrdup(def->defname);
		rc->vals[n] = pstrdup(defGetString(def));
		if (strcmp(def->defname, "password") == 0 && rc->vals[n][0] != '\0')
			has_password = true;
		n++;
	}
	rc->keys[n] = "fallback_application_name";
	rc->vals[n++] = "distseq";
	rc->keys[n] = "client_encoding";
	rc->vals[n++] = GetDatabaseEncodingName();
	rc->keys[n] = NULL;
	MemoryContextSwitchTo(oldcxt);

	if (!rc->superuser && !has_password)
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to reach distseq peer \"%s\"", rc->name),
				 errdetail("Non-superusers must give a password in the user mapping.")));
}

/*
 * A connection that failed, with libpq's message: host, port and user,
 * never the password
 */
static void
remote_connect_failed(RemoteConn *rc)
{
	char	   *msg = remote_clean(PQerrorMessage(rc->conn));

	remote_drop(rc);
	ereport(ERROR,
			(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
			 errmsg("could not connect to distseq peer \"%s\"", rc->name),
			 errdetail_internal("%s", msg)));
}

static void
remote_connect(RemoteConn *rc)
{
	TimestampTz deadline;

	if (rc->keys == NULL)
		elog(ERROR, "distseq: no connection plan for peer \"%s\"", rc->name);
	rc->conn = PQconnectStartParams(rc->keys, rc->vals, false);
	rc->keys = rc->vals = NULL;
	if (rc->conn == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory connecting to distseq peer \"%s\"", rc->name)));

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), distseq_remote_timeout);
	for (;;)
	{
		PostgresPollingStatusType st = PQconnectPoll(rc->conn);
		int			events;

		if (st == PGRES_POLLING_OK)
			break;
		if (st == PGRES_POLLING_FAILED)
			remote_connect_failed(rc);
		events = (st == PGRES_POLLING_READING) ? WL_SOCKET_READABLE : WL_SOCKET_WRITEABLE;
		if (!remote_wait(rc, events, deadline))
		{
			remote_drop(rc);
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to distseq peer \"%s\": timed out after %d ms",
							rc->name, distseq_remote_timeout)));
		}
	}

	PQsetNoticeReceiver(rc->conn, remote_notice, rc);
	if (!rc->superuser && !PQconnectionUsedPassword(rc->conn))
	{
		remote_drop(rc);
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to reach distseq peer \"%s\"", rc->name),
				 errdetail("The peer did not ask for the password, so this server's own identity would be used.")));
	}
	/* sending, and closing with its Terminate message, never waits then */
	if (PQsetnonblocking(rc->conn, 1) != 0)
		remote_connect_failed(rc);
}

/*
 * Raise the error of a failed command, with the peer's SQLSTATE, detail,
 * hint and context (as postgres_fdw's pgfdw_report_error does), and free
 * the result.
 */
static void
remote_report(RemoteConn *rc, PGresult *res, const char *sql)
{
	PG_TRY();
	{
		char	   *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
		char	   *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
		char	   *detail = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL) : NULL;
		char	   *hint = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_HINT) : NULL;
		char	   *context = res ? PQresultErrorField(res, PG_DIAG_CONTEXT) : NULL;
		int			code = ERRCODE_CONNECTION_FAILURE;

		/* an error's SQLSTATE, not one of success, warning or no data */
		if (state && strlen(state) == 5 &&
			strspn(state, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ") == 5 &&
			strncmp(state, "00", 2) != 0 && strncmp(state, "01", 2) != 0 &&
			strncmp(state, "02", 2) != 0)
			code = MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]);
		primary = remote_clean(primary ? primary : PQerrorMessage(rc->conn));
		if (detail)
			detail = remote_clean(detail);
		if (hint)
			hint = remote_clean(hint);
		if (context)
			context = remote_clean(context);
		ereport(ERROR,
				(errcode(code),
				 errmsg("distseq peer \"%s\": %s", rc->name, primary),
				 detail ? errdetail_internal("%s", detail) : 0,
				 hint ? errhint("%s", hint) : 0,
				 context ? errcontext("%s", context) : 0,
				 errcontext("remote SQL command: %s", sql)));
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
	pg_unreachable();
}

/*
 * Run one statement on a peer and return its result, of status
 * PGRES_TUPLES_OK or PGRES_COMMAND_OK, which the caller frees with PQclear
 * on every path.  Any failure raises an error with the peer's SQLSTATE,
 * naming the server and the command; a failure that leaves the connection
 * in an unknown state drops it.
 */
static PGresult *
remote_run(RemoteConn *rc, const char *sql, int nparams, const char *const *params)
{
	TimestampTz deadline;
	PGresult   *res = NULL;
	PGresult   *next;

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), distseq_remote_timeout);
	rc->warning[0] = '\0';
	if (!PQsendQueryParams(rc->conn, sql, nparams, NULL, params, NULL, NULL, 0))
	{
		char	   *msg = remote_clean(PQerrorMessage(rc->conn));

		remote_drop(rc);
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not send a command to distseq peer \"%s\"", rc->name),
				 errdetail_internal("%s", msg)));
	}
	while (PQflush(rc->conn) > 0)
	{
		if (!remote_wait(rc, WL_SOCKET_WRITEABLE, deadline))
			goto timeout;
	}
	for (;;)
	{
		while (PQisBusy(rc->conn))
		{
			if (!remote_wait(rc, WL_SOCKET_READABLE, deadline))
				goto timeout;
			if (!PQconsumeInput(rc->conn))
			{
				char	   *msg = remote_clean(PQerrorMessage(rc->conn));

				PQclear(res);
				remote_drop(rc);
				ereport(ERROR,
						(errcode(ERRCODE_CONNECTION_FAILURE),
						 errmsg("lost the connection to distseq peer \"%s\"", rc->name),
						 errdetail_internal("%s", msg)));
			}
		}
		next = PQgetResult(rc->conn);
		if (next == NULL)
			break;
		PQclear(res);
		res = next;
	}

	if (res == NULL ||
		(PQresultStatus(res) != PGRES_TUPLES_OK &&
		 PQresultStatus(res) != PGRES_COMMAND_OK))
		remote_report(rc, res, sql);
	if (rc->warning[0] != '\0')
	{
		char	   *warning = pstrdup(rc->warning);

		PQclear(res);
		ereport(ERROR,
				(errcode(ERRCODE_WARNING),
				 errmsg("distseq peer \"%s\" warned: %s", rc->name, warning),
				 errdetail("The command's effect is not counted on."),
				 errcontext("remote SQL command: %s", sql)));
	}
	return res;

timeout:
	{
		/* no cancel: the peer's statement_timeout ends it there */
		PQclear(res);
		remote_drop(rc);
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg("distseq peer \"%s\" did not answer within %d ms",
						rc->name, distseq_remote_timeout),
				 errcontext("remote SQL command: %s", sql)));
	}
	return NULL;				/* keep compiler quiet */
}

/*
 * Run a query on a peer and return its answer, checked against "columns"
 * (see RemoteValue) and, unless nrows is -1, its number of rows: any other
 * answer is an error naming the peer.  The answer is in the caller's
 * memory; the PGresult is freed on every path.
 */
DistseqRemoteResult *
distseq_remote_query(RemoteConn *rc, const char *sql, int nparams,
					 const char *const *params, const char *columns, int nrows)
{
	PGresult   *res = remote_run(rc, sql, nparams, params);
	DistseqRemoteResult *volatile r = NULL;

	PG_TRY();
	{
		r = distseq_remote_parse(rc->name, res, sql, columns, nrows);
	}
	PG_FINALLY();
	{
		PQclear(res);
	}
	PG_END_TRY();
	return r;
}

/* Run a statement on a peer whose answer does not matter */
void
distseq_remote_command(RemoteConn *rc, const char *sql, int nparams,
					   const char *const *params)
{
	PQclear(remote_run(rc, sql, nparams, params));
}

/* Where the functions peers call live on the peer (the one of its extension) */
static void
remote_lookup_schema(RemoteConn *rc)
{
	DistseqRemoteResult *res;

	res = distseq_remote_query(rc,
							   "SELECT (SELECT n.nspname"
							   " FROM pg_catalog.pg_extension e"
							   " JOIN pg_catalog.pg_depend d"
							   " ON d.refobjid OPERATOR(pg_catalog.=) e.oid"
							   " AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass"
							   " AND d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass"
							   " AND d.deptype OPERATOR(pg_catalog.=) 'e'"
							   " JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.objid"
							   " JOIN pg_catalog.pg_namespace n"
							   " ON n.oid OPERATOR(pg_catalog.=) p.pronamespace"
							   " WHERE e.extname OPERATOR(pg_catalog.=) 'distseq'"
							   " AND p.proname OPERATOR(pg_catalog.=) 'distseq_peer_state')",
							   0, NULL, "t?", 1);
	if (distseq_remote_isnull(res, 0, 0))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("distseq is not installed on peer \"%s\"", rc->name),
				 errhint("Run CREATE EXTENSION distseq in the database the server names.")));
	strlcpy(rc->schema, quote_identifier(distseq_remote_text(res, 0, 0)),
			sizeof(rc->schema));
}

/*
 * May a kept connection serve the next command?  Not if its server, mapping
 * or role changed, nor if an error or a cancel left it in the middle of a
 * command or in a transaction, nor if the peer closed its end meanwhile: a
 * peer that restarted, or ended the idle session (idle_session_timeout, a
 * pooler), sent its FATAL message and closed.  What it sent is read first,
 * without waiting (the socket is non-blocking), so that libpq sees the end:
 * a command sent there would fail as if the peer did not answer, and the
 * peer, which answers on a new connection, would rest.
 */
static bool
remote_usable(RemoteConn *rc)
{
	if (rc->invalidated || PQstatus(rc->conn) != CONNECTION_OK ||
		PQtransactionStatus(rc->conn) != PQTRANS_IDLE)
		return false;

	/*
	 * Twice: the FATAL message (in no command, parsed by PQisBusy() into
	 * the notice processor) may come in one read and the close in the next.
	 */
	for (int i = 0; i < 2; i++)
	{
		if (!PQconsumeInput(rc->conn))
			return false;
		(void) PQisBusy(rc->conn);
	}
	return PQstatus(rc->conn) == CONNECTION_OK;
}

/*
 * Close the connections that may not serve again, whoever's they are (a
 * dropped mapping's is never asked for again, and would stay open on the
 * peer until this process exits).  Between commands, so none is in use but
 * the one call in flight; entries stay (a caller of distseq_remote_lookup()
 * may hold one until it opens it).
 */
static void
remote_close_unusable(void)
{
	HASH_SEQ_STATUS status;
	RemoteConn *rc;

	hash_seq_init(&status, remote_conns);
	while ((rc = hash_seq_search(&status)) != NULL)
	{
		/* the one call in flight, while the worker serves other refills */
		if (rc->busy)
			continue;
		if (rc->conn && !remote_usable(rc))
			remote_drop(rc);
	}
}

/*
 * The connection to a peer for "userid", as its user mapping says, looked
 * up in the catalog (in a transaction): one that is still good, or one to
 * make with distseq_remote_open(), which needs no transaction.
 */
RemoteConn *
distseq_remote_lookup(Oid serverid, Oid userid)
{
	ForeignServer *server;
	UserMapping *um;
	bool		public_mapping;
	RemoteConnKey key;
	RemoteConn *rc;
	bool		found;

	if (remote_conns == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(RemoteConnKey);
		ctl.entrysize = sizeof(RemoteConn);
		remote_conns = hash_create("distseq peer connections", 8, &ctl,
								   HASH_ELEM | HASH_BLOBS);
		on_proc_exit(remote_close_all, 0);
		CacheRegisterSyscacheCallback(FOREIGNSERVEROID, remote_inval, (Datum) 0);
		CacheRegisterSyscacheCallback(USERMAPPINGOID, remote_inval, (Datum) 0);
		CacheRegisterSyscacheCallback(AUTHOID, remote_inval, (Datum) 0);
	}

	remote_close_unusable();

	/* catalog lookups first: they may run remote_inval */
	server = GetForeignServer(serverid);
	um = GetUserMapping(userid, serverid);
	public_mapping = !SearchSysCacheExists2(USERMAPPINGUSERSERVER,
											ObjectIdGetDatum(userid),
											ObjectIdGetDatum(serverid));

	memset(&key, 0, sizeof(key));
	key.umid = um->umid;
	key.userid = userid;
	rc = hash_search(remote_conns, &key, HASH_ENTER, &found);
	if (!found)
		memset((char *) rc + sizeof(key), 0, sizeof(RemoteConn) - sizeof(key));
	if (rc->busy)
		elog(ERROR, "distseq: the connection to peer \"%s\" is in use", rc->name);
	strlcpy(rc->name, server->servername, NAMEDATALEN);

	/*
	 * A command still in progress was left by an error or a cancel while
	 * waiting for it; a changed distseq.remote_timeout is set at connect.
	 */
	if (rc->conn &&
		(!remote_usable(rc) || rc->timeout != distseq_remote_timeout))
		remote_drop(rc);
	if (rc->conn == NULL)
	{
		rc->invalidated = false;
		rc->public_mapping = public_mapping;
		rc->server_hash = GetSysCacheHashValue1(FOREIGNSERVEROID,
												ObjectIdGetDatum(serverid));
		rc->mapping_hash = GetSysCacheHashValue1(USERMAPPINGOID,
												 ObjectIdGetDatum(um->umid));
		rc->role_hash = GetSysCacheHashValue1(AUTHOID, ObjectIdGetDatum(userid));
		remote_plan(rc, server, um, userid);
	}
	return rc;
}

/*
 * Connect a connection distseq_remote_lookup() returned, if it is not
 * connected yet.  The session there commits synchronously, resolves names
 * in pg_catalog only, ends any command after distseq.remote_timeout, and
 * names distseq's schema for us.
 */
void
distseq_remote_open(RemoteConn *rc)
{
	char		timeout[32];
	const char *params[1] = {timeout};

	if (rc->conn)
		return;
	remote_connect(rc);
	/* a connection is used only once it is set up */
	PG_TRY();
	{
		snprintf(timeout, sizeof(timeout), "%d", distseq_remote_timeout);
		distseq_remote_command(rc, "SET synchronous_commit = on", 0, NULL);
		/* a WARNING fails the command (remote_notice): have every one sent */
		distseq_remote_command(rc, "SET client_min_messages = warning", 0, NULL);
		distseq_remote_command(rc, "SET search_path = pg_catalog, pg_temp", 0, NULL);
		distseq_remote_command(rc, "SELECT pg_catalog.set_config('statement_timeout',"
							   " $1::pg_catalog.text, false)", 1, params);
		rc->timeout = distseq_remote_timeout;
		remote_lookup_schema(rc);
	}
	PG_CATCH();
	{
		remote_drop(rc);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* The connection to a peer, made if needed (in a transaction) */
RemoteConn *
distseq_remote_get(Oid serverid, Oid userid)
{
	RemoteConn *rc = distseq_remote_lookup(serverid, userid);

	distseq_remote_open(rc);
	return rc;
}

/*
 * The schema of the functions peers call there, quoted: distseq from 1.5
 * on, which no role but the installing superuser can rename or create in.
 * Before, the installation schema, which its owner may rename and fill with
 * look-alikes: looked up again for each command, never kept.
 */
const char *
distseq_remote_schema(RemoteConn *rc)
{
	if (strcmp(rc->schema, "distseq") != 0)
		remote_lookup_schema(rc);
	return rc->schema;
}

/* Close every peer connection of this process */
void
distseq_remote_close_all(void)
{
	remote_close_all(0, (Datum) 0);
}

/*
 * Does an error of a peer command say the peer did not answer (no
 * connection, a lost one, a timeout here or there, a shutdown), rather
 * than answering with a refusal or a bad answer (08P01)?
 */
bool
distseq_remote_unanswered(int sqlerrcode)
{
	if (sqlerrcode == ERRCODE_PROTOCOL_VIOLATION)
		return false;
	return ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_CONNECTION_EXCEPTION ||
		ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_OPERATOR_INTERVENTION;
}

/*
 * Run fn(arg) in a subtransaction; on error, roll it back and return false
 * with the message in *error.  For talking to peers some of which may be
 * down.
 */
bool
distseq_remote_try(void (*fn) (void *), void *arg, char **error)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		if (error)
			*error = edata->message;
		ok = false;
	}
	PG_END_TRY();
	return ok;
}
