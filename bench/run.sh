#!/usr/bin/env bash
# distseq benchmark: one command, one table.
#
#   bash bench/run.sh            # full run (about 11 minutes on 2 cores)
#   bash bench/run.sh --quick    # smoke run for CI (well under a minute)
#
# Options (after --quick, if any, to override it):
#   --duration S     seconds per pgbench run            (full 4, quick 1)
#   --rounds R       interleaved pgbench rounds         (full 5, quick 1)
#   --clients "L"    pgbench client counts              (full "1 8 32 64", quick "1 32")
#   --bulk-n N       values per one-session bulk query  (full 500000, quick 50000)
#   --dblink-n N     values per bulk query via dblink   (full 20000, quick 1000)
#   --bulk-reps R    interleaved bulk repetitions       (full 7, quick 3)
#   --keep           keep the work directory (servers' logs, pgbench scripts)
#   --no-build       use the installed extension, do not build and install it
#
# Starts two throwaway servers as the postgres OS user under /tmp: "A" with
# distseq preloaded and dblink, "B" holding a central native sequence that A
# reaches through dblink over one kept connection.  Results go to bench/out/:
# results.csv (the table), bulk_raw.csv and pgbench_raw.csv (every run),
# tps.png (throughput against clients), status.txt (distseq_status after
# each phase), meta.txt.  A full run also copies the plot to bench/results.png.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

quick=0
keep=0
build=1
duration=4
rounds=5
clients="1 8 32 64"
bulk_n=500000
dblink_n=20000
bulk_reps=7
while [ $# -gt 0 ]; do
	case $1 in
		--quick) quick=1; duration=1; rounds=1; clients="1 32"
			bulk_n=50000; dblink_n=1000; bulk_reps=3 ;;
		--duration) duration=$2; shift ;;
		--rounds) rounds=$2; shift ;;
		--clients) clients=$2; shift ;;
		--bulk-n) bulk_n=$2; shift ;;
		--dblink-n) dblink_n=$2; shift ;;
		--bulk-reps) bulk_reps=$2; shift ;;
		--keep) keep=1 ;;
		--no-build) build=0 ;;
		-h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
		*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
	shift
done
case " $clients " in *" 32 "*) s10_clients=32 ;; *) s10_clients=${clients##* } ;; esac

t_start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo none)$(git -C "$here" diff --quiet HEAD -- src 2>/dev/null || echo ' + uncommitted changes in src')
log() { echo "== [$(( $(date +%s) - t_start ))s] $*" >&2; }

# ---------------------------------------------------------------- setup
distseq_install_packages
if [ $build -eq 1 ]; then
	distseq_build_install "$here" || { echo "build of $here failed" >&2; exit 1; }
fi
if ! command -v gnuplot >/dev/null 2>&1; then
	log "installing gnuplot-nox"
	if [ "$(id -u)" -eq 0 ]; then
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q gnuplot-nox; } >/dev/null ||
			echo "warning: could not install gnuplot-nox; no plot" >&2
	else
		echo "warning: gnuplot missing and not root; no plot" >&2
	fi
fi
if [ ! -f "$("$PG_CONFIG" --sharedir)/extension/dblink.control" ]; then
	echo "dblink is missing (it ships with postgresql-15 on Debian)" >&2
	exit 1
fi

out=$here/bench/out
mkdir -p "$out"
rm -f "$out"/results.csv "$out"/bulk_raw.csv "$out"/pgbench_raw.csv "$out"/status.txt "$out"/meta.txt "$out"/tps.png "$out"/tps.dat

work=$(mktemp -d /tmp/dsbench.XXXXXX)
chmod 755 "$work"
mkdir -p "$work/scripts" "$work/logs" "$work/lat"
if [ "$(id -u)" -eq 0 ]; then
	chown -R postgres "$work"
	as_pg() { runuser -u postgres -- env LC_ALL=C.UTF-8 "$@"; }
else
	as_pg() { env LC_ALL=C.UTF-8 "$@"; }
fi
port_a=54441
port_b=54442

