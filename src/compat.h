/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  What differs between the PostgreSQL versions distseq builds on
 *	  (15 and 18 are built and tested; 13, 14, 16 and 17 are meant to
 *	  build), in one place.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DISTSEQ_COMPAT_H
#define DISTSEQ_COMPAT_H

#include "storage/proc.h"

/* this backend's slot number, 0-based */
#if PG_VERSION_NUM >= 170000
#define DISTSEQ_MY_SLOT			MyProcNumber
#define DISTSEQ_HAS_SLOT()		(MyProcNumber != INVALID_PROC_NUMBER)
#define DISTSEQ_MY_LXID			(MyProc->vxid.lxid)
#define DISTSEQ_SET_VXID(vxid, slot, lxid) \
	((vxid).procNumber = (slot), (vxid).localTransactionId = (lxid))
#else
#include "storage/backendid.h"
#define DISTSEQ_MY_SLOT			(MyBackendId - 1)
#define DISTSEQ_HAS_SLOT()		(MyBackendId != InvalidBackendId)
#define DISTSEQ_MY_LXID			(MyProc->lxid)
#define DISTSEQ_SET_VXID(vxid, slot, lxid) \
	((vxid).backendId = (slot) + 1, (vxid).localTransactionId = (lxid))
#endif

/* the local transaction a backend slot is running, or invalid */
#if PG_VERSION_NUM >= 170000
#define distseq_slot_lxid(slot)	(GetPGProcByNumber(slot)->vxid.lxid)
#else
#include "storage/sinvaladt.h"
static inline LocalTransactionId
distseq_slot_lxid(int slot)
{
	PGPROC	   *proc = BackendIdGetProc(slot + 1);

	return proc ? proc->lxid : InvalidLocalTransactionId;
}
#endif

/* string keys are the default before 14 */
#if PG_VERSION_NUM >= 140000
#define DISTSEQ_HASH_STRINGS	HASH_STRINGS
#else
#define DISTSEQ_HASH_STRINGS	0
#endif

#if PG_VERSION_NUM >= 160000
#define distseq_rel_ownercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define distseq_rel_ownercheck(relid, roleid) \
	pg_class_ownercheck((relid), (roleid))
#endif

/* a qualified name from text; errors are thrown */
#if PG_VERSION_NUM >= 160000
#define distseq_qualified_name_list(string)	stringToQualifiedNameList((string), NULL)
#else
#define distseq_qualified_name_list(string)	stringToQualifiedNameList(string)
#endif

/* USAGE and other rights on a foreign server */
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_foreign_server.h"
#define distseq_foreign_server_aclcheck(srvid, roleid, mode) \
	object_aclcheck(ForeignServerRelationId, (srvid), (roleid), (mode))
#else
#define distseq_foreign_server_aclcheck(srvid, roleid, mode) \
	pg_foreign_server_aclcheck((srvid), (roleid), (mode))
#endif

/* index entries for a tuple just inserted (no summarizing-only flag before 16) */
#if PG_VERSION_NUM >= 160000
#define distseq_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL, false)
#else
#define distseq_insert_index_tuples(rri, slot, estate) \
	ExecInsertIndexTuples((rri), (slot), (estate), false, false, NULL, NIL)
#endif

#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix)	EmitWarningsOnPlaceholders(prefix)
#endif

/* the parameters of a ProcessUtility hook, and the arguments to pass on */
#if PG_VERSION_NUM >= 140000
#define DISTSEQ_UTILITY_PARAMS \
	PlannedStmt *pstmt, const char *queryString, bool readOnlyTree, \
	ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define DISTSEQ_UTILITY_ARGS \
	pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc
#else
#define DISTSEQ_UTILITY_PARAMS \
	PlannedStmt *pstmt, const char *queryString, \
	ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define DISTSEQ_UTILITY_ARGS \
	pstmt, queryString, context, params, queryEnv, dest, qc
#endif

/* a function that does not return: placed before the declaration */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/* a random number in [0, 1) */
#if PG_VERSION_NUM >= 150000
#include "common/pg_prng.h"
#define DISTSEQ_RANDOM_FRACTION()	pg_prng_double(&pg_global_prng_state)
#else
#define DISTSEQ_RANDOM_FRACTION()	((double) random() / ((double) MAX_RANDOM_VALUE + 1))
#endif

/* a relation's primary key index; 18 asks whether a deferrable one counts */
#if PG_VERSION_NUM >= 180000
#define distseq_primary_key(rel)	RelationGetPrimaryKeyIndex((rel), false)
#else
#define distseq_primary_key(rel)	RelationGetPrimaryKeyIndex(rel)
#endif

#endif							/* DISTSEQ_COMPAT_H */
