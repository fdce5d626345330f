#!/usr/bin/env bash
# distseq benchmark: one command, its table and the four of issue 16.
#
#   bash bench/run.sh            # full run: all five tables (about 30 minutes on 2 cores)
#   bash bench/run.sh --quick    # smoke run for CI: the main table only (well under a minute)
#   bash bench/run.sh --quick --only "main many bounded far servers"   # all five, quick (about 3 minutes)
#   bash bench/run.sh --only "many bounded"    # some tables, full
#
# Tables (--only, in this order): main (this script's own: throughput and
# latency, below), then the four of issue 16, each by its own script with
# --no-build (and --quick, --pg, --keep when given here):
#   many     1. many sequences       bench/many.sh
#   bounded  2. bounded catalog      bench/bounded.sh (and bench/callgrind.sh --aged)
#   far      3. far-apart servers    bench/far.sh
#   servers  4. more servers         bench/servers.sh
# Each table is printed as it ends and written to bench/out/<table>.txt;
# bench/out/results.md gathers them, with the machine (cores, RAM,
# PostgreSQL, commit, date), the exact commands and their run times.
#
# Options (after --quick, if any, to override it):
#   --only "L"       tables to run                      (full all five, quick "main")
#   --many-opts "A"  more options for bench/many.sh, e.g. "--sequences 5000"
#   --bounded-opts "A", --far-opts "A", --servers-opts "A"   the same for the others
#   --duration S     seconds per pgbench run            (full 4, quick 1)
#   --rounds R       interleaved pgbench rounds         (full 5, quick 1)
#   --clients "L"    pgbench client counts              (full "1 8 32 64", quick "1 32")
#   --bulk-n N       values per one-session bulk query  (full 500000, quick 50000)
#   --dblink-n N     values per bulk query via dblink   (full 20000, quick 1000)
#   --bulk-reps R    interleaved bulk repetitions       (full 7, quick 3)
#   --group-n N      values per session, three servers  (full 5000000, quick 1000000)
#   --group-dblink-n N  the same via dblink             (full 20000, quick 5000)
#   --group-reps R   interleaved three-server rounds    (full 7, quick 3)
#   --keep           keep the work directory (servers' logs, pgbench scripts)
#   --no-build       use the installed extension, do not build and install it
#   --pg MAJOR       PostgreSQL to run on: 15 (default, Debian's) or one built
#                    by scripts/build-pg.sh
#
# Starts throwaway servers as the postgres OS user under /tmp: "A" with
# distseq preloaded and dblink, "B" holding a central native sequence that A
# reaches through dblink over one kept connection; then, with A stopped,
# three servers in one distseq group, drawing at the same time (against
# three native sequences and B's sequence via dblink).  Results go to
# bench/out/: results.csv (the table), bulk_raw.csv, pgbench_raw.csv and
# group_raw.csv (every run), tps.png (throughput against clients),
# status.txt (distseq_status after each phase), meta.txt.  A full run also
# copies the plot to bench/results.png.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"
# the command as given, for results.md (an argument with spaces in quotes)
run_args=$(for a in "$@"; do case $a in *" "*) printf ' "%s"' "$a" ;; *) printf ' %s' "$a" ;; esac; done)

quick=0
only=
many_opts=
bounded_opts=
far_opts=
servers_opts=
keep=0
build=1
pg_major=
duration=4
rounds=5
clients="1 8 32 64"
bulk_n=500000
dblink_n=20000
bulk_reps=7
group_n=5000000
group_dblink_n=20000
group_reps=7
while [ $# -gt 0 ]; do
	case $1 in
		--quick) quick=1; duration=1; rounds=1; clients="1 32"
			bulk_n=50000; dblink_n=1000; bulk_reps=3
			group_n=1000000; group_dblink_n=5000; group_reps=3 ;;
		--duration) duration=$2; shift ;;
		--rounds) rounds=$2; shift ;;
		--clients) clients=$2; shift ;;
		--bulk-n) bulk_n=$2; shift ;;
		--dblink-n) dblink_n=$2; shift ;;
		--bulk-reps) bulk_reps=$2; shift ;;
		--group-n) group_n=$2; shift ;;
		--group-dblink-n) group_dblink_n=$2; shift ;;
		--group-reps) group_reps=$2; shift ;;
		--only) only=$2; shift ;;
		--many-opts) many_opts=$2; shift ;;
		--bounded-opts) bounded_opts=$2; shift ;;
		--far-opts) far_opts=$2; shift ;;
		--servers-opts) servers_opts=$2; shift ;;
		--keep) keep=1 ;;
		--no-build) build=0 ;;
		--pg) pg_major=$2; shift ;;
		-h|--help) script_usage "$0"; exit 0 ;;
		*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
	shift