cleanup() {
	for s in a b; do
		[ -f "$work/$s/postmaster.pid" ] &&
			as_pg "$PGBIN/pg_ctl" -D "$work/$s" -m fast stop >/dev/null 2>&1 || true
	done
	if [ $keep -eq 1 ]; then
		echo "work directory kept: $work" >&2
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

start_server() {	# dir port extra-conf
	as_pg "$PGBIN/initdb" -D "$work/$1" -A trust -E UTF8 >/dev/null
	cat >> "$work/$1/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$work'
port = $2
max_connections = 100
shared_buffers = 256MB
max_wal_size = 4GB
checkpoint_timeout = 30min
jit = off
$3
CONF
	as_pg "$PGBIN/pg_ctl" -D "$work/$1" -l "$work/$1.log" -w -t 120 start >/dev/null ||
		{ tail -20 "$work/$1.log" >&2; exit 1; }
}
psql_a() { as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p $port_a -d bench "$@"; }
psql_b() { as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p $port_b -d central "$@"; }

log "starting servers in $work"
start_server a $port_a "shared_preload_libraries = 'distseq'"
start_server b $port_b ""
as_pg "$PGBIN/createdb" -h "$work" -p $port_a bench
as_pg "$PGBIN/createdb" -h "$work" -p $port_b central

psql_b -c "CREATE SEQUENCE s"
psql_a >/dev/null <<'SQL'
CREATE EXTENSION distseq;
CREATE EXTENSION dblink;
SELECT distseq_create('s', block_size => 100);
SELECT distseq_create('s2', block_size => 100);
SELECT distseq_create('s10', block_size => 10);
CREATE SEQUENCE ns_cache CACHE 1000;
CREATE SEQUENCE ns_nocache;
CREATE TABLE t_distseq (id bigint PRIMARY KEY DEFAULT distseq_nextval('s2'), v int);
CREATE TABLE t_serial (id bigserial PRIMARY KEY, v int);
-- milliseconds the query takes, measured in the server
CREATE FUNCTION bench_ms(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz;
	n bigint;
BEGIN
	t0 := clock_timestamp();
	EXECUTE q INTO n;
	RETURN 1000 * extract(epoch FROM clock_timestamp() - t0);
END $$;
SQL

status_snapshot() {	# phase
	psql_a -At -c "SELECT '$1', sequence_name, block_size, segment_size, refills, waits,
		round(wait_time_ms::numeric, 1), values_issued FROM distseq_status ORDER BY 2" >> "$out/status.txt"
}

# ------------------------------------------------------ one-session bulk
# key|label|N|query; the query returns count(*) = N.  The dblink variant must
# refer to g: without it the planner calls dblink() once and rescans its result.
bulk_variants() {
	local n=$1 dn=$2
	cat <<VARS
distseq|distseq_nextval('s')|$n|SELECT count(distseq_nextval('s')) FROM generate_series(1, $n) g
ns_cache|nextval('ns_cache') CACHE 1000|$n|SELECT count(nextval('ns_cache')) FROM generate_series(1, $n) g
ns_nocache|nextval('ns_nocache')|$n|SELECT count(nextval('ns_nocache')) FROM generate_series(1, $n) g
dblink|central nextval() via dblink|$dn|SELECT count(*) FROM generate_series(1, $dn) g, LATERAL dblink('c', 'select nextval(''s'')' || left('', g::int)) AS t(v bigint)
int8pl|int8pl(g 1) C call floor|$n|SELECT count(int8pl(g, 1)) FROM generate_series(1, $n) g
floor|g (row floor)|$n|SELECT count(g) FROM generate_series(1, $n) g
VARS
}

log "bulk: $bulk_reps interleaved rounds, N=$bulk_n (dblink N=$dblink_n)"
central_before=$(psql_b -At -c "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM s")
{
	echo '\pset format unaligned'
	echo '\pset tuples_only on'
	echo '\pset fieldsep |'
	echo "SELECT dblink_connect('c', 'host=$work port=$port_b dbname=central');"
	# round 0 warms up (caches, the first blocks, the refill worker) and is dropped
	for r in $(seq 0 "$bulk_reps"); do
		if [ "$r" -eq 0 ]; then
			mapfile -t vs < <(bulk_variants $(( (bulk_n + 9) / 10 )) $(( (dblink_n + 9) / 10 )))
		else
			mapfile -t vs < <(bulk_variants "$bulk_n" "$dblink_n")
		fi
		nv=${#vs[@]}
		for i in $(seq 0 $((nv - 1))); do
			# rotate the order each round so no variant always runs first
			IFS='|' read -r key label n q <<< "${vs[$(( (i + r) % nv ))]}"
			printf "SELECT %d, '%s', %d, bench_ms(\$q\$%s\$q\$);\n" "$r" "$key" "$n" "$q"
		done
	done
} > "$work/scripts/bulk.sql"
chown -R postgres "$work/scripts" 2>/dev/null || true
psql_a -f "$work/scripts/bulk.sql" | grep -v '^OK$' | awk -F'|' -v OFS=, '$1 > 0 {
	printf "%d,%s,%d,%.3f,%.4f\n", $1, $2, $3, $4, $3 / $4 / 1000 }' > "$work/bulk.raw"
{ echo "round,variant,n,ms,mvalues_per_s"; cat "$work/bulk.raw"; } > "$out/bulk_raw.csv"
central_after=$(psql_b -At -c "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM s")
central_expected=$(( (dblink_n + 9) / 10 + bulk_reps * dblink_n ))
if [ $(( central_after - central_before )) -lt "$central_expected" ]; then
	echo "dblink variant made $((central_after - central_before)) calls, expected $central_expected" >&2
	exit 1
fi
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
	# keep only the latencies (us), one per transaction
	cat "$prefix".* | awk '{ print $3 }' >> "$work/lat/${v}_$c"
	rm -f "$prefix".*
	echo "$r,$v,$c,$tps,$(cut -d' ' -f1 /proc/loadavg)" >> "$work/pgbench.raw"
}

nrun=0
for c in $clients; do
	nrun=$((nrun + 6)); [ "$c" = "$s10_clients" ] && nrun=$((nrun + 1))
done
log "pgbench: $rounds round(s) x $nrun runs of ${duration}s (clients: $clients)"
for r in $(seq 1 "$rounds"); do
	for c in $clients; do
		vs=(select1 distseq ns_cache ns_nocache ins_distseq ins_serial)
		[ "$c" = "$s10_clients" ] && vs+=(distseq_b10)
		nv=${#vs[@]}
		for i in $(seq 0 $((nv - 1))); do
			run_pgbench "$r" "${vs[$(( (i + r) % nv ))]}" "$c"
		done
	done
	log "pgbench round $r done"
done
{ echo "round,variant,clients,tps,loadavg1_after"; cat "$work/pgbench.raw"; } > "$out/pgbench_raw.csv"
status_snapshot pgbench

# percentiles of one latency file, in ms: p50 p99 p99.9
percentiles() {
	sort -n "$1" | awk '{ v[NR] = $1 }
	function pct(p,   i) { i = int(p * NR); if (i < p * NR) i++; if (i < 1) i = 1; return v[i] / 1000 }
	END { if (NR) printf "%.3f %.3f %.3f\n", pct(0.50), pct(0.99), pct(0.999); else print "- - -" }'
}

# ------------------------------------------------------------- the table
awk -F, '{ print $2 "|" $3 "," $4 }' "$work/pgbench.raw" | sort -t, -k1,1 -k2,2g |
	median_by > "$work/pgbench.med"
pg_tps() { awk -F, -v k="$1|$2" '$1 == k { print $2 }' "$work/pgbench.med"; }
bulk_rate() { awk -F, -v k="$1" '$1 == k { print $2 }' "$work/bulk.med"; }

csv=$out/results.csv
echo "section,variant,clients,n_or_seconds,runs,rate,unit,x_ref,ref,p50_ms,p99_ms,p999_ms,p999_x_select1" > "$csv"
ref_bulk=$(bulk_rate ns_cache)
while IFS='|' read -r key name n q; do
	rate=$(bulk_rate "$key")
	runs=$(awk -F, -v k="$key" '$1 == k { print $3 }' "$work/bulk.med")
	x=$(awk -v a="$rate" -v b="$ref_bulk" 'BEGIN { printf "%.2f", a / b }')
	echo "bulk,\"$name\",1,$n,$runs,$rate,Mvalues/s,$x,nextval CACHE 1000,,,," >> "$csv"
done < <(bulk_variants "$bulk_n" "$dblink_n")

declare -A labels
while IFS='|' read -r name label sql; do labels[$name]=$label; done < <(pg_variants)
for c in $clients; do
	vs=(select1 distseq ns_cache ns_nocache ins_distseq ins_serial)
	[ "$c" = "$s10_clients" ] && vs+=(distseq_b10)
	read -r s1_p50 s1_p99 s1_p999 < <(percentiles "$work/lat/select1_$c")
	for v in "${vs[@]}"; do
		case $v in
			ins_distseq|ins_serial) ref=ins_serial; refname="INSERT bigserial" ;;
			distseq_b10) ref=distseq; refname="distseq block 100" ;;
			*) ref=ns_cache; refname="nextval CACHE 1000" ;;
		esac
		tps=$(pg_tps "$v" "$c")
		runs=$(awk -F, -v k="$v|$c" '$1 == k { print $3 }' "$work/pgbench.med")
		read -r p50 p99 p999 < <(percentiles "$work/lat/${v}_$c")
		x=$(awk -v a="$tps" -v b="$(pg_tps $ref "$c")" 'BEGIN { printf "%.2f", a / b }')
		xs=$(awk -v a="$p999" -v b="$s1_p999" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')
		echo "pgbench,\"${labels[$v]}\",$c,$duration,$runs,$tps,tps,$x,$refname,$p50,$p99,$p999,$xs" >> "$csv"
	done
done

# print it
echo
echo "distseq benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $( [ $quick -eq 1 ] && echo quick || echo full) run;" \
	"bulk: median of $bulk_reps interleaved runs; pgbench: -M prepared -T $duration x $rounds round(s), median tps"
echo "commit $commit; load average before the run: $load_start (above ~0.5, other work shares the machine and skews the numbers)"
awk -F, 'NR > 1 {
	gsub(/"/, "", $2)
	if ($1 == "bulk") rate = sprintf("%.2f M/s", $6); else rate = sprintf("%.0f tps", $6)
	if ($1 != sec) { if (sec != "") print ""; sec = $1 }
	printf "%-8s %-40s %7s %14s %6sx %-19s %8s %8s %9s %8s\n", $1, $2, $3, rate, $8, $9, $10, $11, $12, ($13 == "" ? "" : $13 "x")
}' "$csv" | {
	printf "%-8s %-40s %7s %14s %7s %-19s %8s %8s %9s %8s\n" section variant clients throughput "x ref" ref \
		"p50 ms" "p99 ms" "p99.9 ms" "p99.9/S1"
	cat
}
echo
awk -F'|' '$5 > 0 { printf "distseq_status after %-8s %-4s block %3d, segment now %6d: %6d refills, %6d waits (%.0f ms waiting), %d values issued\n", $1, $2, $3, $4, $5, $6, $7, $8 }' "$out/status.txt"
echo "(pgbench logs latencies with a clock read once per pass over a client: answers that arrive within"
echo " the pass are logged as 0 us, so p50 is a lower bound; p99 and p99.9 are not affected that way)"

