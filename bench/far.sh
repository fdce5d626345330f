#!/usr/bin/env bash
# distseq benchmark: far-apart servers, on one machine.
#
#   bash bench/far.sh            # full run (about 3 minutes)
#   bash bench/far.sh --quick    # smoke run (about a minute)
#
# Options (after --quick, if any, to override it):
#   --delay MS       one-way delay between the servers (default 50)
#   --duration S     seconds of pgbench per phase      (full 30, quick 5)
#   --clients C      pgbench clients on each server    (default 4)
#   --window-size W  window_size of the sequence       (default 200000)
#   --min-open K     min_open_windows                  (default 3)
#   --keep           keep the work directory
#   --no-build       use the installed extension, do not build and install it
#   --pg MAJOR       PostgreSQL to run on: 15 (default) or one built by
#                    scripts/build-pg.sh
#
# Three servers form one distseq group and share the sequence 'orders'.
# Every link between them goes through bench/delay_proxy.pl, which delays
# each chunk by --delay in each direction (a round trip takes twice that).
# Two phases run the same load, first with the proxies passing at once
# (loopback), then with the delay: on every server at once, pgbench draws
# distseq_nextval('orders') for --duration seconds; then distseq_maintain()
# is timed on each server, and a membership change (a fourth server added,
# then removed) from server 1.  The table shows, per server, the latency
# percentiles of the draws and their ratio to the loopback phase, the
# windows the agents opened meanwhile and the refills that had to wait, so
# that a run whose windows were all opened before the clock ran shows as
# such.  Results in bench/out/far.csv.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

delay=50
duration=30
clients=4
window_size=200000
min_open=3
keep=0
build=1
pg_major=
while [ $# -gt 0 ]; do
	case $1 in
		--quick) duration=5 ;;
		--delay) delay=$2; shift ;;
		--duration) duration=$2; shift ;;
		--clients) clients=$2; shift ;;
		--window-size) window_size=$2; shift ;;
		--min-open) min_open=$2; shift ;;
		--keep) keep=1 ;;
		--no-build) build=0 ;;
		--pg) pg_major=$2; shift ;;
		-h|--help) script_usage "$0"; exit 0 ;;
		*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
	shift
done

bench_clock

bench_prepare $build "$pg_major"
out=$here/bench/out
mkdir -p "$out"
bench_workdir dsfar logs lat

port_base=54450
node_port() { echo $((port_base + $1)); }
proxy_port() { echo $((port_base + 10 + $1)); }
nodes="1 2 3"
proxy_pids=()

start_proxies() {	# delay-ms
	local n
	for n in 1 2 3 4; do
		perl "$here/bench/delay_proxy.pl" "$(proxy_port $n)" "$(node_port $n)" "$1" &
		proxy_pids+=($!)
	done
	# a proxy is ready once it accepts
	for n in 1 2 3 4; do
		for _ in $(seq 50); do
			(exec 3<>"/dev/tcp/127.0.0.1/$(proxy_port $n)") 2>/dev/null && break
			sleep 0.1
		done
	done
}
stop_proxies() {
	local p
	for p in "${proxy_pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	proxy_pids=()
}
cleanup() {
	stop_proxies
	bench_cleanup
}
trap cleanup EXIT

psql_node() {	# node psql-args...
	local n=$1
	shift
	as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$(node_port "$n")" -d bench "$@"
}
start_node() {	# node
	bench_initdb "n$1" "listen_addresses = '127.0.0.1'
port = $(node_port "$1")
max_connections = 40
shared_buffers = 64MB
shared_preload_libraries = 'distseq'"
	bench_start "n$1"
	as_pg "$PGBIN/createdb" -h "$work" -p "$(node_port "$1")" bench
	{
		echo "CREATE EXTENSION distseq;"
		bench_sql_functions
		local m
		for m in 1 2 3 4; do
			[ "$m" = "$1" ] && continue
			# every link goes through the proxy in front of the server it reaches
			echo "CREATE SERVER node$m FOREIGN DATA WRAPPER distseq
				OPTIONS (hostaddr '127.0.0.1', port '$(proxy_port "$m")', dbname 'bench');"
			echo "CREATE USER MAPPING FOR CURRENT_USER SERVER node$m OPTIONS (user 'postgres');"
		done
	} | psql_node "$1" >/dev/null
}

bench_log "starting three servers in $work"
start_proxies 0
for n in $nodes 4; do start_node "$n"; done
for n in $nodes; do
	for m in $nodes; do
		[ "$m" = "$n" ] || psql_node "$n" -c "SELECT distseq_add_peer('node$m')" >/dev/null
	done
done
psql_node 1 -c "SELECT distseq_create('orders', window_size => $window_size, min_open_windows => $min_open)" >/dev/null
for n in $nodes; do
	psql_node "$n" -c "SELECT * FROM distseq_maintain()" >/dev/null
done
echo "SELECT distseq_nextval('orders');" > "$work/draw.sql"
chown postgres "$work/draw.sql" 2>/dev/null || true

