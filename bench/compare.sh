#!/usr/bin/env bash
# distseq side by side with what users pick instead, on one server: the
# primary key of a table filled by a bulk load and by concurrent one-row
# writers, and the instructions per value of each generator.
#
#   bash bench/compare.sh            # full run (about 11 minutes on 2 cores)
#   bash bench/compare.sh --quick    # smoke run (under a minute, no callgrind)
#
# Variants, each a table t_<variant> (id <type> PRIMARY KEY DEFAULT <expr>, v int):
#   bigserial, a native sequence CACHE 1000 (nextval('seq_cache')),
#   distseq (distseq_nextval('ds'), default block size), gen_random_uuid(),
#   uuidv7() (PostgreSQL 18 only: skipped on 15).
#
# Options (after --quick, if any, to override it):
#   --bulk-n "L"      rows of each bulk load       (full "1000000 5000000", quick "100000")
#   --clients "L"     pgbench client counts        (full "1 8 32 64", quick "1 8")
#   --rows N          rows per pgbench run, in all (full 200000, quick 20000)
#   --rounds R        interleaved rounds of both   (full 1, quick 1)
#   --cg-n1 N, --cg-n2 N  callgrind's two N        (50000 and 150000)
#   --no-callgrind    skip the instruction counts  (quick skips them)
#   --callgrind       count them even with --quick
#   --distseq-args A  more arguments of distseq_create('ds', A), e.g. 'block_size => 1000'
#   --keep            keep the work directory (servers' logs)
#   --no-build        use the installed extension, do not build and install it
#   --pg MAJOR        PostgreSQL to run on: 18 by default when scripts/build-pg.sh
#                     has built it in /opt/distseq-pg18, else 15
#
# Starts a throwaway server as the postgres OS user under /tmp (distseq
# preloaded, autovacuum off), then for the instruction counts a second one
# under valgrind's callgrind.  Each run fills a fresh table after a
# CHECKPOINT and reads the WAL position before and after; then the primary
# key's size (pg_relation_size) and avg_leaf_density (pgstattuple's
# pgstatindex()).  Writes bench/out/compare.csv (the table),
# compare_raw.csv (every run), compare.dat and compare.png (the plot:
# leaf density, key size, WAL and tps against clients), compare_meta.txt.
# A full run also copies the plot to bench/compare.png.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

quick=0
keep=0
build=1
pg_major=
bulk_ns="1000000 5000000"
clients="1 8 32 64"
rows=200000
rounds=1
cg_n1=50000
cg_n2=150000
callgrind=1
distseq_args=
while [ $# -gt 0 ]; do
	case $1 in
		--quick) quick=1; bulk_ns=100000; clients="1 8"; rows=20000; rounds=1; callgrind=0 ;;
		--bulk-n) bulk_ns=$2; shift ;;
		--clients) clients=$2; shift ;;
		--rows) rows=$2; shift ;;
		--rounds) rounds=$2; shift ;;
		--cg-n1) cg_n1=$2; shift ;;
		--cg-n2) cg_n2=$2; shift ;;
		--no-callgrind) callgrind=0 ;;
		--callgrind) callgrind=1 ;;
		--distseq-args) distseq_args=$2; shift ;;
		--keep) keep=1 ;;
		--no-build) build=0 ;;
		--pg) pg_major=$2; shift ;;
		-h|--help) script_usage "$0"; exit 0 ;;
		*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
	shift
done
[ "$cg_n2" -gt "$cg_n1" ] || { echo "--cg-n2 must be larger than --cg-n1" >&2; exit 2; }
if [ -z "$pg_major" ]; then
	if [ -x /opt/distseq-pg18/bin/pg_config ] && [ -f /opt/distseq-pg18/.distseq-built ]; then
		pg_major=18
	else
		pg_major=15
	fi
fi

bench_clock
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo none)$(git -C "$here" diff --quiet HEAD -- src 2>/dev/null || echo ' + uncommitted changes in src')

