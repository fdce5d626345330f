"""Plain psycopg2 with distseq (run by test/t/050_orm.pl): execute_values
with RETURNING, COPY into a table whose id defaults to distseq_nextval, and
threads, each with its own connection.

Connection from the libpq environment: PGHOST, PGPORT, PGDATABASE, PGUSER.
"""
import io
import sys
import threading

import psycopg2
from psycopg2.extras import execute_values


def check(cond, what):
    print(("ok: " if cond else "FAILED: ") + what)
    if not cond:
        sys.exit(1)


conn = psycopg2.connect("")
with conn, conn.cursor() as cur:
    cur.execute("SELECT distseq_create('pg_orders', if_not_exists => true)")
    cur.execute("CREATE TABLE pg_orders (id bigint PRIMARY KEY"
                " DEFAULT distseq_nextval('pg_orders'), item text)")

with conn, conn.cursor() as cur:
    ids = execute_values(cur, "INSERT INTO pg_orders (item) VALUES %s RETURNING id",
                         [("batch %d" % i,) for i in range(250)], fetch=True)
check([i for (i,) in ids] == list(range(1, 251)), "execute_values ... RETURNING: ids 1 to 250")

with conn, conn.cursor() as cur:
    data = io.StringIO("".join("copy %d\n" % i for i in range(1000)))
    cur.copy_expert("COPY pg_orders (item) FROM STDIN", data)
    check(cur.rowcount == 1000, "COPY of 1000 rows, the ids from the default")

errors = []


def worker(n):
    try:
        c = psycopg2.connect("")
        with c, c.cursor() as cur:
            for i in range(300):
                cur.execute("INSERT INTO pg_orders (item) VALUES (%s) RETURNING id",
                            ("thread %d row %d" % (n, i),))
        c.close()
    except Exception as e:  # reported below
        errors.append(repr(e))


threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
check(not errors, "4 threads inserted 300 rows each %s" % errors)

with conn.cursor() as cur:
    cur.execute("SELECT count(*), count(DISTINCT id) FROM pg_orders")
    n, d = cur.fetchone()
check(n == d == 250 + 1000 + 1200, "%d rows, %d distinct ids" % (n, d))

# rows with explicit ids (COPY from an export), then distseq_setval above
# them: psycopg2 opens a transaction at the first statement, which
# distseq_setval refuses; it runs with autocommit
with conn, conn.cursor() as cur:
    data = io.StringIO("".join("%d\texport %d\n" % (i, i) for i in range(999000, 1000001)))
    cur.copy_expert("COPY pg_orders (id, item) FROM STDIN", data)
try:
    with conn, conn.cursor() as cur:
        cur.execute("SELECT distseq_setval('pg_orders', 1000000)")
    refused = None
except psycopg2.Error as e:
    refused = str(e)
check(refused is not None and "cannot run inside a transaction block" in refused,
      "distseq_setval refuses psycopg2's implicit transaction")
conn.autocommit = True
with conn.cursor() as cur:
    cur.execute("SELECT distseq_setval('pg_orders', (SELECT max(id) FROM pg_orders))")
conn.autocommit = False
with conn, conn.cursor() as cur:
    ids = execute_values(cur, "INSERT INTO pg_orders (item) VALUES %s RETURNING id",
                         [("after %d" % i,) for i in range(100)], fetch=True)
check(min(i for (i,) in ids) > 1000000, "inserts after distseq_setval are above the export")
conn.close()
print("psycopg2: done")
