/*-------------------------------------------------------------------------
 *
 * remote.c
 *	  Connections to peers over libpq, and the foreign-data wrapper
 *	  "distseq" whose servers and user mappings say how to reach them.
 *
 * Used by the refill worker (the agent) and by administrators' backends
 * (distseq_add_peer, distseq_maintain); never by distseq_nextval.  Every
 * wait -- connecting, sending, reading -- is a WaitLatchOrSocket bounded by
 * distseq.remote_timeout, so cancel, SIGTERM and postmaster death end it.
 * Connections are kept per process and dropped after any error, since their
 * state is then unknown.
 *
 * Credentials come only from user mappings.  A connection made for a role
 * that is not a superuser must use a password (the rule dblink applies), so
 * the server's own OS identity is never lent out.  No message shows a
 * password or a connection string; errors name the foreign server.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"

#include "access/reloptions.h"
#include "access/xact.h"
#include "utils/resowner.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/builtins.h"
#include "mb/pg_wchar.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

typedef struct RemoteConn
{
	Oid			serverid;		/* hash key */
	PGconn	   *conn;
	char		warning[256];	/* a WARNING the peer sent, or "" */
	char		schema[NAMEDATALEN];	/* of distseq's peer functions there */
	char		name[NAMEDATALEN];	/* the foreign server's name */
} RemoteConn;

static HTAB *remote_conns = NULL;

/* libpq options a server may set, and those a user mapping may set */
static const char *const server_options[] = {
	"host", "hostaddr", "port", "dbname", "connect_timeout", "sslmode",
	"sslrootcert", "sslcert", "sslkey", "sslcrl", "sslcompression",
	"target_session_attrs", "keepalives", "keepalives_idle",
	"keepalives_interval", "keepalives_count", "tcp_user_timeout",
	"requirepeer", "gssencmode", "krbsrvname", NULL
};
static const char *const mapping_options[] = {
	"user", "password", "sslpassword", NULL
};

static bool
option_in(const char *name, const char *const *list)
{
	for (int i = 0; list[i]; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

PG_FUNCTION_INFO_V1(distseq_fdw_validator);

/*
 * Accept only the libpq options that make sense where they are given:
 * where to connect on the server, who to be in the user mapping.
 */
Datum
distseq_fdw_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);
		const char *const *valid;

		if (catalog == ForeignServerRelationId)
			valid = server_options;
		else if (catalog == UserMappingRelationId)
			valid = mapping_options;
		else
			valid = NULL;

		if (valid == NULL || !option_in(def->defname, valid))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\"", def->defname),
					 catalog == ForeignServerRelationId ?
					 errhint("Valid options for a distseq server are host, hostaddr, port, dbname, connect_timeout and the ssl, keepalive and GSS options of libpq.") :
					 catalog == UserMappingRelationId ?
					 errhint("Valid options for a distseq user mapping are user, password and sslpassword.") :
					 errhint("The distseq wrapper and its tables take no options.")));
		if (strcmp(def->defname, "port") == 0 ||
			strcmp(def->defname, "connect_timeout") == 0)
		{
			char	   *end;
			long		v = strtol(defGetString(def), &end, 10);

			if (*end != '\0' || v < 0 || v > 65535)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"%s\": \"%s\"",
								def->defname, defGetString(def))));
		}
	}
	PG_RETURN_VOID();
}

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
		strlcpy(rc->warning, message ? message : "warning", sizeof(rc->warning));
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
 * timeout; errors out when the process is told to stop.
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
		}
		if (rv & (WL_SOCKET_READABLE | WL_SOCKET_WRITEABLE))
			return true;
	}
}

static void
remote_connect(RemoteConn *rc, Oid userid)
{
	ForeignServer *server = GetForeignServer(rc->serverid);
	UserMapping *um = GetUserMapping(userid, rc->serverid);
	List	   *opts = list_concat(list_copy(server->options), um->options);
	const char **keys;
	const char **vals;
	int			n = 0;
	bool		has_password = false;
	TimestampTz deadline;
	ListCell   *lc;

	keys = palloc0(sizeof(char *) * (list_length(opts) + 3));
	vals = palloc0(sizeof(char *) * (list_length(opts) + 3));
	foreach(lc, opts)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		keys[n] = def->defname;
		vals[n] = defGetString(def);
		if (strcmp(def->defname, "password") == 0 && vals[n][0] != '\0')
			has_password = true;
		n++;
	}
	keys[n] = "fallback_application_name";
	vals[n++] = "distseq";
	keys[n] = "client_encoding";
	vals[n++] = GetDatabaseEncodingName();
	keys[n] = NULL;

	if (!superuser_arg(userid) && !has_password)
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to reach distseq peer \"%s\"", rc->name),
				 errdetail("Non-superusers must give a password in the user mapping.")));

	rc->conn = PQconnectStartParams(keys, vals, false);
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
		{
			char	   *msg = pchomp(PQerrorMessage(rc->conn));

			remote_drop(rc);
			ereport(ERROR,
					(errcode(ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION),
					 errmsg("could not connect to distseq peer \"%s\"", rc->name),
					 errdetail_internal("%s", msg)));
		}
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
	if (!superuser_arg(userid) && !PQconnectionUsedPassword(rc->conn))
	{
		remote_drop(rc);
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to reach distseq peer \"%s\"", rc->name),
				 errdetail("The peer did not ask for the password, so this server's own identity would be used.")));
	}
}