# ---------------------------------------------------------------- setup
bench_prepare $build "$pg_major"
if [ $callgrind -eq 1 ] && ! command -v valgrind >/dev/null; then
	echo "valgrind is not installed (apt-get install valgrind), or run with --no-callgrind" >&2
	exit 1
fi
if [ ! -f "$("$PG_CONFIG" --sharedir)/extension/pgstattuple.control" ]; then
	echo "pgstattuple is missing (contrib, with postgresql-15 on Debian)" >&2
	exit 1
fi

out=$here/bench/out
mkdir -p "$out"
rm -f "$out"/compare.csv "$out"/compare_raw.csv "$out"/compare.dat "$out"/compare.png "$out"/compare_meta.txt

bench_workdir dscmp scripts cg
port=54461
cg_port=54462
trap bench_cleanup EXIT
psql_b() { as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p $port -d bench "$@"; }

bench_log "starting the server in $work (PostgreSQL $pg_major)"
# autovacuum off: no vacuum or analyze writes WAL or takes CPU during a run
bench_initdb data "port = $port
listen_addresses = ''
shared_preload_libraries = 'distseq'
max_connections = 100
shared_buffers = 512MB
max_wal_size = 16GB
checkpoint_timeout = 1h
autovacuum = off"
bench_start data
as_pg "$PGBIN/createdb" -h "$work" -p $port bench
{
	echo "CREATE EXTENSION distseq;"
	echo "CREATE EXTENSION pgstattuple;"
	echo "SELECT distseq_create('ds'${distseq_args:+, $distseq_args});"
	echo "CREATE SEQUENCE seq_cache CACHE 1000;"
	# what bigserial creates, for the instruction counts
	echo "CREATE SEQUENCE seq_plain;"
	bench_sql_functions
} | psql_b >/dev/null
has_uuidv7=$(psql_b -At -c "SELECT count(*) FROM pg_proc WHERE proname = 'uuidv7'")

# key|label|column definition|the expression of its default (for callgrind)
variants() {
	cat <<'EOF'
bigserial|bigserial|id bigserial PRIMARY KEY|nextval('seq_plain')
cache|CACHE 1000|id bigint PRIMARY KEY DEFAULT nextval('seq_cache')|nextval('seq_cache')
distseq|distseq_nextval|id bigint PRIMARY KEY DEFAULT distseq_nextval('ds')|distseq_nextval('ds')
uuid4|gen_random_uuid()|id uuid PRIMARY KEY DEFAULT gen_random_uuid()|gen_random_uuid()
EOF
	if [ "$has_uuidv7" -gt 0 ]; then
		echo "uuidv7|uuidv7()|id uuid PRIMARY KEY DEFAULT uuidv7()|uuidv7()"
	fi
}
declare -A label coldef expr
vkeys=()
while IFS='|' read -r k l c e; do
	vkeys+=("$k")
	label[$k]=$l
	coldef[$k]=$c
	expr[$k]=$e
