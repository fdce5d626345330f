/*-------------------------------------------------------------------------
 *
 * rest.c
 *	  Peers that rest: a peer that did not answer is not asked again for a
 *	  while, so that one that is down or hung costs distseq.remote_timeout
 *	  only now and then (remote.c, the agent and remote refills ask here
 *	  first, and say why it rests).
 *
 * Per process, in TopMemoryContext; no lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "mb/pg_wchar.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

/*
 * Peers that did not answer are not tried again for a while: one that is
 * down or hung costs distseq.remote_timeout once every four agent
 * intervals (or remote timeouts, if longer), not at every step or refill.
 * Kept per process, per foreign server; distseq_maintain() tries every
 * peer afresh.  In TopMemoryContext.
 */
typedef struct RemoteRest
{
	Oid			serverid;
	TimestampTz retry_at;
	char		error[80];		/* why it failed, cut short, or "" */
} RemoteRest;

#define REST_INTERVALS	4

static List *resting = NIL;

/* Is a server resting?  Then *error (if not NULL) says why, or is "" */
bool
distseq_remote_resting(Oid serverid, const char **error)
{
	ListCell   *lc;

	foreach(lc, resting)
	{
		RemoteRest *r = lfirst(lc);

		if (r->serverid == serverid && GetCurrentTimestamp() < r->retry_at)
		{
			if (error)
				*error = r->error;
			return true;
		}
	}
	return false;
}

void
distseq_remote_rest(Oid serverid, const char *error)
{
	TimestampTz retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   REST_INTERVALS *
													   Max(distseq_agent_interval,
														   distseq_remote_timeout));
	ListCell   *lc;
	RemoteRest *r = NULL;
	MemoryContext oldcxt;

	foreach(lc, resting)
	{
		r = lfirst(lc);
		if (r->serverid == serverid)
			break;
		r = NULL;
	}
	if (r == NULL)
	{
		oldcxt = MemoryContextSwitchTo(TopMemoryContext);
		r = palloc(sizeof(RemoteRest));
		r->serverid = serverid;
		resting = lappend(resting, r);
		MemoryContextSwitchTo(oldcxt);
	}
	r->retry_at = retry_at;
	r->error[0] = '\0';
	if (error)
		strlcpy(r->error, error, pg_mbcliplen(error, strlen(error), sizeof(r->error) - 1) + 1);
}

/* Forget every rest (a small list: one per server) */
void
distseq_remote_wake_all(void)
{
	list_free_deep(resting);
	resting = NIL;
}
