#!/usr/bin/env bash
# Build and install distseq, start a throwaway PostgreSQL server with the
# library preloaded, and let several concurrent sessions insert rows whose
# ids come from DEFAULT distseq_nextval('orders').  Everything is removed
# at the end.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"

distseq_install_packages
distseq_build_install "$here"

dir=$(mktemp -d /tmp/distseq-demo.XXXXXX)
chown postgres "$dir"
port=54329
as_pg() { runuser -u postgres -- env LC_ALL=C.UTF-8 "$@"; }
psql_demo() { as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p $port -d demo "$@"; }
cleanup() {
	as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m fast stop >/dev/null 2>&1 || true
	rm -rf "$dir"
}
trap cleanup EXIT

echo "== starting a throwaway server in $dir"
as_pg "$PGBIN/initdb" -D "$dir/data" -A trust >/dev/null
cat >> "$dir/data/postgresql.conf" <<CONF
shared_preload_libraries = 'distseq'
listen_addresses = ''
unix_socket_directories = '$dir'
port = $port
CONF
as_pg "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
as_pg "$PGBIN/createdb" -h "$dir" -p $port demo

echo "== creating the sequence and the table"
psql_demo -e <<'SQL'
CREATE EXTENSION distseq;
SELECT distseq_create('orders', block_size => 20);
CREATE TABLE orders (
    id bigint PRIMARY KEY DEFAULT distseq_nextval('orders'),
    item text,
    session int DEFAULT pg_backend_pid()
);
SQL

sessions=4
echo "== $sessions concurrent sessions insert 500 rows each, one row per statement"
for s in $(seq 1 $sessions); do
	(for i in $(seq 1 500); do
		echo "INSERT INTO orders (item) VALUES ('item $s-$i');"
	done | psql_demo) &
done
wait

psql_demo <<'SQL'
\echo == a few rows
SELECT id, item, session FROM orders ORDER BY id LIMIT 8;
\echo == every id is distinct
SELECT count(*) AS rows, count(DISTINCT id) AS distinct_ids,
       min(id), max(id) FROM orders;
\echo == ids per session: each session draws whole blocks of 20
SELECT session, count(*) AS ids, min(id), max(id)
FROM orders GROUP BY session ORDER BY min(id);
\echo == distseq_status
\x on
SELECT sequence_name, block_size, segment_size, pool_start, pool_end,
       open_windows, window_values_left, refills, waits, values_issued, values_lost
FROM distseq_status;
SQL
echo "== done; the server is stopped and removed"