done
case " $clients " in *" 32 "*) s10_clients=32 ;; *) s10_clients=${clients##* } ;; esac
all_tables="main many bounded far servers"
if [ -z "$only" ]; then
	if [ $quick -eq 1 ]; then only=main; else only=$all_tables; fi
fi
for t in $only; do
	case " $all_tables " in *" $t "*) ;; *) echo "--only: unknown table $t (tables: $all_tables)" >&2; exit 2 ;; esac
done
# the selected tables, in the order of all_tables
tables=$(for t in $all_tables; do case " $only " in *" $t "*) echo "$t" ;; esac; done | xargs)
has_table() { case " $tables " in *" $1 "*) return 0 ;; esac; return 1; }

bench_clock
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo none)$(git -C "$here" diff --quiet HEAD -- src 2>/dev/null || echo ' + uncommitted changes in src')

# ---------------------------------------------------------------- setup
bench_prepare $build "$pg_major"
bench_cfloor_install "$here" || exit 1
if ! command -v gnuplot >/dev/null 2>&1; then
	bench_log "installing gnuplot-nox"
	if [ "$(id -u)" -eq 0 ]; then
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox; } >/dev/null ||
			echo "warning: could not install gnuplot-nox; no plot" >&2
	else
		echo "warning: gnuplot missing and not root; no plot" >&2
	fi
fi
out=$here/bench/out
mkdir -p "$out"
rm -f "$out"/results.md "$out"/tables.meta

# ------------------------------------------- the four tables of issue 16
# Runs bench/<table>.sh, printing its table as it goes, into
# bench/out/<table>.txt; notes the command and its run time
run_table() {	# table
	local opts t0 cmd
	case $1 in
		many) opts=$many_opts ;;
		bounded) opts=$bounded_opts ;;
		far) opts=$far_opts ;;
		servers) opts=$servers_opts ;;
	esac
	local common=
	[ $quick -eq 0 ] || common=--quick
	cmd="bash bench/$1.sh${common:+ $common}${pg_major:+ --pg $pg_major}${opts:+ $opts}"
	bench_log "table $1: $cmd --no-build"
	[ $keep -eq 0 ] || common="$common --keep"
	t0=$(date +%s)
	# shellcheck disable=SC2086	# options, one word each
	bash "$here/bench/$1.sh" $common --no-build ${pg_major:+--pg "$pg_major"} $opts | tee "$out/$1.txt"
	echo "$1|$cmd|$(( $(date +%s) - t0 ))" >> "$out/tables.meta"
}
# bench/out/results.md: the machine, then each table run, with its command
write_results() {
	local t cmd secs
	{
		echo "# distseq benchmarks"
		echo
		echo "Machine: $(nproc) cores, $(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM," \
			"$("$PGBIN/postgres" --version | sed 's/^postgres (PostgreSQL) /PostgreSQL /'), commit $commit, $(date -u '+%Y-%m-%d %H:%M UTC');" \
			"load average before the run: $load_start (other work on the machine skews the timings)."
		echo
		echo "Command: \`bash bench/run.sh$run_args\`, $(( $(date +%s) - bench_t0 )) s in all."
		while IFS='|' read -r t cmd secs; do
			echo
			case $t in
				main) echo "## Throughput and latency (bench/run.sh)" ;;
				many) echo "## 1. Many sequences (bench/many.sh)" ;;
				bounded) echo "## 2. Bounded catalog (bench/bounded.sh)" ;;
				far) echo "## 3. Far-apart servers (bench/far.sh)" ;;
				servers) echo "## 4. More servers (bench/servers.sh)" ;;
			esac
			echo
			echo "\`$cmd\` ($secs s)"
			echo
			echo '```text'
			sed '1{/^$/d}' "$out/$t.txt"
			echo '```'
		done < "$out/tables.meta"
	} > "$out/results.md"
	bench_log "tables in $out/results.md"
}
run_tables() {
	local t
	for t in $tables; do
		[ "$t" = main ] || run_table "$t"
	done
	write_results
}
if ! has_table main; then
	run_tables
	exit 0
fi

if [ ! -f "$("$PG_CONFIG" --sharedir)/extension/dblink.control" ]; then
	echo "dblink is missing (it ships with postgresql-15 on Debian)" >&2
	exit 1
fi

rm -f "$out"/results.csv "$out"/bulk_raw.csv "$out"/pgbench_raw.csv "$out"/group_raw.csv "$out"/status.txt "$out"/meta.txt "$out"/tps.png "$out"/tps.dat "$out"/paired.txt

bench_workdir dsbench scripts logs lat
port_a=54441
port_b=54442

trap bench_cleanup EXIT

