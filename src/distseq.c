/*-------------------------------------------------------------------------
 *
 * distseq.c
 *	  Module entry point: the GUCs, _PG_init, which hands each subsystem its
 *	  own initialization, and the hooks: the utility hook, which tells the
 *	  backend's cache about DISCARD and hands ownedby.c the statements that
 *	  link a distseq sequence to a column, and the object access hook, which
 *	  hands drops of relations to inuse.c (a drop waits for the sequence's
 *	  users) and ownedby.c, and drops of databases to worker.c.  Every
 *	  function call in the server passes through the object access hook:
 *	  it tests one thing before anything else.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

int			distseq_max_sequences = 128;
int			distseq_backend_marks = 32;
int			distseq_default_block_size = 100;
int			distseq_prefetch_threshold = 50;
int			distseq_refill_timeout = 10000;
int			distseq_segment_lifetime = 10000;
int			distseq_remote_timeout = 5000;
int			distseq_agent_interval = 10000;
int			distseq_worker_idle_timeout = 60000;
int			distseq_standby_ack_mode = DISTSEQ_STANDBY_ACK_ALL;
int			distseq_standby_ack_timeout = 3000;

static const struct config_enum_entry standby_ack_options[] = {
	{"off", DISTSEQ_STANDBY_ACK_OFF, false},
	{"all", DISTSEQ_STANDBY_ACK_ALL, false},
	{NULL, 0, false}
};

static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static object_access_hook_type prev_object_access_hook = NULL;

void		_PG_init(void);

/*
 * DISCARD SEQUENCES and DISCARD ALL forget this session's currval, as they
 * do for native sequences (a pooler runs DISCARD ALL between clients).
 * Only once the statement succeeded: DISCARD ALL refuses to run in a
 * transaction block.
 */
static void
distseq_ProcessUtility(DISTSEQ_UTILITY_PARAMS)
{
	Node	   *stmt = pstmt->utilityStmt;

	if (distseq_ownedby_utility(stmt))
		return;
	if (prev_ProcessUtility)
		prev_ProcessUtility(DISTSEQ_UTILITY_ARGS);
	else
		standard_ProcessUtility(DISTSEQ_UTILITY_ARGS);

	if (IsA(stmt, DiscardStmt) &&
		(((DiscardStmt *) stmt)->target == DISCARD_ALL ||
		 ((DiscardStmt *) stmt)->target == DISCARD_SEQUENCES))
		distseq_local_discard();
}

static void
distseq_object_access(ObjectAccessType access, Oid classId, Oid objectId,
					  int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);

	if (access == OAT_DROP && Distseq != NULL)
	{
		if (classId == RelationRelationId && subId == 0)
		{
			distseq_inuse_wait(objectId);
			distseq_ownedby_drop(objectId, ((ObjectAccessDrop *) arg)->dropflags);
		}
		else if (classId == DatabaseRelationId)
			distseq_worker_drop_database(objectId);
	}
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomIntVariable("distseq.max_sequences",
							"Sets the maximum number of distseq sequences in use at once, over all databases.",
							NULL,
							&distseq_max_sequences,
							128, 1, 65536,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("distseq.backend_marks",
							"Sets how many sequences a transaction uses without locking each one.",
							"Each connection keeps this many slots in shared memory, 16 bytes each; a transaction that uses more distinct sequences takes AccessShareLock on the backing sequence of each further one, as native sequences do.",
							&distseq_backend_marks,
							32, 1, 1024,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("distseq.default_block_size",
							"Sets the block size of sequences created without one.",
							"A block is the run of values a backend takes from the server's pool at once.",
							&distseq_default_block_size,
							100, 1, 1000000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("distseq.prefetch_threshold",
							"Sets how empty a pool gets, in percent of a segment, before the next segment is fetched.",
							NULL,
							&distseq_prefetch_threshold,
							50, 0, 100,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("distseq.refill_timeout",
							"Sets how long distseq_nextval waits for a refill before it fails.",
							NULL,
							&distseq_refill_timeout,
							10000, 1, INT_MAX,
							PGC_USERSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("distseq.segment_lifetime",
							"Sets how long a segment should last: refills grow or shrink towards it.",
							"A segment that lasted less than a quarter of this doubles, one that lasted more than four times this halves.",
							&distseq_segment_lifetime,
							10000, 1, INT_MAX / 4,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("distseq.remote_timeout",
							"Sets how long a connection to a peer, or one command on it, may take.",
							NULL,
							&distseq_remote_timeout,
							5000, 10, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("distseq.agent_interval",
							"Sets how often the agent keeps windows open on a node with peers.",
							NULL,
							&distseq_agent_interval,
							10000, 100, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("distseq.worker_idle_timeout",
							"Sets how long a database's refill worker waits for work before it exits.",
							"It is started again when a session needs a refill.  0 keeps it for good.  A database with peers keeps its worker.",
							&distseq_worker_idle_timeout,
							60000, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("distseq.standby_ack",
							 "Sets whether reservations wait for the streaming standbys before their values are used.",
							 "all: every standby streaming when a reservation commits must have flushed it, so that a promoted asynchronous standby does not hand its values out again.",
							 &distseq_standby_ack_mode,
							 DISTSEQ_STANDBY_ACK_ALL, standby_ack_options,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("distseq.standby_ack_timeout",
							"Sets how long a reservation waits for the standbys to acknowledge it before its values are given up.",
							NULL,
							&distseq_standby_ack_timeout,
							3000, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	MarkGUCPrefixReserved("distseq");

	distseq_shmem_init();

	prev_object_access_hook = object_access_hook;
	object_access_hook = distseq_object_access;

	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = distseq_ProcessUtility;
}
