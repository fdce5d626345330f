/*-------------------------------------------------------------------------
 *
 * answer.c
 *	  A peer's answer, checked and parsed before any of it is used: its
 *	  status, its number of rows and columns, NULLs, and each value parsed
 *	  strictly as PostgreSQL prints it.  A bad answer is an error naming
 *	  the peer, and no value of it is used.
 *
 * Used by remote.c (distseq_remote_query) on every PGresult it receives,
 * which it frees on every path; the answer is in the caller's memory.  No
 * state, no lock.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "distseq.h"
#include "compat.h"

#include <ctype.h>
#include <errno.h>

#include "libpq-fe.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"

pg_noreturn static void remote_bad_answer(const char *peer, const char *sql,
										  const char *why);

/*
 * A peer's answer, checked and parsed.  The columns are described by a
 * string, one letter per column: b boolean, i integer, l bigint, a bigint[]
 * (no NULL elements), t text, n numeric (kept as text); a letter followed by
 * '?' may be NULL.
 */
typedef struct RemoteValue
{
	bool		isnull;
	int64		int8;			/* b, i, l */
	char	   *text;			/* t, n */
	int64	   *elems;			/* a */
	int			nelems;
} RemoteValue;

struct DistseqRemoteResult
{
	int			nrows;
	int			ncols;
	char	   *types;			/* one letter per column */
	RemoteValue *values;		/* nrows * ncols */
};

/* A bad answer: an error naming the peer and what was wrong */
static void
remote_bad_answer(const char *peer, const char *sql, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("distseq peer \"%s\" gave an unexpected answer: %s", peer, why),
			 errcontext("remote SQL command: %s", sql)));
}

/* A value the peer sent, cut short, to end a message; "" if not text */
static char *
remote_quote_value(const char *value)
{
	int			len = strlen(value);

	if (!pg_verifymbstr(value, len, true))
		return "";
	len = pg_mbcliplen(value, len, 32);
	return psprintf(": \"%.*s%s\"", len, value, value[len] ? "..." : "");
}

/* A bigint as PostgreSQL prints it: no blanks, no "+", in range */
static bool
remote_parse_int8(const char *s, int64 *v)
{
	char	   *end;

	if (!(isdigit((unsigned char) s[0]) ||
		  (s[0] == '-' && isdigit((unsigned char) s[1]))))
		return false;
	errno = 0;
	*v = strtoi64(s, &end, 10);
	return errno == 0 && *end == '\0';
}

/* A bigint[] as PostgreSQL prints it: {1,2,3}, no NULL element */
static bool
remote_parse_int8_array(const char *s, int64 **elems, int *n)
{
	size_t		len = strlen(s);
	char	   *tok;

	*n = 0;
	*elems = palloc(sizeof(int64) * (len / 2 + 1));
	if (len < 2 || s[0] != '{' || s[len - 1] != '}')
		return false;
	if (len == 2)
		return true;
	tok = pnstrdup(s + 1, len - 2);
	for (;;)
	{
		char	   *comma = strchr(tok, ',');

		if (comma)
			*comma = '\0';
		if (!remote_parse_int8(tok, &(*elems)[(*n)++]))
			return false;
		if (comma == NULL)
			return true;
		tok = comma + 1;
	}
}

/* A numeric as PostgreSQL prints a finite one, of a sane length */
static bool
remote_valid_numeric(const char *s)
{
	const char *p = s;

	if (strlen(s) > 64)
		return false;
	if (*p == '-')
		p++;
	if (!isdigit((unsigned char) *p))
		return false;
	while (isdigit((unsigned char) *p))
		p++;
	if (*p == '.')
	{
		p++;
		if (!isdigit((unsigned char) *p))
			return false;
		while (isdigit((unsigned char) *p))
			p++;
	}
	return *p == '\0';
}

/* One value of type "type" (see RemoteValue) into *v; false if it is not one */
static bool
parse_value(char type, const char *text, RemoteValue *v)
{
	switch (type)
	{
		case 'b':
			v->int8 = text[0] == 't';
			return strcmp(text, "t") == 0 || strcmp(text, "f") == 0;
		case 'i':
			return remote_parse_int8(text, &v->int8) &&
				v->int8 >= PG_INT32_MIN && v->int8 <= PG_INT32_MAX;
		case 'l':
			return remote_parse_int8(text, &v->int8);
		case 'a':
			return remote_parse_int8_array(text, &v->elems, &v->nelems);
		case 'n':
			v->text = pstrdup(text);
			return remote_valid_numeric(v->text);
		case 't':
			v->text = pstrdup(text);
			return true;
	}
	elog(ERROR, "distseq: unknown column type '%c'", type);
	return false;				/* keep compiler quiet */
}