start_server() {	# dir port database extra-conf
	bench_initdb "$1" "port = $2
listen_addresses = ''
max_connections = 100
shared_buffers = 256MB
max_wal_size = 4GB
checkpoint_timeout = 30min
$4"
	bench_start "$1"
	as_pg "$PGBIN/createdb" -h "$work" -p "$2" "$3"
}
psql_at() {	# port database psql-args...
	local port=$1 db=$2
	shift 2
	as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$port" -d "$db" "$@"
}
psql_a() { psql_at $port_a bench "$@"; }
psql_b() { psql_at $port_b central "$@"; }

bench_log "starting servers in $work"
start_server a $port_a bench "shared_preload_libraries = 'distseq'"
# B also listens on loopback TCP: the three servers of the group phase reach it there
start_server b $port_b central "listen_addresses = '127.0.0.1'"

psql_b -c "CREATE SEQUENCE s"
{
	cat <<'SQL'
CREATE EXTENSION distseq;
CREATE EXTENSION dblink;
SELECT distseq_create('s', block_size => 100);
SELECT distseq_create('s2', block_size => 100);
SELECT distseq_create('s10', block_size => 10);
CREATE SEQUENCE ns_cache CACHE 1000;
CREATE SEQUENCE ns_nocache;
CREATE TABLE t_distseq (id bigint PRIMARY KEY DEFAULT distseq_nextval('s2'), v int);
CREATE TABLE t_serial (id bigserial PRIMARY KEY, v int);
SQL
	bench_cfloor_sql
	bench_sql_functions
} | psql_a >/dev/null

status_snapshot() {	# phase [psql command, psql_a by default]
	local phase=$1
	shift
	[ $# -gt 0 ] || set -- psql_a
	"$@" -At -c "SELECT '$phase', sequence_name, block_size, segment_size, refills, waits,
		round(wait_time_ms::numeric, 1), values_issued FROM distseq_status ORDER BY 2" >> "$out/status.txt"
}

# ------------------------------------------------------ one-session bulk
# A query that draws N values of a sequence and returns count(*) = N.  The
# dblink one (over connection 'c') must refer to g: without it the planner
# calls dblink() once and rescans its result.
draw_query() {	# distseq|nextval|dblink sequence N
	case $1 in
		distseq) echo "SELECT count(distseq_nextval('$2')) FROM generate_series(1, $3) g" ;;
		nextval) echo "SELECT count(nextval('$2')) FROM generate_series(1, $3) g" ;;
		dblink) echo "SELECT count(*) FROM generate_series(1, $3) g, LATERAL dblink('c', 'select nextval(''$2'')' || left('', g::int)) AS t(v bigint)" ;;
	esac
}

# key|label|N|query
bulk_variants() {
	local n=$1 dn=$2
	cat <<VARS
distseq|distseq_nextval('s')|$n|$(draw_query distseq s "$n")
ns_cache|nextval('ns_cache') CACHE 1000|$n|$(draw_query nextval ns_cache "$n")
ns_nocache|nextval('ns_nocache')|$n|$(draw_query nextval ns_nocache "$n")
dblink|central nextval() via dblink|$dn|$(draw_query dblink s "$dn")
int8pl|int8pl(g 1) C call floor|$n|SELECT count(int8pl(g, 1)) FROM generate_series(1, $n) g
floor|g (row floor)|$n|SELECT count(g) FROM generate_series(1, $n) g
VARS
}

# The variants of every round, in the order they run, as "round|variant":
# round 0, with N/10, warms up (caches, the first blocks, the refill worker)
# and is dropped; the order rotates each round so no variant always runs first.
rounds() {	# reps N dblink-N variants-function
	local r i nv vs
	for r in $(seq 0 "$1"); do
		if [ "$r" -eq 0 ]; then
			mapfile -t vs < <("$4" $(( ($2 + 9) / 10 )) $(( ($3 + 9) / 10 )))
		else
			mapfile -t vs < <("$4" "$2" "$3")
		fi
		nv=${#vs[@]}
		for i in $(seq 0 $((nv - 1))); do
			echo "$r|${vs[$(( (i + r) % nv ))]}"
		done
	done
}

bench_log "bulk: $bulk_reps interleaved rounds, N=$bulk_n (dblink N=$dblink_n)"
# How far sequence $1 on B has moved; check_central fails unless it moved by
# at least the calls the dblink queries should have made since.
central_value() { psql_b -At -c "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM $1"; }
check_central() {	# sequence value-before expected-calls
	local moved=$(( $(central_value "$1") - $2 ))
	if [ "$moved" -lt "$3" ]; then
		echo "dblink variant made $moved calls to B's sequence $1, expected $3" >&2
		exit 1
	fi
}
central_before=$(central_value s)
{
	echo '\pset format unaligned'
	echo '\pset tuples_only on'
	echo '\pset fieldsep |'
	echo "SELECT dblink_connect('c', 'host=$work port=$port_b dbname=central');"
	while IFS='|' read -r r key label n q; do
		printf "SELECT %d, '%s', %d, bench_ms(\$q\$%s\$q\$);\n" "$r" "$key" "$n" "$q"
	done < <(rounds "$bulk_reps" "$bulk_n" "$dblink_n" bulk_variants)
} > "$work/scripts/bulk.sql"
chown -R postgres "$work/scripts" 2>/dev/null || true
psql_a -f "$work/scripts/bulk.sql" | grep -v '^OK$' | awk -F'|' -v OFS=, '$1 > 0 {
	printf "%d,%s,%d,%.3f,%.4f\n", $1, $2, $3, $4, $3 / $4 / 1000 }' > "$work/bulk.raw"
{ echo "round,variant,n,ms,mvalues_per_s"; cat "$work/bulk.raw"; } > "$out/bulk_raw.csv"
check_central s "$central_before" $(( (dblink_n + 9) / 10 + bulk_reps * dblink_n ))
status_snapshot bulk