/*
 * Run one statement on a peer and return its result, which the caller
 * frees with PQclear.  Any failure drops the connection and raises an
 * error with the peer's SQLSTATE, naming the server and the command.
 */
PGresult *
distseq_remote_exec(RemoteConn *rc, const char *sql, int nparams,
					const char *const *params)
{
	TimestampTz deadline;
	PGresult   *res = NULL;
	PGresult   *next;

	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), distseq_remote_timeout);
	rc->warning[0] = '\0';
	if (!PQsendQueryParams(rc->conn, sql, nparams, NULL, params, NULL, NULL, 0))
	{
		char	   *msg = pchomp(PQerrorMessage(rc->conn));

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
				char	   *msg = pchomp(PQerrorMessage(rc->conn));

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
	{
		char	   *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
		char	   *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
		int			code = ERRCODE_CONNECTION_FAILURE;
		char	   *message = pstrdup(primary ? primary : pchomp(PQerrorMessage(rc->conn)));

		if (state && strlen(state) == 5)
			code = MAKE_SQLSTATE(state[0], state[1], state[2], state[3], state[4]);
		PQclear(res);
		ereport(ERROR,
				(errcode(code),
				 errmsg("distseq peer \"%s\": %s", rc->name, message),
				 errcontext("remote SQL command: %s", sql)));
	}
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
		PGcancel   *cancel = PQgetCancel(rc->conn);
		char		errbuf[256];

		if (cancel)
		{
			(void) PQcancel(cancel, errbuf, sizeof(errbuf));
			PQfreeCancel(cancel);
		}
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

static void
remote_lookup_schema(RemoteConn *rc)
{
	PGresult   *res;

	res = distseq_remote_exec(rc,
							  "SELECT pg_catalog.quote_ident(n.nspname)"
							  " FROM pg_catalog.pg_extension e"
							  " JOIN pg_catalog.pg_depend d ON d.refobjid = e.oid"
							  "  AND d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass"
							  "  AND d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass"
							  "  AND d.deptype = 'e'"
							  " JOIN pg_catalog.pg_proc p ON p.oid = d.objid"
							  " JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace"
							  " WHERE e.extname = 'distseq' AND p.proname = 'distseq_peer_state'",
							  0, NULL);
	if (PQntuples(res) != 1)
	{
		PQclear(res);
		remote_drop(rc);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("distseq is not installed on peer \"%s\"", rc->name),
				 errhint("Run CREATE EXTENSION distseq in the database the server names.")));
	}
	strlcpy(rc->schema, PQgetvalue(res, 0, 0), NAMEDATALEN);
	PQclear(res);
}

/*
 * The connection to a peer, made if needed, as the user mapping of "userid"
 * says.  The session there commits synchronously and names distseq's
 * schema for us.
 */
RemoteConn *
distseq_remote_get(Oid serverid, Oid userid)
{
	RemoteConn *rc;
	bool		found;

	if (remote_conns == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(RemoteConn);
		remote_conns = hash_create("distseq peer connections", 8, &ctl,
								   HASH_ELEM | HASH_BLOBS);
		on_proc_exit(remote_close_all, 0);
	}
	rc = hash_search(remote_conns, &serverid, HASH_ENTER, &found);
	if (!found)
		rc->conn = NULL;
	strlcpy(rc->name, GetForeignServer(serverid)->servername, NAMEDATALEN);
	if (rc->conn && PQstatus(rc->conn) != CONNECTION_OK)
		remote_drop(rc);
	if (rc->conn == NULL)
	{
		PGresult   *res;

		remote_connect(rc, userid);
		res = distseq_remote_exec(rc, "SET synchronous_commit = on", 0, NULL);
		PQclear(res);
		res = distseq_remote_exec(rc, "SET search_path = pg_catalog, pg_temp", 0, NULL);
		PQclear(res);
		remote_lookup_schema(rc);
	}
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