done < <(variants)
nv=${#vkeys[@]}
if [ "$has_uuidv7" -eq 0 ]; then
	uuidv7_note="uuidv7() skipped: PostgreSQL $pg_major has none (built into 18: bash scripts/build-pg.sh 18, then --pg 18)"
	echo "$uuidv7_note" >&2
fi

# ------------------------------------------------------------ one run
# Fills a fresh t_<variant> after a CHECKPOINT, by command "$@" (which
# prints its figure: ms or tps), then appends to $work/raw.csv:
# round,workload,variant,rows,clients,ms,tps,pk_bytes,avg_leaf_density,wal_bytes,wal_per_row
# The WAL position is read first: with data checksums (initdb's default
# from PostgreSQL 18 on) reading the new rows would log hint bits.
one_run() {	# round workload variant rows clients command...
	local r=$1 w=$2 v=$3 n=$4 c=$5 lsn fig ms= tps= end
	shift 5
	psql_b -c "CREATE TABLE t_$v (${coldef[$v]}, v int)" -c CHECKPOINT
	lsn=$(psql_b -At -c "SELECT pg_current_wal_lsn()")
	fig=$("$@")
	end=$(psql_b -At -F, -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '$lsn')" \
		-c "SELECT count(*), pg_relation_size('t_${v}_pkey'), (pgstatindex('t_${v}_pkey')).avg_leaf_density FROM t_$v" |
		paste -sd,)
	psql_b -c "DROP TABLE t_$v"
	case $w in bulk) ms=$fig ;; *) tps=$fig ;; esac
	echo "$end" | awk -F, -v OFS=, -v r="$r" -v w="$w" -v v="$v" -v n="$n" -v c="$c" -v ms="$ms" -v tps="$tps" '{
		if ($2 != n) { printf "%s %s at %s clients: %d rows in the table, expected %d\n", w, v, c, $2, n > "/dev/stderr"; exit 1 }
		print r, w, v, n, c, ms, tps, $3, $4, $1, sprintf("%.1f", $1 / n) }' >> "$work/raw.csv"
}

bulk_load() {	# variant N: prints the ms
	psql_b -At -c "SELECT round(bench_ms(\$q\$INSERT INTO t_$1 (v) SELECT g FROM generate_series(1, $2) g\$q\$)::numeric, 1)"
}

insert_script() {
	echo "INSERT INTO t_$1 (v) VALUES (1);" > "$work/scripts/ins_$1.sql"
	chown postgres "$work/scripts/ins_$1.sql" 2>/dev/null || true
}

pgbench_insert() {	# variant clients transactions-per-client: prints the tps
	local j=2 tps
	[ "$2" -lt 2 ] && j=1
	if ! as_pg "$PGBIN/pgbench" -n -M prepared -c "$2" -j $j -t "$3" -f "$work/scripts/ins_$1.sql" \
		-h "$work" -p $port bench > "$work/pgbench.out" 2>&1; then
		cat "$work/pgbench.out" >&2
		echo "pgbench failed: $1 at $2 clients" >&2
		exit 1
	fi
	tps=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p' "$work/pgbench.out")
	[ -n "$tps" ] || { cat "$work/pgbench.out" >&2; echo "no tps from pgbench: $1 at $2 clients" >&2; exit 1; }
	echo "$tps"
}

# The variants in the order they run in slot $1: rotated, so that no variant
# always runs first or right after another
rotated() {
	local i
	for i in $(seq 0 $((nv - 1))); do echo "${vkeys[$(( (i + $1) % nv ))]}"; done
}

: > "$work/raw.csv"
# warm-up, not kept: the server's caches, distseq's refill worker and first blocks
for v in "${vkeys[@]}"; do
	psql_b -c "CREATE TABLE t_$v (${coldef[$v]}, v int)" \
		-c "INSERT INTO t_$v (v) SELECT g FROM generate_series(1, 20000) g" -c "DROP TABLE t_$v"
done

slot=0
for r in $(seq 1 "$rounds"); do
	for n in $bulk_ns; do
		bench_log "round $r/$rounds: bulk load of $n rows, $nv variants"
		for v in $(rotated $slot); do
			one_run "$r" bulk "$v" "$n" 1 bulk_load "$v" "$n"
		done
		slot=$((slot + 1))
	done
	for c in $clients; do
		t=$(( (rows + c - 1) / c ))
		bench_log "round $r/$rounds: pgbench, $c client(s) x $t inserts, $nv variants"
		for v in $(rotated $slot); do
			insert_script "$v"
			one_run "$r" pgbench "$v" $((t * c)) "$c" pgbench_insert "$v" "$c" "$t"
		done
		slot=$((slot + 1))
	done
done
bench_stop data