# median M values/s per variant, in the order of bulk_variants
median_by() {	# reads "key,value" lines sorted by key then value; prints key,median,count
	awk -F, '
	function flush() { if (cnt) printf "%s,%s,%d\n", key, (cnt % 2 ? v[(cnt + 1) / 2] : (v[cnt / 2] + v[cnt / 2 + 1]) / 2), cnt }
	$1 != key { flush(); key = $1; cnt = 0 }
	{ v[++cnt] = $2 }
	END { flush() }'
}
awk -F, '{ print $2 "," $5 }' "$work/bulk.raw" | sort -t, -k1,1 -k2,2g | median_by > "$work/bulk.med"

# ------------------------------------------------------------- pgbench
# name|label|sql
pg_variants() {
	cat <<'EOF'
select1|SELECT 1|SELECT 1;
cfloor|SELECT bench_cfloor('s') empty C fn|SELECT bench_cfloor('s');
distseq|SELECT distseq_nextval('s')|SELECT distseq_nextval('s');
ns_cache|SELECT nextval('ns_cache') CACHE 1000|SELECT nextval('ns_cache');
ns_nocache|SELECT nextval('ns_nocache')|SELECT nextval('ns_nocache');
ins_distseq|INSERT t_distseq (distseq default)|INSERT INTO t_distseq (v) VALUES (1);
ins_serial|INSERT t_serial (bigserial)|INSERT INTO t_serial (v) VALUES (1);
distseq_b10|SELECT distseq_nextval('s10') block 10|SELECT distseq_nextval('s10');
EOF
}
while IFS='|' read -r name label sql; do
	echo "$sql" > "$work/scripts/$name.sql"
done < <(pg_variants)
chown -R postgres "$work/scripts" 2>/dev/null || true

# Did a pgbench run (its output, its tps) run transactions at all?  Under
# heavy load a 1-second run can end with none, and print "tps = 0" or NaN.
pgbench_ran() {
	local xacts
	xacts=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$1")
	[ -n "$xacts" ] && [ "$xacts" -gt 0 ] && awk -v t="$2" 'BEGIN { exit !(t ~ /^[0-9.]+$/ && t + 0 > 0) }'
}

: > "$work/pgbench.raw"
run_pgbench() {	# round variant clients
	local r=$1 v=$2 c=$3 j=2 prefix="$work/logs/$2_$3_$1" tps
	[ "$c" -lt 2 ] && j=1
	psql_a -c CHECKPOINT
	if ! as_pg "$PGBIN/pgbench" -n -M prepared -T "$duration" -c "$c" -j "$j" \
		-l --log-prefix="$prefix" -f "$work/scripts/$v.sql" \
		-h "$work" -p $port_a bench > "$work/pgbench.out" 2>&1; then
		cat "$work/pgbench.out" >&2
		echo "pgbench failed: $v at $c clients" >&2
		exit 1
	fi
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$work/pgbench.out")
	pgbench_ran "$work/pgbench.out" "$tps" || {
		cat "$work/pgbench.out" >&2
		echo "pgbench ran no transaction: $v at $c clients (an overloaded machine?)" >&2
		exit 1
	}
	# keep only the latencies (us), one per transaction
	cat "$prefix".* | awk '{ print $3 }' >> "$work/lat/${v}_$c"
	rm -f "$prefix".*
	echo "$r,$v,$c,$tps,$(cut -d' ' -f1 /proc/loadavg)" >> "$work/pgbench.raw"
}

nrun=0
for c in $clients; do
	nrun=$((nrun + 7)); [ "$c" = "$s10_clients" ] && nrun=$((nrun + 1))
