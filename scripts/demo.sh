#!/usr/bin/env bash
# Build and install distseq, start a throwaway PostgreSQL server with the
# library preloaded, and let several concurrent sessions insert rows whose
# ids come from DEFAULT distseq_nextval('orders'); then three servers that
# share 'orders', one of which stops while the others carry on.
# Everything is removed at the end.  --pg MAJOR runs it on another
# PostgreSQL (18: built once from Debian's source package).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

major=15
if [ "${1:-}" = "--pg" ]; then
	major=$2
fi

distseq_install_packages
distseq_use_pg "$major"
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
as_pg "$PGBIN/pg_ctl" -D "$dir/data" -m fast stop >/dev/null

echo
echo "== three servers share 'orders': each issues from windows it won by majority"
node_port() { echo $((port + $1)); }
psql_node() { local n=$1; shift; as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$dir" -p "$(node_port $n)" -d demo "$@"; }
for n in 1 2 3; do
	as_pg "$PGBIN/initdb" -D "$dir/node$n" -A trust >/dev/null
	cat >> "$dir/node$n/postgresql.conf" <<CONF
shared_preload_libraries = 'distseq'
listen_addresses = ''
unix_socket_directories = '$dir'
port = $(node_port $n)
distseq.agent_interval = '1s'
CONF
	as_pg "$PGBIN/pg_ctl" -D "$dir/node$n" -l "$dir/node$n.log" -w start >/dev/null
	as_pg "$PGBIN/createdb" -h "$dir" -p "$(node_port $n)" demo
	psql_node $n -c "CREATE EXTENSION distseq"
done
stop_nodes() {
	for n in 1 2 3; do
		as_pg "$PGBIN/pg_ctl" -D "$dir/node$n" -m fast stop >/dev/null 2>&1 || true
	done
	cleanup
}
trap stop_nodes EXIT

# every node names the other two (host is the socket directory here)
for n in 1 2 3; do
	for m in 1 2 3; do
		[ $n = $m ] && continue
		psql_node $n -c "CREATE SERVER node$m FOREIGN DATA WRAPPER distseq
			OPTIONS (host '$dir', port '$(node_port $m)', dbname 'demo')" \
			-c "CREATE USER MAPPING FOR CURRENT_USER SERVER node$m OPTIONS (user 'postgres')"
	done
done
for n in 1 2 3; do
	for m in 1 2 3; do
		[ $n = $m ] && continue
		psql_node $n -c "SELECT distseq_add_peer('node$m')" >/dev/null
	done
done
psql_node 1 -e -c "SELECT distseq_create('orders', window_size => 1000, min_open_windows => 2)"
for n in 1 2 3; do
	psql_node $n -c "SELECT * FROM distseq_maintain()" >/dev/null
	psql_node $n -c "CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT distseq_nextval('orders'),
		node int, item text)"
done
psql_node 1 -c "SELECT server_name, reachable, epoch, members FROM distseq_peers"

insert_on() {
	local n=$1 rows=$2
	for s in 1 2; do
		(for i in $(seq 1 $rows); do
			echo "INSERT INTO orders (node, item) VALUES ($n, 'item $n-$s-$i');"
		done | psql_node $n) &
	done
}
echo "== 2 sessions on each of the 3 nodes insert 300 rows each"
for n in 1 2 3; do insert_on $n 300; done
wait
summary() {
	for n in "$@"; do
		psql_node $n -At -c "SELECT id FROM orders"
	done | sort -n | awk '{ n++; if (seen[$1]++) dup++ } END { printf "   %d ids, %d distinct\n", n, n - dup }'
}
for n in 1 2 3; do
	psql_node $n -At -F ' ' -c "SELECT 'node $n:', count(*), 'rows, ids from', min(id), 'to', max(id) FROM orders"
done
summary 1 2 3

echo "== node 3 stops; nodes 1 and 2 carry on"
as_pg "$PGBIN/pg_ctl" -D "$dir/node3" -m immediate stop >/dev/null
for n in 1 2; do insert_on $n 300; done
wait
for n in 1 2; do
	psql_node $n -At -F ' ' -c "SELECT 'node $n:', count(*), 'rows, ids up to', max(id) FROM orders"
done
psql_node 1 -c "SELECT * FROM distseq_maintain()"
as_pg "$PGBIN/pg_ctl" -D "$dir/node3" -l "$dir/node3.log" -w start >/dev/null
echo "== node 3 is back: every id on every node is distinct"
summary 1 2 3
echo "== done; the servers are stopped and removed"