# ------------------------------------------------ instructions per value
# As bench/callgrind.sh: per row = (session at N2 - session at N1) /
# (N2 - N1) for SELECT count(expr) FROM generate_series(1, N) g, minus the
# same for expr = 1 (the floor: generate_series and count).  None of the
# generators reads g, so the g floor, which includes fetching g from the
# row (about 110-135 instructions), would put them that much too low
# (distseq below zero); it is in the CSV as instr_minus_g.
declare -A cg
if [ $callgrind -eq 1 ]; then
	bench_log "callgrind: a second server, $((nv + 2)) expressions at N=$cg_n1 and N=$cg_n2"
	bench_initdb cgdata "port = $cg_port
listen_addresses = ''
shared_preload_libraries = 'distseq'
max_connections = 20
autovacuum = off"
	bench_cg_start cgdata $cg_port
	as_pg "$PGBIN/createdb" -h "$work" -p $cg_port bench
	as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p $cg_port -d bench \
		-c "CREATE EXTENSION distseq" -c "SELECT distseq_create('ds'${distseq_args:+, $distseq_args})" \
		-c "CREATE SEQUENCE seq_cache CACHE 1000" -c "CREATE SEQUENCE seq_plain" >/dev/null
	expr[floor]=g
	expr[const]=1
	for k in floor const "${vkeys[@]}"; do
		bench_cg_session $cg_port "${expr[$k]}" 2000 >/dev/null		# warm-up
		a=$(bench_cg_session $cg_port "${expr[$k]}" "$cg_n1")
		b=$(bench_cg_session $cg_port "${expr[$k]}" "$cg_n2")
		cg[$k]=$(awk -v a="$a" -v b="$b" -v n=$((cg_n2 - cg_n1)) 'BEGIN { printf "%.1f", (b - a) / n }')
		printf "1,instr,%s,%d,1,,,,,,,%s\n1,instr,%s,%d,1,,,,,,,%s\n" "$k" "$cg_n1" "$a" "$k" "$cg_n2" "$b" >> "$work/cg_raw.csv"
	done
	bench_stop cgdata
	for v in "${vkeys[@]}"; do
		echo "instr,$v,${cg[$v]},${cg[floor]},${cg[const]}"
	done > "$work/cg.csv"
fi

{
	echo "round,workload,variant,rows,clients,ms,tps,pk_bytes,avg_leaf_density,wal_bytes,wal_bytes_per_row,session_instructions"
	cat "$work/raw.csv"
	[ $callgrind -eq 0 ] || cat "$work/cg_raw.csv"
} > "$out/compare_raw.csv"