done
bench_log "pgbench: $rounds round(s) x $nrun runs of ${duration}s (clients: $clients)"
for r in $(seq 1 "$rounds"); do
	for c in $clients; do
		vs=(select1 distseq cfloor ns_cache ns_nocache ins_distseq ins_serial)
		[ "$c" = "$s10_clients" ] && vs+=(distseq_b10)
		nv=${#vs[@]}
		for i in $(seq 0 $((nv - 1))); do
			run_pgbench "$r" "${vs[$(( (i + r) % nv ))]}" "$c"
		done
	done
	bench_log "pgbench round $r done"
done
{ echo "round,variant,clients,tps,loadavg1_after"; cat "$work/pgbench.raw"; } > "$out/pgbench_raw.csv"
status_snapshot pgbench

# ------------------------------------------ three servers, one sequence
# Servers 1, 2 and 3 listen on loopback TCP, name each other as foreign
# servers of wrapper distseq and form one group that shares 'orders'.  In
# each round, every variant runs one session per server at the same moment:
# the sessions connect, then bench_span waits for a start time shared by the
# three.  The aggregate rate is all values over the time from the first
# start to the last end.  Against: a native sequence on each server, and B's
# sequence 'orders' reached from each server through dblink, over a
# connection opened before the start.
nodes="1 2 3"
node_port() { echo $((port_b + $1)); }
psql_node() {	# node psql-args...
	local n=$1
	shift
	psql_at "$(node_port "$n")" bench "$@"
}
others() { local m; for m in $nodes; do [ "$m" = "$1" ] || echo "$m"; done; }
node_windows() {	# node: "node,window_start,window_end,next_hi" per window of 'orders'
	psql_node "$1" -At -F, -c "SELECT $1, window_start, window_end, next_hi
		FROM distseq.distseq_windows WHERE sequence_name = 'orders'"
}
# Runs psql_node N args... on every server at once; N's output goes to $work/at_once.N.
at_once() {
	local n pids=()
	for n in $nodes; do
		psql_node "$n" "$@" > "$work/at_once.$n" &
		pids+=($!)
	done
	for n in "${pids[@]}"; do
		wait "$n" || { echo "a session failed: $*" >&2; exit 1; }
	done
}

bench_log "group: A stops; three servers start and share 'orders'"
bench_stop a
for n in $nodes; do
	start_server "n$n" "$(node_port "$n")" bench "shared_preload_libraries = 'distseq'
listen_addresses = '127.0.0.1'"
	{
		echo "CREATE EXTENSION distseq; CREATE EXTENSION dblink; CREATE SEQUENCE ns_cache CACHE 1000;"
		bench_sql_functions
		for m in $(others "$n"); do
			echo "CREATE SERVER node$m FOREIGN DATA WRAPPER distseq
				OPTIONS (host '127.0.0.1', port '$(node_port "$m")', dbname 'bench');"
			echo "CREATE USER MAPPING FOR CURRENT_USER SERVER node$m OPTIONS (user 'postgres');"
		done
	} | psql_node "$n" >/dev/null
done
for n in $nodes; do
	for m in $(others "$n"); do
		psql_node "$n" -c "SELECT distseq_add_peer('node$m')" >/dev/null
	done
done
# windows large enough that the agent opens none while the clock runs: the
# rounds measure the hot path (blocks, segments, refills), not window creation
group_window=100000000
psql_node 1 -c "SELECT distseq_create('orders', window_size => $group_window, min_open_windows => 2)" >/dev/null
for n in $nodes; do
	psql_node "$n" -c "SELECT * FROM distseq_maintain()" >/dev/null
	members=$(psql_node "$n" -At -c "SELECT cardinality(members) FROM distseq.distseq_node")
	[ "$members" = 3 ] || { echo "server $n sees $members members, not 3" >&2; exit 1; }
done
psql_b -c "CREATE SEQUENCE orders"

# key|label|N per session|statement before the start|query
group_variants() {
	local n=$1 dn=$2
	cat <<VARS
distseq|distseq_nextval('orders') one group|$n||$(draw_query distseq orders "$n")
ns_cache|nextval CACHE 1000 one per server|$n||$(draw_query nextval ns_cache "$n")
dblink|central nextval() on B via dblink|$dn|SELECT dblink_connect('c', 'host=127.0.0.1 port=$port_b dbname=central')|$(draw_query dblink orders "$dn")
VARS
}

bench_log "group: $group_reps interleaved rounds, N=$group_n per session (dblink N=$group_dblink_n)"
windows_before=$(for n in $nodes; do node_windows "$n"; done | wc -l)
central_before=$(central_value orders)
: > "$work/group.raw"
while IFS='|' read -r -u 3 r key label n setup q; do
	# 0.3 s for the three psql sessions to connect
	t0=$(awk -v t="$(date +%s.%N)" 'BEGIN { printf "%.3f", t + 0.3 }')
	at_once -At -F, ${setup:+-c "$setup"} -c "SELECT * FROM bench_span(\$q\$$q\$q\$, to_timestamp($t0))"
	# round,variant,values,ms,M values/s,ms between the first and the last start
	cat "$work"/at_once.* | awk -F, -v r="$r" -v k="$key" 'NF == 3 {
		v += $1; if (s == "" || $2 < s) s = $2; if ($2 > ls) ls = $2; if ($3 > e) e = $3 }
		END { printf "%d,%s,%d,%.3f,%.6f,%.1f\n", r, k, v, (e - s) * 1000, v / (e - s) / 1e6, (ls - s) * 1000 }' >> "$work/group.raw"