# ---------------------------------------------------------------- plot
{
	printf "clients"
	for v in select1 distseq ns_cache ns_nocache ins_distseq ins_serial; do printf ' "%s"' "${labels[$v]}"; done
	echo
	for c in $clients; do
		printf "%s" "$c"
		for v in select1 distseq ns_cache ns_nocache ins_distseq ins_serial; do printf " %s" "$(pg_tps $v "$c")"; done
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
plot for [i=2:7] "$out/tps.dat" using 1:i with linespoints lw 2 pt 7 title columnheader(i)
GP
	if [ $quick -eq 0 ]; then cp "$out/tps.png" "$here/bench/results.png"; fi
fi

{
	echo "date: $(date -u)"
	echo "commit: $commit"
	echo "mode: $( [ $quick -eq 1 ] && echo quick || echo full) duration=$duration rounds=$rounds clients=\"$clients\" bulk_n=$bulk_n dblink_n=$dblink_n bulk_reps=$bulk_reps"
	echo "machine: $(nproc) cores, $(uname -r)"
	echo "server: $("$PGBIN/postgres" --version)"
	echo "runtime_s: $(( $(date +%s) - t_start ))"
	echo "loadavg: start $load_start, end $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/meta.txt"
log "done in $(( $(date +%s) - t_start ))s; results in $out"
