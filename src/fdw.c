/*-------------------------------------------------------------------------
 *
 * fdw.c
 *	  The foreign-data wrapper "distseq", whose servers and user mappings
 *	  say how to reach the peers (remote.c connects with them): which libpq
 *	  options each takes.
 *
 * A server says where to connect, a user mapping who to be; nothing else
 * is accepted, so that no option of libpq that would read a file or run a
 * command on this server can be set by whoever may create a server or a
 * mapping.  No state, no lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include <ctype.h>

#include "access/reloptions.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"

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

/*
 * A number from 0 to 65535 -- or, for a port, a comma-separated list of
 * them, one per host as libpq takes it for a server of several hosts (an
 * empty item is the default port).  libpq matches the list to the hosts
 * when it connects.
 */
static void
validate_numbers(DefElem *def, bool list)
{
	const char *value = defGetString(def);
	const char *p = value;

	for (;;)
	{
		/* an item: digits, or nothing in a list */
		if (!list || (*p != ',' && *p != '\0'))
		{
			long		v = 0;

			if (!isdigit((unsigned char) *p))
				break;
			while (isdigit((unsigned char) *p) && v <= 65535)
				v = v * 10 + (*p++ - '0');
			if (v > 65535)
				break;
		}
		if (*p == '\0')
			return;
		if (!list || *p != ',')
			break;
		p++;
	}
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
			 errmsg("invalid value for option \"%s\": \"%s\"",
					def->defname, value),
			 list ?
			 errhint("A port is a number from 0 to 65535, or a comma-separated list of them, one for each host.") :
			 errhint("It is a number of seconds, from 0 to 65535.")));
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
			validate_numbers(def, strcmp(def->defname, "port") == 0);
	}
	PG_RETURN_VOID();
}