done 3< <(rounds "$group_reps" "$group_n" "$group_dblink_n" group_variants)
awk -F, '$1 > 0' "$work/group.raw" > "$work/group.rounds"
{ echo "round,variant,values,ms,mvalues_per_s,start_spread_ms"; cat "$work/group.rounds"; } > "$out/group_raw.csv"
check_central orders "$central_before" $(( 3 * ( (group_dblink_n + 9) / 10 + group_reps * group_dblink_n ) ))
for n in $nodes; do status_snapshot "group/$n" psql_node "$n"; done

# Uniqueness, cheaply: the windows of the three servers are pairwise
# disjoint and no server issued more values than it reserved in its own
# windows (this covers every value of the timed rounds); then one more
# concurrent draw, of check_n values per server, kept: all distinct, each
# inside the reserved part of its own server's windows.
# Windows are read last: a refill only moves next_hi up.
check_n=100000
at_once -At -c "SELECT distseq_nextval('orders') FROM generate_series(1, $check_n)"
for n in $nodes; do
	psql_node "$n" -At -F, -c "SELECT $n, values_issued FROM distseq_status WHERE sequence_name = 'orders'"
done > "$work/group.issued"
for n in $nodes; do node_windows "$n"; done | sort -t, -k2,2n > "$work/group.windows"
for n in $nodes; do awk -v n="$n" '{ print n "," $1 }' "$work/at_once.$n"; done > "$work/group.drawn"
if ! awk -F, -v want=$((3 * check_n)) -v nw="$(wc -l < "$work/group.windows")" -v before="$windows_before" '
	FILENAME == ARGV[1] {
		if (FNR > 1 && $2 < top) bad = bad sprintf(" windows of servers %s and %s overlap;", topn, $1)
		top = $3; topn = $1; node[FNR] = $1; lo[FNR] = $2; hi[FNR] = $4; reserved[$1] += $4 - $2
		next
	}
	FILENAME == ARGV[2] {
		if ($2 > reserved[$1]) bad = bad sprintf(" server %s issued %d values, reserved %d;", $1, $2, reserved[$1])
		next
	}
	{
		total++
		if (seen[$2]++) dup++
		inside = 0
		for (i = 1; i <= nw; i++) if (node[i] == $1 && $2 >= lo[i] && $2 < hi[i]) inside = 1
		if (!inside) outside++
	}
	END {
		if (total != want) bad = bad sprintf(" the check drew %d values, not %d;", total, want)
		if (dup) bad = bad sprintf(" %d values drawn twice;", dup)
		if (outside) bad = bad sprintf(" %d values outside their server'\''s windows;", outside)
		if (bad != "") { print "uniqueness check FAILED:" bad; exit 1 }
		printf "uniqueness: the %d windows of the 3 servers are pairwise disjoint and each server issued (values_issued) no more than it reserved in them;\n", nw
		printf "  a concurrent draw of 3 x %d values afterwards: all distinct, each inside its own server'\''s windows\n", want / 3
		printf "windows: window_size %d, min_open_windows 2, opened before the rounds; %d more opened during them\n", '"$group_window"', nw - before
	}' "$work/group.windows" "$work/group.issued" "$work/group.drawn" > "$work/group.check"; then
	cat "$work/group.check" >&2
	exit 1
fi
awk -F, '{ if ($6 > spread) spread = $6 } END {
	printf "the sessions of a round started at most %.1f ms apart (a late start lengthens the round)\n", spread }' \
	"$work/group.rounds" >> "$work/group.check"
awk -F, '{ print $2 "," $5 }' "$work/group.rounds" | sort -t, -k1,1 -k2,2g | median_by > "$work/group.med"


# ------------------------------------------------------------- the table
awk -F, '{ print $2 "|" $3 "," $4 }' "$work/pgbench.raw" | sort -t, -k1,1 -k2,2g |
	median_by > "$work/pgbench.med"