windows_of() { psql_node "$1" -At -c "SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'orders'"; }
waits_of() { psql_node "$1" -At -c "SELECT waits FROM distseq_status WHERE sequence_name = 'orders'"; }

: > "$out/far.csv.tmp"
phase() {	# name delay-ms
	local name=$1 n pids=() w0 w1 q0 q1 tps m_ms
	declare -A w_before q_before
	for n in $nodes; do
		w_before[$n]=$(windows_of "$n")
		q_before[$n]=$(waits_of "$n")
	done
	bench_log "$name: pgbench on the three servers at once, ${duration}s, $clients clients each"
	for n in $nodes; do
		as_pg "$PGBIN/pgbench" -n -M prepared -T "$duration" -c "$clients" -j "$clients" \
			-l --log-prefix="$work/logs/${name}_$n" -f "$work/draw.sql" \
			-h "$work" -p "$(node_port "$n")" bench > "$work/pgbench_${name}_$n.out" 2>&1 &
		pids+=($!)
	done
	for n in "${pids[@]}"; do
		wait "$n" || { cat "$work"/pgbench_"$name"_*.out >&2; echo "pgbench failed in phase $name" >&2; exit 1; }
	done
	for n in $nodes; do
		tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$work/pgbench_${name}_$n.out")
		[ -n "$tps" ] && awk -v t="$tps" 'BEGIN { exit !(t + 0 > 0) }' ||
			{ cat "$work/pgbench_${name}_$n.out" >&2; echo "no transaction ran on server $n in phase $name" >&2; exit 1; }
		cat "$work/logs/${name}_$n".* | awk '{ print $3 }' > "$work/lat/${name}_$n"
		rm -f "$work/logs/${name}_$n".*
		w1=$(windows_of "$n")
		q1=$(waits_of "$n")
		# median of three distseq_maintain() runs, in ms
		m_ms=$(for _ in 1 2 3; do psql_node "$n" -At -c "SELECT round(bench_ms('SELECT count(*) FROM distseq_maintain()')::numeric, 1)"; done | sort -g | sed -n 2p)
		read -r _ p99 p999 < <(bench_percentiles "$work/lat/${name}_$n")
		echo "$name,$2,$n,$tps,$p99,$p999,$((w1 - w_before[$n])),$((q1 - q_before[$n])),$m_ms" >> "$out/far.csv.tmp"
	done
	# a membership change from server 1: a fresh fourth server joins, and leaves
	local add_ms rm_ms
	add_ms=$(psql_node 1 -At -c "SELECT round(bench_ms(\$\$SELECT distseq_add_peer('node4')\$\$)::numeric, 1)")
	rm_ms=$(psql_node 1 -At -c "SELECT round(bench_ms(\$\$SELECT distseq_remove_peer('node4')\$\$)::numeric, 1)")
	echo "$name,$add_ms,$rm_ms" >> "$work/changes"
	# the fourth server is no longer fresh: make a new one for the next phase
	bench_stop n4
	rm -rf "$work/n4"
	start_node 4
}

phase loopback 0
stop_proxies
start_proxies "$delay"
phase far "$delay"

# no window of one server overlaps another's
for n in $nodes; do
	psql_node "$n" -At -F, -c "SELECT $n, window_start, window_end FROM distseq.distseq_windows WHERE sequence_name = 'orders'"
done | sort -t, -k2,2n | awk -F, 'NR > 1 && $2 < top { print "windows of servers " topn " and " $1 " overlap"; bad = 1 }
	{ top = $3; topn = $1 } END { exit bad }' >&2 || exit 1

{
	echo "phase,delay_ms,server,tps,p99_ms,p999_ms,windows_opened,refill_waits,maintain_ms,p999_x_loopback"
	awk -F, 'NR == FNR && $1 == "loopback" { base[$3] = $6 } NR == FNR { row[FNR] = $0; n = FNR; next }
		END { for (i = 1; i <= n; i++) { split(row[i], f, ","); printf "%s,%.2f\n", row[i], f[6] / base[f[3]] } }' \
		"$out/far.csv.tmp" "$out/far.csv.tmp"
} > "$out/far.csv"
rm -f "$out/far.csv.tmp"

echo
echo "distseq far-apart servers, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores; three servers on this machine," \
	"every link through a proxy delaying each direction by the phase's delay;" \
	"window_size $window_size, min_open_windows $min_open, agent_interval default; pgbench -M prepared -c $clients -T $duration on each server at once"
awk -F, 'NR > 1 {
	if (!hdr++) printf "%-9s %6s %6s %10s %8s %9s %9s %7s %6s %12s\n", "phase", "delay", "server", "tps", "p99 ms", "p99.9 ms", "x loopbk", "windows", "waits", "maintain ms"
	printf "%-9s %6s %6s %10.0f %8s %9s %8sx %7s %6s %12s\n", $1, $2, $3, $4, $5, $6, $10, $7, $8, $9 }' "$out/far.csv"
awk -F, '{ printf "membership change from server 1 (%s): a fourth server added in %s ms, removed in %s ms\n", $1, $2, $3 }' "$work/changes"
bench_log "done"
