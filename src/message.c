/*-------------------------------------------------------------------------
 *
 * message.c
 *	  Text for messages: what comes from a peer or an error, made fit for a
 *	  client's error, a view or the log (distseq_clean_text); a database's
 *	  name; and the refill worker's error catch and its log lines that
 *	  repeat, written once in a while.
 *
 * No shared memory and no lock here: the table of repeated log lines is
 * the worker process's own.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "common/hashfn.h"
#include "mb/pg_wchar.h"
#include "pgstat.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

/*
 * Every PG_CATCH of the worker: take the error, abort the transaction it
 * broke, and carry on in "cxt" (where the PG_TRY began).  The caller logs
 * the error, hands it on or frees it.
 */
ErrorData *
distseq_worker_catch(MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	AbortCurrentTransaction();
	pgstat_report_activity(STATE_IDLE, NULL);
	return edata;
}

/*
 * Is the character at s (len bytes, valid in the encoding) one of the C1
 * controls, U+0080 to U+009F?  CSI (U+009B) starts an escape sequence as
 * ESC [ does, NEL (U+0085) is a line break.  They are two bytes in UTF-8,
 * and the bytes 0x80 to 0x9F in the ISO 8859 encodings.
 */
static bool
text_is_c1(int encoding, const char *s, int len)
{
	unsigned char c = (unsigned char) s[0];

	if (encoding == PG_UTF8)
		return len == 2 && c == 0xc2 && (unsigned char) s[1] <= 0x9f;
	if ((encoding >= PG_LATIN1 && encoding <= PG_LATIN10) ||
		(encoding >= PG_ISO_8859_5 && encoding <= PG_ISO_8859_8))
		return len == 1 && c >= 0x80 && c <= 0x9f;
	return false;
}

/*
 * A message fit for a client's error, a view or the log, from text that may
 * come from a peer: at most size - 1 bytes, cut between characters and
 * ending in "..." when cut; every control character, C0 or C1 (a line
 * break would forge log lines, an escape sequence drive a terminal) made a
 * space, and
 * every byte that starts no valid character of the database's encoding a
 * "?".  Palloc'd.
 */
char *
distseq_clean_text(const char *src, int size)
{
	int			encoding = GetDatabaseEncoding();
	int			srclen = strlen(src);
	int			room = srclen < size ? size - 1 : size - 4;
	char	   *dst = palloc(size);
	int			n = 0;

	Assert(size > 4);
	for (int i = 0; i < srclen;)
	{
		unsigned char c = (unsigned char) src[i];
		int			len = 1;

		if (IS_HIGHBIT_SET(c))
			len = pg_encoding_verifymbchar(encoding, src + i, srclen - i);
		if (n + Max(len, 1) > room)
			break;
		if (len < 1)
		{
			dst[n++] = '?';
			len = 1;
		}
		else if (c < 0x20 || c == 0x7f || text_is_c1(encoding, src + i, len))
			dst[n++] = ' ';
		else
		{
			memcpy(dst + n, src + i, len);
			n += len;
		}
		i += len;
	}
	if (srclen >= size)
	{
		memcpy(dst + n, "...", 3);
		n += 3;
	}
	dst[n] = '\0';
	return dst;
}

/*
 * The worker's log lines that repeat -- a refill failing for every session
 * of a minority node, an agent pass failing at each of its intervals -- are
 * written once per DISTSEQ_LOG_REPEAT_SECS for the same message (which
 * names the sequence, and the peer where one is at fault); the next line
 * of that message after the interval says how many were left out.  The
 * table is this worker's own and bounded: past LOG_REPEAT_MAX messages, the
 * ones outside their interval are forgotten, and if that is not enough a
 * line is written untracked.
 */
#define DISTSEQ_LOG_REPEAT_SECS	10
#define LOG_REPEAT_MAX			1024

typedef struct LogRepeat
{
	uint64		key;			/* hash of the message */
	TimestampTz logged;			/* when it was last written */
	int64		suppressed;		/* left out since */
} LogRepeat;

static HTAB *log_repeats = NULL;
static MemoryContext log_cxt = NULL;

/*
 * Note that a message with this key is to be logged now: returns how many
 * times it was left out since it was last logged, or -1 to leave it out
 * now.
 */
static int64
log_repeat_note(uint64 key, TimestampTz now)
{
	LogRepeat  *r;
	int64		suppressed;
	bool		found;

	if (hash_get_num_entries(log_repeats) >= LOG_REPEAT_MAX &&
		hash_search(log_repeats, &key, HASH_FIND, NULL) == NULL)
	{
		HASH_SEQ_STATUS scan;
		LogRepeat  *old;

		hash_seq_init(&scan, log_repeats);
		while ((old = hash_seq_search(&scan)) != NULL)
		{
			if (TimestampDifferenceExceeds(old->logged, now,
										   DISTSEQ_LOG_REPEAT_SECS * 1000))
				hash_search(log_repeats, &old->key, HASH_REMOVE, NULL);
		}
	}
	if (hash_get_num_entries(log_repeats) >= LOG_REPEAT_MAX &&
		hash_search(log_repeats, &key, HASH_FIND, NULL) == NULL)
		return 0;				/* written untracked */

	r = hash_search(log_repeats, &key, HASH_ENTER, &found);
	if (found && !TimestampDifferenceExceeds(r->logged, now,
											 DISTSEQ_LOG_REPEAT_SECS * 1000))
	{
		r->suppressed++;
		return -1;
	}
	suppressed = found ? r->suppressed : 0;
	r->logged = now;
	r->suppressed = 0;
	return suppressed;
}

void
distseq_worker_log(const char *detail, const char *fmt,...)
{
	TimestampTz now = GetCurrentTimestamp();
	MemoryContext oldcxt;
	StringInfoData message;
	char	   *clean;
	int64		suppressed;

	if (log_repeats == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(LogRepeat);
		log_repeats = hash_create("distseq log repeats", 64, &ctl,
								  HASH_ELEM | HASH_BLOBS);
		log_cxt = AllocSetContextCreate(TopMemoryContext, "distseq log",
										ALLOCSET_SMALL_SIZES);
	}
	oldcxt = MemoryContextSwitchTo(log_cxt);
	initStringInfo(&message);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&message, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&message, needed);
	}
	clean = distseq_clean_text(message.data, 1024);
	suppressed = log_repeat_note(hash_bytes_extended((const unsigned char *) clean,
													 strlen(clean), 0),
								 now);
	if (suppressed < 0)
	{
		MemoryContextSwitchTo(oldcxt);
		MemoryContextReset(log_cxt);
		return;
	}

	detail = (detail && detail[0]) ? distseq_clean_text(detail, 2048) : NULL;
	if (suppressed > 0)
		ereport(LOG,
				(errmsg_internal("%s", clean),
				 errdetail_internal("%s%sThe same message came " INT64_FORMAT " more times in the %d seconds before and was not logged.",
									detail ? detail : "", detail ? " " : "",
									suppressed, DISTSEQ_LOG_REPEAT_SECS)));
	else
		ereport(LOG,
				(errmsg_internal("%s", clean),
				 detail ? errdetail_internal("%s", detail) : 0));
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(log_cxt);
}

/*
 * The name of a database for a message: in a transaction it can be looked
 * up; otherwise, or once it is gone, its OID has to do.
 */
char *
distseq_database_name(Oid dboid)
{
	char	   *name = IsTransactionState() ? get_database_name(dboid) : NULL;

	return name ? name : psprintf("%u", dboid);
}