pg_tps() { awk -F, -v k="$1|$2" '$1 == k { print $2 }' "$work/pgbench.med"; }
median_of() { awk -F, -v k="$2" '$1 == k { print $2 }' "$1"; }	# median-file key
# One row per variant, rates in M values/s and their ratio to variant ref-key.
rate_rows() {	# section clients median-file ref-key ref-name < "key|label|N|..." lines
	local ref key name n rest rate runs x
	ref=$(median_of "$3" "$4")
	while IFS='|' read -r key name n rest; do
		read -r rate runs < <(awk -F, -v k="$key" '$1 == k { print $2, $3 }' "$3")
		x=$(awk -v a="$rate" -v b="$ref" 'BEGIN { printf "%.2f", a / b }')
		echo "$1,\"$name\",$2,$n,$runs,$rate,Mvalues/s,$x,$5,,,,"
	done
}

csv=$out/results.csv
echo "section,variant,clients,n_or_seconds,runs,rate,unit,x_ref,ref,p50_ms,p99_ms,p999_ms,p999_x_select1" > "$csv"
bulk_variants "$bulk_n" "$dblink_n" | rate_rows bulk 1 "$work/bulk.med" ns_cache "nextval CACHE 1000" >> "$csv"

declare -A labels
while IFS='|' read -r name label sql; do labels[$name]=$label; done < <(pg_variants)
for c in $clients; do
	vs=(select1 cfloor distseq ns_cache ns_nocache ins_distseq ins_serial)
	[ "$c" = "$s10_clients" ] && vs+=(distseq_b10)
	read -r s1_p50 s1_p99 s1_p999 < <(bench_percentiles "$work/lat/select1_$c")
	for v in "${vs[@]}"; do
		case $v in
			ins_distseq|ins_serial) ref=ins_serial; refname="INSERT bigserial" ;;
			distseq_b10) ref=distseq; refname="distseq block 100" ;;
			*) ref=ns_cache; refname="nextval CACHE 1000" ;;
		esac
		tps=$(pg_tps "$v" "$c")
		runs=$(awk -F, -v k="$v|$c" '$1 == k { print $3 }' "$work/pgbench.med")
		read -r p50 p99 p999 < <(bench_percentiles "$work/lat/${v}_$c")
		x=$(awk -v a="$tps" -v b="$(pg_tps $ref "$c")" 'BEGIN { printf "%.2f", a / b }')
		xs=$(awk -v a="$p999" -v b="$s1_p999" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
		echo "pgbench,\"${labels[$v]}\",$c,$duration,$runs,$tps,tps,$x,$refname,$p50,$p99,$p999,$xs" >> "$csv"
	done
done
group_variants "$group_n" "$group_dblink_n" |
	rate_rows 3servers 3 "$work/group.med" ns_cache "3 native CACHE 1000" >> "$csv"

# A figure that is missing, zero or not a number means a phase measured
# nothing: the run fails rather than print it
if ! awk -F, 'NR > 1 && !($6 ~ /^[0-9.e+-]+$/ && $6 + 0 > 0) {
		gsub(/"/, "", $2); print "no throughput measured: " $1 " " $2 " at " $3 " clients (" $6 ")"; bad = 1 }
		END { exit bad }' "$csv" >&2; then
	exit 1
fi

# print it, and keep it for results.md
{
echo
echo "distseq benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $( [ $quick -eq 1 ] && echo quick || echo full) run;" \
	"bulk: median of $bulk_reps interleaved runs; pgbench: -M prepared -T $duration x $rounds round(s), median tps;" \
	"3servers: one session on each of 3 servers at once, total values / time, median of $group_reps interleaved rounds"
echo "commit $commit; load average before the run: $load_start (above ~0.5, other work shares the machine and skews the numbers)"
awk -F, 'NR > 1 {
	gsub(/"/, "", $2)
	if ($7 == "tps") rate = sprintf("%.0f tps", $6); else rate = sprintf($6 < 0.1 ? "%.4f M/s" : "%.2f M/s", $6)
	if ($1 != sec) { if (sec != "") print ""; sec = $1 }
	printf "%-8s %-40s %7s %14s %6sx %-19s %8s %8s %9s %8s\n", $1, $2, $3, rate, $8, $9, $10, $11, $12, ($13 == "" ? "" : $13 "x")
}' "$csv" | {
	printf "%-8s %-40s %7s %14s %7s %-19s %8s %8s %9s %8s\n" section variant clients throughput "x ref" ref \
		"p50 ms" "p99 ms" "p99.9 ms" "p99.9/S1"
	cat
}
echo
awk -F'|' '$5 > 0 { printf "distseq_status after %-8s %-6s block %3d, segment now %6d: %6d refills, %6d waits (%.0f ms waiting), %d values issued\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$out/status.txt"
echo "(pgbench logs latencies with a clock read once per pass over a client: answers that arrive within"
echo " the pass are logged as 0 us, so p50 is a lower bound; p99 and p99.9 are not affected that way)"
echo
cat "$work/group.check"
# issue #5: >= 100 x the central sequence, and within 10% of (or above) three native ones
awk -v d="$(median_of "$work/group.med" distseq)" -v c="$(median_of "$work/group.med" dblink)" \
	-v nat="$(median_of "$work/group.med" ns_cache)" 'BEGIN {
	printf "3 servers at once: distseq / central sequence via dblink = %.0fx (issue #5 asks >= 100x: %s)\n",
		d / c, (d / c >= 100 ? "met" : "NOT met")
	printf "                   distseq / three native sequences     = %.2fx (issue #5 asks >= 0.90x: %s)\n",
		d / nat, (d / nat >= 0.9 ? "met" : "NOT met")
}' | tee "$work/group.ratios"

# SELECT distseq_nextval against the two floors, round by round: the variants
# of a round run one after the other, so a round's ratio is less exposed to
# the machine's drift than the ratio of medians
echo
echo "per-round tps ratios, median (min-max) of $rounds round(s):"
awk -F, -v clients="$clients" '
{ tps[$1 "," $2 "," $3] = $4; seen[$1] = 1 }
END {
	np = split("distseq select1|distseq cfloor|cfloor select1", pairs, "|")
	printf "%-8s %-24s %-24s %-24s\n", "clients", "distseq / SELECT 1", "distseq / empty C fn", "empty C fn / SELECT 1"
	nc = split(clients, cs, " ")
	for (i = 1; i <= nc; i++) {
		line = sprintf("%-8s", cs[i])
		for (p = 1; p <= np; p++) {
			split(pairs[p], ab, " ")
			k = 0
			for (r in seen) {
				a = tps[r "," ab[1] "," cs[i]]; b = tps[r "," ab[2] "," cs[i]]
				if (a > 0 && b > 0) v[++k] = a / b
			}
			for (x = 2; x <= k; x++) {
				t = v[x]
				for (y = x - 1; y >= 1 && v[y] > t; y--) v[y + 1] = v[y]
				v[y + 1] = t
			}
			med = (k % 2) ? v[(k + 1) / 2] : (v[k / 2] + v[k / 2 + 1]) / 2
			line = line sprintf(" %-24s", sprintf("%.2f (%.2f-%.2f)", med, v[1], v[k]))
		}
		print line
	}
}' "$work/pgbench.raw" | tee "$out/paired.txt"
} > "$out/main.txt"
cat "$out/main.txt"

