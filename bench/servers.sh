#!/usr/bin/env bash
# distseq benchmark: more servers drawing one sequence.
#
#   bash bench/servers.sh            # full run (about 4 minutes)
#   bash bench/servers.sh --quick    # smoke run (about 2 minutes)
#
# Options (after --quick, if any, to override it):
#   --servers "L"    group sizes                  (default "1 3 5 7")
#   --n N            values per session           (full 2000000, quick 200000)
#   --reps R         interleaved rounds           (full 5, quick 2)
#   --keep           keep the work directory
#   --no-build       use the installed extension, do not build and install it
#   --pg MAJOR       PostgreSQL to run on: 15 (default) or one built by
#                    scripts/build-pg.sh
#
# For each size S: S fresh servers on this machine form one distseq group
# sharing 'orders' (windows opened before the clock runs), and each holds a
# native sequence CACHE 1000 of its own.  In each round one session per
# server draws N values at the same moment, first from one, then from the
# other (the order alternates): the aggregate rate is all values over the
# time from the first start to the last end.  The machine's cores are
# shared by all servers, so this shows whether distseq's coordination costs
# anything next to independent sequences, not how far it scales.  Results in
# bench/out/servers.csv and bench/out/servers.png (full run: also
# bench/servers.png).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

quick=0
sizes="1 3 5 7"
n=2000000
reps=5
keep=0
build=1
pg_major=
while [ $# -gt 0 ]; do
	case $1 in
		--quick) quick=1; n=200000; reps=2 ;;
		--servers) sizes=$2; shift ;;
		--n) n=$2; shift ;;
		--reps) reps=$2; shift ;;
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
bench_workdir dsservers

port_base=54470
node_port() { echo $((port_base + $1)); }
trap bench_cleanup EXIT

psql_node() {	# node psql-args...
	local s=$1
	shift
	as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$(node_port "$s")" -d bench "$@"
}
start_node() {	# node size
	bench_initdb "n$1" "listen_addresses = '127.0.0.1'
port = $(node_port "$1")
max_connections = 20
shared_buffers = 32MB
shared_preload_libraries = 'distseq'"
	bench_start "n$1"
	as_pg "$PGBIN/createdb" -h "$work" -p "$(node_port "$1")" bench
	{
		echo "CREATE EXTENSION distseq; CREATE SEQUENCE ns CACHE 1000;"
		bench_sql_functions
		local m
		for m in $(seq "$2"); do
			[ "$m" = "$1" ] && continue
			echo "CREATE SERVER node$m FOREIGN DATA WRAPPER distseq
				OPTIONS (hostaddr '127.0.0.1', port '$(node_port "$m")', dbname 'bench');"
			echo "CREATE USER MAPPING FOR CURRENT_USER SERVER node$m OPTIONS (user 'postgres');"
		done
	} | psql_node "$1" >/dev/null
}

# one round: every server draws $n values with query $2 at once; prints
# size,variant,round,values,ms,M values/s
round() {	# size variant query round
	local s pids=() t0
	t0=$(awk -v t="$(date +%s.%N)" -v k="$1" 'BEGIN { printf "%.3f", t + 0.2 + 0.05 * k }')
	for s in $(seq "$1"); do
		psql_node "$s" -At -F, -c "SELECT * FROM bench_span(\$q\$$3\$q\$, to_timestamp($t0))" > "$work/span.$s" &
		pids+=($!)
	done
	for s in "${pids[@]}"; do
		wait "$s" || { echo "a session failed: $3" >&2; exit 1; }
	done
	for s in $(seq "$1"); do cat "$work/span.$s"; done | awk -F, -v S="$1" -v k="$2" -v r="$4" 'NF == 3 {
		v += $1; if (st == "" || $2 < st) st = $2; if ($3 > e) e = $3 }
		END { printf "%d,%s,%d,%d,%.3f,%.4f\n", S, k, r, v, (e - st) * 1000, v / (e - st) / 1e6 }'
}