/*
 * Check the result of "sql" on peer "peer" against its description (see
 * RemoteValue) and parse it
 */
DistseqRemoteResult *
distseq_remote_parse(const char *peer, PGresult *res, const char *sql, const char *columns,
					 int nrows)
{
	DistseqRemoteResult *r = palloc0(sizeof(DistseqRemoteResult));
	int			ncols = 0;

	r->types = palloc(strlen(columns) + 1);
	for (const char *p = columns; *p; p++)
		if (*p != '?')
			r->types[ncols++] = *p;
	r->types[ncols] = '\0';

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		remote_bad_answer(peer, sql, "a command status instead of rows");
	if (PQnfields(res) != ncols)
		remote_bad_answer(peer, sql, psprintf("%d columns instead of %d",
											PQnfields(res), ncols));
	if (nrows >= 0 && PQntuples(res) != nrows)
		remote_bad_answer(peer, sql, psprintf("%d rows instead of %d",
											PQntuples(res), nrows));
	r->nrows = PQntuples(res);
	r->ncols = ncols;
	/* in Size: no overflow, and palloc refuses more than 1 GB */
	r->values = palloc0(sizeof(RemoteValue) * (Size) Max(r->nrows, 1) *
						(Size) Max(ncols, 1));

	for (int row = 0; row < r->nrows; row++)
	{
		const char *p = columns;

		for (int col = 0; col < ncols; col++, p++)
		{
			RemoteValue *v = &r->values[row * ncols + col];
			char		type = *p;
			bool		nullable = p[1] == '?';
			const char *text = PQgetvalue(res, row, col);

			if (nullable)
				p++;
			if (PQgetisnull(res, row, col))
			{
				if (!nullable)
					remote_bad_answer(peer, sql, psprintf("column %d of row %d is NULL",
														col + 1, row + 1));
				v->isnull = true;
				continue;
			}
			if (!parse_value(type, text, v))
				remote_bad_answer(peer, sql,
								  psprintf("column %d of row %d is not %s%s",
										   col + 1, row + 1,
										   type == 'b' ? "a boolean" :
										   type == 'i' ? "an integer" :
										   type == 'l' ? "a bigint" :
										   type == 'a' ? "a bigint array" : "a number",
										   remote_quote_value(text)));
		}
	}
	return r;
}

static RemoteValue *
remote_value(const DistseqRemoteResult *r, int row, int col, const char *types)
{
	RemoteValue *v;

	if (row < 0 || row >= r->nrows || col < 0 || col >= r->ncols ||
		strchr(types, r->types[col]) == NULL)
		elog(ERROR, "distseq: no column %d of type %s in row %d of a peer's answer",
			 col, types, row);
	v = &r->values[row * r->ncols + col];
	if (v->isnull)
		elog(ERROR, "distseq: column %d of row %d of a peer's answer is NULL", col, row);
	return v;
}

int
distseq_remote_ntuples(const DistseqRemoteResult *r)
{
	return r->nrows;
}

bool
distseq_remote_isnull(const DistseqRemoteResult *r, int row, int col)
{
	if (row < 0 || row >= r->nrows || col < 0 || col >= r->ncols)
		elog(ERROR, "distseq: no column %d in row %d of a peer's answer", col, row);
	return r->values[row * r->ncols + col].isnull;
}

int64
distseq_remote_int8(const DistseqRemoteResult *r, int row, int col)
{
	return remote_value(r, row, col, "il")->int8;
}

bool
distseq_remote_bool(const DistseqRemoteResult *r, int row, int col)
{
	return remote_value(r, row, col, "b")->int8 != 0;
}

const char *
distseq_remote_text(const DistseqRemoteResult *r, int row, int col)
{
	return remote_value(r, row, col, "tn")->text;
}

const int64 *
distseq_remote_int8s(const DistseqRemoteResult *r, int row, int col, int *n)
{
	RemoteValue *v = remote_value(r, row, col, "a");

	*n = v->nelems;
	return v->elems;
}