# ---------------------------------------------------------------- plot
{
	printf "clients"
	for v in select1 cfloor distseq ns_cache ns_nocache ins_distseq ins_serial; do printf ' "%s"' "${labels[$v]}"; done
	echo
	for c in $clients; do
		printf "%s" "$c"
		for v in select1 cfloor distseq ns_cache ns_nocache ins_distseq ins_serial; do printf " %s" "$(pg_tps $v "$c")"; done
		echo
	done
} > "$out/tps.dat"
if command -v gnuplot >/dev/null 2>&1; then
	gnuplot <<GP
set terminal pngcairo size 900,650 noenhanced font ",10"
set output "$out/tps.png"
set title "distseq: pgbench -M prepared throughput ($(nproc) cores, $(date -u +%Y-%m-%d))"
set xlabel "clients"
set ylabel "transactions per second"
set logscale x 2
set xrange [0.8:80]
set xtics ($(echo $clients | sed 's/ /, /g'))
set grid
set key below
set yrange [0:*]
plot for [i=2:8] "$out/tps.dat" using 1:i with linespoints lw 2 pt 7 title columnheader(i)
GP
	if [ $quick -eq 0 ]; then cp "$out/tps.png" "$here/bench/results.png"; fi
fi

{
	echo "date: $(date -u)"
	echo "commit: $commit"
	echo "mode: $( [ $quick -eq 1 ] && echo quick || echo full) duration=$duration rounds=$rounds clients=\"$clients\" bulk_n=$bulk_n dblink_n=$dblink_n bulk_reps=$bulk_reps group_n=$group_n group_dblink_n=$group_dblink_n group_reps=$group_reps"
	sed 's/^ *//' "$work/group.ratios"
	echo "machine: $(nproc) cores, $(uname -r)"
	echo "server: $("$PGBIN/postgres" --version)"
	echo "runtime_s: $(( $(date +%s) - bench_t0 ))"
	echo "loadavg: start $load_start, end $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/meta.txt"
main_s=$(( $(date +%s) - bench_t0 ))
echo "main|bash bench/run.sh$( [ $quick -eq 1 ] && echo " --quick") --only main${pg_major:+ --pg $pg_major}|$main_s" >> "$out/tables.meta"
bench_log "main table done in ${main_s}s; results in $out"

# the main table's servers stop before the others start theirs
for d in "$work"/*/; do bench_stop "$(basename "$d")"; done
run_tables
bench_log "done in $(( $(date +%s) - bench_t0 ))s"