# ------------------------------------------------------------- the table
# median over the rounds of every figure of a (workload, variant, rows, clients)
awk -F, -v OFS=, '
function med(s,   a, k, x, y, t) {
	k = split(s, a, " ")
	if (k == 0 || a[1] == "") return ""
	for (x = 2; x <= k; x++) { t = a[x] + 0; for (y = x - 1; y >= 1 && a[y] + 0 > t; y--) a[y + 1] = a[y]; a[y + 1] = t }
	return (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
}
{
	key = $2 "," $3 "," $4 "," $5
	if (!(key in runs)) order[++nk] = key
	runs[key]++
	for (i = 6; i <= 11; i++) vals[key, i] = vals[key, i] " " $i
}
END {
	for (j = 1; j <= nk; j++) {
		key = order[j]; line = key "," runs[key]
		for (i = 6; i <= 11; i++) line = line "," med(vals[key, i])
		print line
	}
}' "$work/raw.csv" > "$work/med.csv"

csv=$out/compare.csv
echo "workload,variant,label,rows,clients,runs,ms,tps,x_bigserial,pk_bytes,pk_x_bigserial,avg_leaf_density,density_x_bigserial,wal_bytes_per_row,instr_per_value,instr_minus_g,instr_minus_1" > "$csv"
labels=$(for v in "${vkeys[@]}"; do echo "$v|${label[$v]}"; done)
# rows in the order of variants(), per workload and size; x_bigserial is the
# time ratio for bulk (lower is faster), the tps ratio for pgbench
awk -F, -v OFS=, -v labels="$labels" -v order="${vkeys[*]}" '
BEGIN {
	n = split(labels, ls, "\n"); for (i = 1; i <= n; i++) { split(ls[i], p, "|"); lab[p[1]] = p[2] }
	nv = split(order, vs, " ")
}
{ k = $1 "," $3 "," $4; if (!(k in seen)) { groups[++ng] = k; seen[k] = 1 }; row[k, $2] = $0 }
function ratio(a, b) { return (a != "" && b != "" && b + 0 > 0) ? sprintf("%.2f", a / b) : "" }
END {
	for (g = 1; g <= ng; g++) {
		split(row[groups[g], "bigserial"], B, ",")
		for (i = 1; i <= nv; i++) {
			if (!((groups[g], vs[i]) in row)) continue
			split(row[groups[g], vs[i]], R, ",")
			x = (R[1] == "bulk") ? ratio(R[6], B[6]) : ratio(R[7], B[7])
			print R[1], R[2], "\"" lab[R[2]] "\"", R[3], R[4], R[5], R[6], R[7], x,
				R[8], ratio(R[8], B[8]), R[9], ratio(R[9], B[9]), R[11], "", "", ""
		}
	}
}' "$work/med.csv" >> "$csv"
if [ $callgrind -eq 1 ]; then
	awk -F, -v OFS=, -v labels="$labels" -v n=$((cg_n2 - cg_n1)) '
	BEGIN { k = split(labels, ls, "\n"); for (i = 1; i <= k; i++) { split(ls[i], p, "|"); lab[p[1]] = p[2] } }
	{ v[NR] = $2; per[NR] = $3; g = $4; one = $5; if ($2 == "bigserial") b = $3 - $5 }
	END {
		for (i = 1; i <= NR; i++)
			print "instr", v[i], "\"" lab[v[i]] "\"", n, 1, 1, "", "", sprintf("%.3f", (per[i] - one) / b),
				"", "", "", "", "", per[i], sprintf("%.1f", per[i] - g), sprintf("%.1f", per[i] - one)
	}' "$work/cg.csv" >> "$csv"
fi

# print it
{
	echo
	echo "distseq against the alternatives, $(date -u '+%Y-%m-%d %H:%M UTC'), $("$PGBIN/postgres" --version | sed 's/.*) //') on $(nproc) cores," \
		"$( [ $quick -eq 1 ] && echo quick || echo full) run, $rounds round(s), variants interleaved and rotated"
	echo "commit $commit; distseq_create('ds'${distseq_args:+, $distseq_args}); load average before the run: $load_start"
	echo "bulk: one session, INSERT ... SELECT FROM generate_series(1, N), timed in the server (clock_timestamp() around EXECUTE, commit excluded)"
	echo "pgbench: -n -M prepared -j 2, INSERT INTO t (v) VALUES (1), $rows rows in all per run (-t rows/clients), synchronous_commit on"
	echo "x bs: against bigserial (bulk: time ratio, lower is faster; pgbench: tps ratio; instr: instructions ratio)"
	[ $callgrind -eq 0 ] || echo "instr: callgrind, per value of SELECT count(expr) FROM generate_series(1, N) g, (N=$cg_n2 - N=$cg_n1 session) / $((cg_n2 - cg_n1)), minus expr = 1"
	[ -z "${uuidv7_note:-}" ] || echo "$uuidv7_note"
	printf "%-8s %-20s %8s %4s %12s %6s %8s %6s %6s %6s %8s\n" workload variant rows cl "time/rate" "x bs" "PK MB" "x bs" "leaf%" "x bs" "WAL B/row"
	awk -F, 'NR > 1 {
		gsub(/"/, "", $3)
		if ($1 != w || ($1 == "pgbench" && $5 != c)) { if (w != "") print ""; w = $1; c = $5 }
		if ($1 == "instr") {
			printf "%-8s %-20s %8s %4s %12s %6s   (minus the g floor: %.0f; per row, floor included: %.0f)\n", $1, $3, "", "", sprintf("%.0f instr", $17), $9, $16, $15
			next
		}
		rate = ($1 == "bulk") ? sprintf("%.2f s", $7 / 1000) : sprintf("%.0f tps", $8)
		printf "%-8s %-20s %8s %4s %12s %6s %8.2f %6s %6.1f %6s %8.1f\n", $1, $3, $4, $5, rate, $9, $10 / 1048576, $11, $12, $13, $14
	}' "$csv"
} | tee "$work/table.txt"

# ---------------------------------------------------------------- plot
# one block per variant: clients, leaf density, PK MB, WAL bytes/row, tps
awk -F, -v order="${vkeys[*]}" '
BEGIN { nv = split(order, vs, " ") }
NR > 1 && $1 == "pgbench" { d[$2] = d[$2] sprintf("%s %s %.3f %s %s\n", $5, $12, $10 / 1048576, $14, $8) }
END { for (i = 1; i <= nv; i++) printf "# %s\n%s\n\n", vs[i], d[vs[i]] }' "$csv" > "$out/compare.dat"
titles=$(for v in "${vkeys[@]}"; do printf '%s ' "${label[$v]// /_}"; done)
if command -v gnuplot >/dev/null 2>&1; then
	gnuplot <<GP
set terminal pngcairo size 1100,900 noenhanced font ",10"
set output "$out/compare.png"
titles = "$titles"
set multiplot layout 2,2 title "distseq against the alternatives: $rows one-row INSERTs per run, pgbench -M prepared ($("$PGBIN/postgres" --version | sed 's/.*) //'), $(nproc) cores, $(date -u +%Y-%m-%d))"
set logscale x 2
set xrange [0.8:80]
set xtics ($(echo $clients | sed 's/ /, /g'))
set xlabel "clients"
set grid
set key below horizontal
set title "primary key avg_leaf_density (%)"
set yrange [0:100]
plot for [i=0:$((nv - 1))] "$out/compare.dat" index i using 1:2 with linespoints lw 2 dt i+1 pt i+4 ps 1.3 title word(titles, i + 1)
set autoscale y
set yrange [0:*]
set title "primary key size (MB)"
plot for [i=0:$((nv - 1))] "$out/compare.dat" index i using 1:3 with linespoints lw 2 dt i+1 pt i+4 ps 1.3 title word(titles, i + 1)
set title "WAL bytes per row"
plot for [i=0:$((nv - 1))] "$out/compare.dat" index i using 1:4 with linespoints lw 2 dt i+1 pt i+4 ps 1.3 title word(titles, i + 1)
set title "INSERT transactions per second"
plot for [i=0:$((nv - 1))] "$out/compare.dat" index i using 1:5 with linespoints lw 2 dt i+1 pt i+4 ps 1.3 title word(titles, i + 1)
unset multiplot
GP
	if [ $quick -eq 0 ]; then cp "$out/compare.png" "$here/bench/compare.png"; fi
else
	echo "gnuplot is not installed (apt-get install gnuplot-nox): no plot" >&2
fi

{
	echo "date: $(date -u)"
	echo "commit: $commit"
	echo "mode: $( [ $quick -eq 1 ] && echo quick || echo full) bulk_n=\"$bulk_ns\" clients=\"$clients\" rows=$rows rounds=$rounds callgrind=$callgrind cg_n1=$cg_n1 cg_n2=$cg_n2 distseq_args=\"$distseq_args\""
	echo "machine: $(nproc) cores, $(uname -r)"
	echo "server: $("$PGBIN/postgres" --version)"
	echo "runtime_s: $(( $(date +%s) - bench_t0 ))"
	echo "loadavg: start $load_start, end $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/compare_meta.txt"
bench_log "done in $(( $(date +%s) - bench_t0 ))s; results in $out"