raw=$work/servers.raw
: > "$raw"
for size in $sizes; do
	bench_log "$size server(s): starting"
	for s in $(seq "$size"); do start_node "$s" "$size"; done
	for s in $(seq "$size"); do
		for m in $(seq "$size"); do
			[ "$m" = "$s" ] || psql_node "$s" -c "SELECT distseq_add_peer('node$m')" >/dev/null
		done
	done
	# windows large enough that no agent opens one while the clock runs
	psql_node 1 -c "SELECT distseq_create('orders', window_size => 100000000, min_open_windows => 2)" >/dev/null
	for s in $(seq "$size"); do
		psql_node "$s" -c "SELECT * FROM distseq_maintain()" >/dev/null
		members=$(psql_node "$s" -At -c "SELECT cardinality(members) FROM distseq.distseq_node")
		[ "$members" = "$size" ] || { echo "server $s sees $members members, not $size" >&2; exit 1; }
	done
	bench_log "$size server(s): $reps rounds of $n values per server"
	# round 0 warms up (first blocks and segments) and is dropped
	for r in $(seq 0 "$reps"); do
		k=$n
		[ "$r" -eq 0 ] && k=$(( (n + 9) / 10 ))
		dq="SELECT count(distseq_nextval('orders')) FROM generate_series(1, $k) g"
		nq="SELECT count(nextval('ns')) FROM generate_series(1, $k) g"
		if [ $((r % 2)) -eq 0 ]; then
			round "$size" distseq "$dq" "$r" >> "$raw"
			round "$size" native "$nq" "$r" >> "$raw"
		else
			round "$size" native "$nq" "$r" >> "$raw"
			round "$size" distseq "$dq" "$r" >> "$raw"
		fi
	done
	# every value of the group came from its own server's windows, which
	# are pairwise disjoint
	for s in $(seq "$size"); do
		psql_node "$s" -At -F, -c "SELECT $s, window_start, window_end, next_hi FROM distseq.distseq_windows WHERE sequence_name = 'orders'"
	done | sort -t, -k2,2n > "$work/windows"
	for s in $(seq "$size"); do
		psql_node "$s" -At -F, -c "SELECT $s, values_issued FROM distseq_status WHERE sequence_name = 'orders'"
	done > "$work/issued"
	awk -F, 'FILENAME == ARGV[1] {
			if (FNR > 1 && $2 < top) { print "windows of servers " topn " and " $1 " overlap"; bad = 1 }
			top = $3; topn = $1; reserved[$1] += $4 - $2; next }
		$2 > reserved[$1] { print "server " $1 " issued " $2 " values, reserved " reserved[$1]; bad = 1 }
		END { exit bad }' "$work/windows" "$work/issued" >&2 || exit 1
	for s in $(seq "$size"); do
		bench_stop "n$s"
		rm -rf "$work/n$s" "$work/n$s.log"
	done
done

csv=$out/servers.csv
{
	echo "servers,variant,median_mvalues_per_s,rounds,x_native"
	awk -F, '$3 > 0 { print $1 "|" $2 "," $6 }' "$raw" | sort -t, -k1,1 -k2,2g | awk -F, '
		function flush() { if (c) med[key] = (c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2); cnt[key] = c }
		$1 != key { flush(); key = $1; c = 0 }
		{ v[++c] = $2 }
		END {
			flush()
			for (k in med) { split(k, p, "|"); if (p[2] == "distseq") {
				printf "%d,distseq,%.3f,%d,%.2f\n", p[1], med[k], cnt[k], med[k] / med[p[1] "|native"]
				printf "%d,native,%.3f,%d,1.00\n", p[1], med[p[1] "|native"], cnt[p[1] "|native"] } }
		}' | sort -t, -k1,1n -k2,2
} > "$csv"
if ! awk -F, 'NR > 1 && !($3 + 0 > 0) { bad = 1 } END { exit bad }' "$csv"; then
	echo "a group size measured nothing" >&2
	cat "$csv" >&2
	exit 1
fi

echo
echo "distseq with more servers, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores shared by all servers;" \
	"one session per server drawing $n values at once, total values / time, median of $reps interleaved rounds"
awk -F, 'NR > 1 {
	if (!hdr++) printf "%8s %-34s %12s %10s\n", "servers", "variant", "M values/s", "x native"
	printf "%8s %-34s %12.2f %9sx\n", $1, ($2 == "distseq" ? "distseq_nextval, one group" : "nextval CACHE 1000, one per server"), $3, $5 }' "$csv"

if command -v gnuplot >/dev/null 2>&1; then
	awk -F, 'NR > 1 && $2 == "distseq" { d[$1] = $3 } NR > 1 && $2 == "native" { nv[$1] = $3 }
		END { for (s in d) print s, d[s], nv[s] }' "$csv" | sort -n > "$work/servers.dat"
	gnuplot <<PLOT
set terminal pngcairo size 800,480 noenhanced
set output '$out/servers.png'
set title 'Aggregate values/s, one session per server, $(nproc) cores shared'
set xlabel 'servers'
set ylabel 'M values/s'
set xtics ($(echo "$sizes" | sed 's/ /, /g'))
set yrange [0:*]
set key top left
plot '$work/servers.dat' using 1:2 with linespoints title 'distseq_nextval, one group', \
     '' using 1:3 with linespoints title 'nextval CACHE 1000, one per server'
PLOT
	[ $quick -eq 0 ] && cp "$out/servers.png" "$here/bench/servers.png"
fi
bench_log "done"
