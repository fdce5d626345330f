#!/usr/bin/env bash
# Instructions per value of distseq_nextval against native nextval, counted
# with valgrind's callgrind: deterministic, unlike timings on a shared box.
#
#   bash bench/callgrind.sh              # N = 100,000 and 300,000 (a few minutes)
#   bash bench/callgrind.sh --n1 20000 --n2 60000   # quicker, a little less exact
#   bash bench/callgrind.sh --keep       # keep the work directory and cg.* files
#   bash bench/callgrind.sh --no-build   # use the installed extension as it is
#   bash bench/callgrind.sh --pg 18      # on PostgreSQL 18 (scripts/build-pg.sh)
#
# Starts a throwaway server (postgres user, under /tmp) under
#   valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=.../cg.%p
# so every backend writes its own cg.<pid> file when it exits.  For each
# expression, each measured query runs in a fresh session that first asks
# for pg_backend_pid():
#   SELECT count(expr) FROM generate_series(1, N) g      at N = n1 and n2
# instructions per row = (total of the n2 backend - total of the n1 backend)
# / (n2 - n1), which cancels connection set-up and the first call's catalog
# lookups; the same for expr = g (the generate_series + count floor) is then
# subtracted.  expr = 1 is a second floor, for expressions that, like
# nextval('x'), do not read g (the g floor includes fetching g from the
# row, which they don't pay).  Also prints the refill worker's instructions per refill
# (its whole life, start-up included, divided by the refills it made).
#
# Then instructions per transaction: one pgbench client (-n -M prepared -c 1
# -t M) runs M one-statement transactions, at M = m1 and m2, for SELECT 1,
# SELECT distseq_nextval('s') and SELECT nextval('ns_cache'); per
# transaction = (m2 backend - m1 backend) / (m2 - m1), which cancels
# connection set-up and the first transaction.  The same for
# distseq_nextval(textcat('m', :k)) with k random among 1,000 sequences
# and with k always 1: what drawing from many sequences costs a backend
# that has used them all (by -t m1 it has used nearly every one: the few
# first uses left add about 30 instructions per transaction at the default
# m1 and m2).  The backend is the new cg file with the most instructions
# (pgbench's set-up connection is the other one).  Then, per transaction,
# the inclusive instructions of distseq's own functions (callgrind_annotate
# on the two distseq_nextval('s') backends).
#
#   bash bench/callgrind.sh --m1 2000 --m2 6000    # default 5,000 and 15,000
#   bash bench/callgrind.sh --only xact            # or --only rows
#
# With --cache-sim, callgrind also simulates a data cache of 32 kB and a
# last-level cache of 256 kB (64-byte lines; about what each of 200
# backends gets of this machine's 32 MB L3), and the transactions' rows
# also print the data reads that missed each, per transaction: what
# drawing from many sequences costs in memory rather than instructions.
# Slower; instruction counts are the same.
#
# Writes bench/out/callgrind.csv.
#
# A refill on a long history against a fresh one (only this, instead of
# the above):
#   bash bench/callgrind.sh --aged N     # N synthetic closed windows (100000)
#   bash bench/callgrind.sh --aged N --aged-draw D   # D values per phase (2000)
# Sequences 'fresh' and 'aged' (block_size 10, window_size 20, both from
# start_value 10^12) on a server with distseq.prefetch_threshold = 0 and
# distseq.segment_lifetime = 1ms, so that every refill is waited for, takes
# one whole window of 20 values and closes it.  'aged' gets N closed windows
# inserted directly into distseq.distseq_windows below its first one
# (contiguous, non-overlapping, next_hi = window_end; nothing else is
# touched), then VACUUM ANALYZE of the table.  A refill that closes a
# window merges up to 256 closed rows below it into one, so a sequence aged
# by real refills keeps one row for its history; the warm-up draws enough
# of 'aged' (N / 256 + 2 windows, more while it has over 10 rows) to
# merge the inserted ones as well, then VACUUM ANALYZE (as autovacuum
# would, in time), and the rows before the draws show it.  After the warm-up the refill
# worker's counters are dumped and zeroed (callgrind_control -d
# on its pid), then D values are drawn from 'fresh', dump, D from 'aged',
# dump: per phase, the inclusive instructions of the worker's refill and
# reservation functions (callgrind_annotate on each dump) over the phase's
# refills (distseq_status), and aged / fresh; and the rows of
# distseq_windows per sequence before and after.  Writes
# bench/out/callgrind_aged.csv.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

n1=100000
n2=300000
m1=5000
m2=15000
only=
bench_cg_opts=
aged=
aged_draw=2000
keep=0
build=1
pg_major=
while [ $# -gt 0 ]; do
	case $1 in
		--n1) n1=$2; shift ;;
		--n2) n2=$2; shift ;;
		--m1) m1=$2; shift ;;
		--m2) m2=$2; shift ;;
		--only) only=$2; shift
			case $only in rows|xact) ;; *) echo "--only takes rows or xact" >&2; exit 2 ;; esac ;;
		--aged) aged=$2; shift ;;
		--aged-draw) aged_draw=$2; shift ;;
		--cache-sim) bench_cg_opts="--cache-sim=yes --D1=32768,8,64 --LL=262144,16,64" ;;
		--keep) keep=1 ;;
		--no-build) build=0 ;;
		--pg) pg_major=$2; shift ;;
		-h|--help) script_usage "$0"; exit 0 ;;
		*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
	shift
done
[ "$n2" -gt "$n1" ] || { echo "--n2 must be larger than --n1" >&2; exit 2; }
[ "$m2" -gt "$m1" ] || { echo "--m2 must be larger than --m1" >&2; exit 2; }
case ${aged:-1} in ''|*[!0-9]*) echo "--aged takes a number of windows" >&2; exit 2 ;; esac
case $aged_draw in ''|*[!0-9]*|0) echo "--aged-draw takes a positive number" >&2; exit 2 ;; esac

bench_clock

command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
bench_prepare $build "$pg_major"
bench_cfloor_install "$here" || exit 1

out=$here/bench/out
mkdir -p "$out"
bench_workdir dscg cg
port=54451
psql_cg() { as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p $port -d bench "$@"; }

vg_pid=
aged_links=
cleanup() {
	local p
	if [ -f "$work/data/postmaster.pid" ]; then
		as_pg "$PGBIN/pg_ctl" -D "$work/data" -m fast -t 300 stop >/dev/null 2>&1 ||
			{ [ -n "$vg_pid" ] && kill "$vg_pid" 2>/dev/null; } || true
	fi
	# valgrind writes the postmaster's file after the pid file is gone
	[ -z "$vg_pid" ] || wait "$vg_pid" 2>/dev/null || true
	# vgdb's FIFOs of the processes dumped, and our links to them
	for p in $aged_links; do rm -f "/tmp/vgdb-pipe-"*"-$p-by-"*; done
	if [ $keep -eq 1 ]; then echo "work directory kept: $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# --aged: what a refill costs the worker on a long history of closed windows
aged_window=20
aged_start=1000000000000
aged_rows() {	# sequence: "rows open" of distseq_windows
	psql_cg -At -F' ' -c "SELECT count(*), count(*) FILTER (WHERE next_hi < window_end)
		FROM distseq.distseq_windows WHERE sequence_name = '$1'"
}
aged_refills() {	# sequence
	psql_cg -At -c "SELECT refills FROM distseq_status WHERE sequence_name = '$1'"
}
aged_draw() {	# sequence N
	psql_cg -At -c "SELECT count(distseq_nextval('$1')) FROM generate_series(1, $2)" >/dev/null
}
# Dumps the counters of process $1 (callgrind zeroes them after a dump) and
# prints the name of the file written, once complete
aged_dump() {	# pid
	local before f= i k real
	# A backend's process title overwrites the environment valgrind reads
	# the user and host names from, so the process looks for vgdb's FIFOs
	# as "by-???-on-???", unlike vgdb and its own start: without the links
	# it fails, and the process exits
	for k in from-vgdb-to to-vgdb-from shared-mem-vgdb; do
		real=$(ls -d /tmp/vgdb-pipe-$k-$1-by-* 2>/dev/null | grep -v -- '-by-???-on-???$' | head -1 || true)
		[ -n "$real" ] && ln -sfn "$real" "/tmp/vgdb-pipe-$k-$1-by-???-on-???"
	done
	case " $aged_links " in *" $1 "*) ;; *) aged_links="$aged_links $1" ;; esac
	before=$(ls "$work/cg" | grep "^cg\.$1\.[0-9]*$" | sort || true)
	as_pg callgrind_control -d "$1" >> "$work/vgdb.log" 2>&1 ||
		{ cat "$work/vgdb.log" >&2; echo "callgrind_control -d $1 failed" >&2; exit 1; }
	for i in $(seq 1 600); do
		f=$(comm -13 <(echo "$before") <(ls "$work/cg" | grep "^cg\.$1\.[0-9]*$" | sort) | head -1)
		[ -n "$f" ] && grep -q '^totals:' "$work/cg/$f" && break
		f=
		sleep 0.5
	done
	[ -n "$f" ] || { echo "callgrind_control -d $1 wrote no file" >&2; exit 1; }
	echo "$f"
}
# "function instructions" of distseq.so, inclusive, and "TOTAL n", of a dump
aged_fns() {	# file
	callgrind_annotate --inclusive=yes --threshold=100 "$work/cg/$1" 2>/dev/null |
		awk '/distseq\.so\]/ { n = $1; gsub(/,/, "", n); f = $0; sub(/ \[.*/, "", f); sub(/.*:/, "", f); print f, n }'
	awk '/^totals:/ { print "TOTAL", $2 }' "$work/cg/$1"
}
aged_run() {
	local wpid rf0 rf1 ra0 ra1 f_fresh f_aged nf na
	bench_log "aged: sequences fresh and aged, $aged synthetic closed windows for aged"
	psql_cg >/dev/null <<SQL
SELECT distseq_create('fresh', block_size => $((aged_window / 2)), window_size => $aged_window, start_value => $aged_start);
SELECT distseq_create('aged', block_size => $((aged_window / 2)), window_size => $aged_window, start_value => $aged_start);
-- contiguous closed windows below aged's first one: the history of a
-- sequence that drew N windows (the rows are consistent, the foreign key
-- holds: its triggers are skipped only to spare the time under callgrind)
SET session_replication_role = replica;
INSERT INTO distseq.distseq_windows (sequence_name, window_start, window_end, next_hi)
SELECT 'aged', $aged_start - (i + 1) * $aged_window, $aged_start - i * $aged_window, $aged_start - i * $aged_window
FROM generate_series(0, $aged - 1) i;
RESET session_replication_role;
VACUUM ANALYZE distseq.distseq_windows;
SQL
	# warm-up: the worker starts and prepares its statements, and the
	# closes merge aged's inserted history
	aged_draw fresh 200
	aged_draw aged $(( (aged / 256 + 2) * aged_window ))
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		read -r rows_aged0 open_aged0 < <(aged_rows aged)
		[ "$rows_aged0" -le 10 ] && break
		aged_draw aged $((50 * aged_window))
	done
	# what autovacuum does in time: the merged rows' dead tuples go
	psql_cg -q -c "VACUUM ANALYZE distseq.distseq_windows"
	wpid=$(psql_cg -At -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'distseq worker'" | sed -n 1p)
	[ -n "$wpid" ] || { echo "no distseq worker running" >&2; exit 1; }
	read -r rows_fresh0 open_fresh0 < <(aged_rows fresh)
	read -r rows_aged0 open_aged0 < <(aged_rows aged)
	aged_dump "$wpid" >/dev/null
	bench_log "aged: $aged_draw values from fresh, then from aged (worker pid $wpid)"
	rf0=$(aged_refills fresh)
	aged_draw fresh "$aged_draw"
	rf1=$(aged_refills fresh)
	f_fresh=$(aged_dump "$wpid")
	ra0=$(aged_refills aged)
	aged_draw aged "$aged_draw"
	ra1=$(aged_refills aged)
	f_aged=$(aged_dump "$wpid")
	read -r rows_fresh1 open_fresh1 < <(aged_rows fresh)
	read -r rows_aged1 open_aged1 < <(aged_rows aged)
	nf=$((rf1 - rf0))
	na=$((ra1 - ra0))
	[ "$nf" -gt 0 ] && [ "$na" -gt 0 ] || { echo "no refills measured (fresh $nf, aged $na)" >&2; exit 1; }

	csv=$out/callgrind_aged.csv
	echo "measure,fresh,aged,aged_over_fresh" > "$csv"
	echo "refills,$nf,$na," >> "$csv"
	echo "windows_rows_before,$rows_fresh0,$rows_aged0," >> "$csv"
	echo "windows_rows_after,$rows_fresh1,$rows_aged1," >> "$csv"
	echo "windows_open_after,$open_fresh1,$open_aged1," >> "$csv"
	# per refill, the functions that take at least 1% of the worker's phase
	join <(aged_fns "$f_fresh" | sort -k1,1) <(aged_fns "$f_aged" | sort -k1,1) |
		awk -v nf="$nf" -v na="$na" '
		$1 == "TOTAL" { tf = $2; ta = $3 }
		{ fn[++n] = $1; a[n] = $2 / nf; b[n] = $3 / na }
		END {
			for (i = 1; i <= n; i++)
				if (fn[i] == "TOTAL" || (a[i] >= 0.01 * tf / nf && fn[i] ~ /refill|reserve|window|catalog|spi/))
					printf "%s,%.0f,%.0f,%.3f\n", (fn[i] == "TOTAL" ? "worker_process" : fn[i]), a[i], b[i], (a[i] > 0 ? b[i] / a[i] : 0)
		}' | sort -t, -k2,2nr >> "$csv"

	echo
	echo "callgrind: the refill worker on a long history, $(date -u '+%Y-%m-%d %H:%M UTC');" \
		"block_size $((aged_window / 2)), window_size $aged_window (every refill takes and closes one window)," \
		"$aged synthetic closed windows below aged's first, $aged_draw values drawn from each"
	printf "%-40s %14s %14s %10s\n" "instructions per refill (inclusive)" "fresh" "aged" "aged/fresh"
	awk -F, 'NR > 5 { printf "%-40s %14s %14s %9sx\n", ($1 == "worker_process" ? "whole worker process" : $1 "()"), $2, $3, $4 }' "$csv"
	printf "%-40s %14s %14s\n" "refills measured" "$nf" "$na"
	printf "%-40s %14s %14s\n" "distseq_windows rows before the draws" "$rows_fresh0" "$rows_aged0"
	printf "%-40s %14s %14s\n" "distseq_windows rows after the draws" "$rows_fresh1" "$rows_aged1"
	printf "%-40s %14s %14s\n" "  of them open" "$open_fresh1" "$open_aged1"
	bench_log "done in $(( $(date +%s) - bench_t0 ))s; $csv"
}

bench_initdb data "shared_preload_libraries = 'distseq'
listen_addresses = ''
port = $port
max_connections = 20
distseq.max_sequences = 1010
autovacuum = off${aged:+
distseq.prefetch_threshold = 0
distseq.segment_lifetime = 1ms
distseq.worker_idle_timeout = 0}"

bench_log "starting the server under callgrind in $work"
bench_cg_start data $port
vg_pid=$bench_cg_pid

as_pg "$PGBIN/createdb" -h "$work" -p $port bench
{
	cat <<'SQL'
CREATE EXTENSION distseq;
SELECT distseq_create('s', block_size => 100);
CREATE SEQUENCE ns_cache CACHE 1000;
CREATE SEQUENCE ns_nocache;
SQL
	# the sequences of the transaction rows "one" and "many", each drawn
	# from once (their first refills); here, before the warm-up sessions, so
	# that the cg file of this session is written before a row's backends
	# are looked for
	[ "$only" = rows ] || [ -n "$aged" ] || cat <<'SQL'
SELECT count(distseq_create('m' || g, block_size => 100)) FROM generate_series(1, 1000) g;
SELECT count(distseq_nextval('m' || g)) FROM generate_series(1, 1000) g;
SQL
	bench_cfloor_sql
} | psql_cg >/dev/null

[ -z "$aged" ] || { aged_run; exit 0; }

# key|label|expr
variants() {
	cat <<'EOF'
floor|g (generate_series + count floor)|g
const|1 (floor without reading g)|1
int8pl|int8pl(g, 1) (empty C call)|int8pl(g, 1)
distseq|distseq_nextval('s')|distseq_nextval('s')
ns_cache|nextval('ns_cache') CACHE 1000|nextval('ns_cache')
ns_nocache|nextval('ns_nocache') no cache|nextval('ns_nocache')
EOF
}

# key|label|statement, one transaction each
xact_variants() {
	cat <<'EOF'
select1|SELECT 1|SELECT 1;
cfloor|SELECT bench_cfloor('s') empty C fn|SELECT bench_cfloor('s');
distseq|SELECT distseq_nextval('s')|SELECT distseq_nextval('s');
ns_cache|SELECT nextval('ns_cache') CACHE 1000|SELECT nextval('ns_cache');
one|k always 1: distseq_nextval(textcat('m', :k))|\\set k random(1, 1)\nSELECT distseq_nextval(textcat('m', :k));
many|k random of 1000: distseq_nextval(textcat('m', :k))|\\set k random(1, 1000)\nSELECT distseq_nextval(textcat('m', :k));
EOF
}

cg_files() { ls "$work/cg" | sort; }

# one pgbench client running M transactions: prints "pid total" of its
# backend.  pgbench opens two connections (set-up, then the client); the
# client's backend is the one of the two new cg files with more instructions.
xact_total() {	# key M
	local before new t best= bestpid=
	before=$(cg_files)
	as_pg "$PGBIN/pgbench" -n -M prepared -c 1 -j 1 -t "$2" -f "$work/xact_$1.sql" \
		-h "$work" -p $port bench >/dev/null
	for i in $(seq 1 600); do
		new=$(comm -13 <(echo "$before") <(cg_files))
		[ "$(echo "$new" | grep -c .)" -ge 2 ] && break
		sleep 0.5
	done
	[ -n "$new" ] || { echo "no new cg file after pgbench" >&2; exit 1; }
	for f in $new; do
		t=$(bench_cg_total "${f#cg.}")
		if [ -z "$best" ] || [ "$t" -gt "$best" ]; then best=$t; bestpid=${f#cg.}; fi
	done
	echo "$bestpid $best"
}

# data reads that missed the simulated caches, in all, in a cg file:
# "D1mr count" and "DLmr count"
cg_misses() {	# pid
	awk '/^events:/ { for (i = 2; i <= NF; i++) ev[i] = $i }
		/^totals:/ { for (i = 2; i <= NF; i++) if (ev[i] == "D1mr" || ev[i] == "DLmr") print ev[i], $i }' \
		"$work/cg/cg.$1" | sort
}

# inclusive instructions of each function of distseq.so in a cg file: "fn count"
cg_distseq_fns() {	# pid
	callgrind_annotate --inclusive=yes --threshold=100 "$work/cg/cg.$1" 2>/dev/null |
		awk '/distseq\.so\]/ { n = $1; gsub(/,/, "", n); f = $0; sub(/ \[.*/, "", f); sub(/.*:/, "", f); print f, n }'
}

# warm up: shared buffers, the refill worker, the first segments
bench_log "warm-up sessions"
while IFS='|' read -r key label expr; do
	bench_cg_session $port "$expr" 2000 >/dev/null
done < <(variants)

declare -A per_row
if [ "$only" != xact ]; then
	while IFS='|' read -r key label expr; do
		bench_log "$label: N=$n1 and N=$n2"
		a=$(bench_cg_session $port "$expr" "$n1")
		b=$(bench_cg_session $port "$expr" "$n2")
		per_row[$key]=$(awk -v a="$a" -v b="$b" -v n=$((n2 - n1)) 'BEGIN { printf "%.1f", (b - a) / n }')
		echo "$key,$a,$b" >> "$work/totals.csv"
	done < <(variants)
fi

declare -A per_xact misses
if [ "$only" != rows ]; then
	while IFS='|' read -r key label stmt; do
		printf '%b\n' "$stmt" > "$work/xact_$key.sql"
		chown postgres "$work/xact_$key.sql" 2>/dev/null || true
		xact_total "$key" 200 >/dev/null		# warm-up
		bench_log "$label: pgbench -t $m1 and -t $m2"
		read -r pa a < <(xact_total "$key" "$m1")
		read -r pb b < <(xact_total "$key" "$m2")
		per_xact[$key]=$(awk -v a="$a" -v b="$b" -v n=$((m2 - m1)) 'BEGIN { printf "%.0f", (b - a) / n }')
		echo "$key,$a,$b" >> "$work/xact_totals.csv"
		[ -z "$bench_cg_opts" ] ||
			misses[$key]=$(join <(cg_misses "$pa") <(cg_misses "$pb") |
				awk -v n=$((m2 - m1)) '{ printf "%s %.1f\n", $1, ($3 - $2) / n }')
		if [ "$key" = distseq ]; then
			join <(cg_distseq_fns "$pa" | sort) <(cg_distseq_fns "$pb" | sort) |
				awk -v n=$((m2 - m1)) '{ d = ($3 - $2) / n; if (d >= 1) printf "%s %.0f\n", $1, d }' |
				sort -k2,2nr > "$work/xact_fns.txt"
		fi
	done < <(xact_variants)
fi

# the refill worker's whole life, divided by its refills
wpid=$(psql_cg -At -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'distseq worker'" | sed -n 1p)
refills=$(psql_cg -At -c "SELECT sum(refills), sum(waits), sum(values_issued) FROM distseq_status")
bench_log "stopping the server (the worker writes its file when it exits)"
as_pg "$PGBIN/pg_ctl" -D "$work/data" -m fast -t 300 stop >/dev/null
wtotal=
wrefill=
if [ -n "$wpid" ]; then
	wtotal=$(bench_cg_total "$wpid")
	# inclusive cost of the refills alone, without start-up: refill_sequence(),
	# or the catalog reservation it calls when the compiler inlined it
	for fn in refill_sequence distseq_catalog_reserve; do
		wrefill=$(callgrind_annotate --inclusive=yes --threshold=100 "$work/cg/cg.$wpid" 2>/dev/null |
			awk -v fn=":$fn " 'index($0, fn) && v == "" { gsub(/,/, "", $1); v = $1 } END { print v }')
		[ -n "$wrefill" ] && { wfn=$fn; break; }
	done
fi

csv=$out/callgrind.csv
echo "variant,expr,instr_n1,instr_n2,n1,n2,instr_per_row,net_of_g,net_of_const" > "$csv"
if [ "$only" != xact ]; then
floor=${per_row[floor]}
cfloor=${per_row[const]}
echo
echo "callgrind instructions per value: (N=$n2 session - N=$n1 session) / $((n2 - n1)), minus a floor"
printf "%-40s %10s %12s %12s\n" "expression" "per row" "minus g" "minus 1"
while IFS='|' read -r key label expr; do
	IFS=, read -r _ a b < <(grep "^$key," "$work/totals.csv")
	net=$(awk -v p="${per_row[$key]}" -v f="$floor" 'BEGIN { printf "%.1f", p - f }')
	cnet=$(awk -v p="${per_row[$key]}" -v f="$cfloor" 'BEGIN { printf "%.1f", p - f }')
	printf "%-40s %10s %12s %12s\n" "$label" "${per_row[$key]}" "$net" "$cnet"
	echo "\"$label\",\"$expr\",$a,$b,$n1,$n2,${per_row[$key]},$net,$cnet" >> "$csv"
done < <(variants)
echo "(\"minus g\" is the figure to compare with the targets; \"minus 1\" is fairer for"
echo " expressions that never read g: distseq_nextval and nextval)"
fi
if [ "$only" != rows ]; then
	s1=${per_xact[select1]}
	nat=${per_xact[ns_cache]}
	echo
	echo "callgrind instructions per transaction (pgbench -n -M prepared -c 1): (-t $m2 backend - -t $m1 backend) / $((m2 - m1))"
	printf "%-40s %10s %15s %10s\n" "statement" "per xact" "minus SELECT 1" "x native"
	while IFS='|' read -r key label stmt; do
		IFS=, read -r _ a b < <(grep "^$key," "$work/xact_totals.csv")
		net=$((per_xact[$key] - s1))
		x=$(awk -v p="${per_xact[$key]}" -v r="$nat" 'BEGIN { printf "%.3f", p / r }')
		printf "%-40s %10s %15s %10s\n" "$label" "${per_xact[$key]}" "$net" "$x"
		echo "\"xact: $label\",\"$stmt\",$a,$b,$m1,$m2,${per_xact[$key]},,$net" >> "$csv"
	done < <(xact_variants)
	echo "(\"minus SELECT 1\" is what the statement adds to a one-statement transaction)"
	echo "distseq_nextval('s') over an empty C function of an extension: $((per_xact[distseq] - per_xact[cfloor])) per transaction"
	echo "a random one of 1,000 sequences over always the same one, on a backend that has used them all: $((per_xact[many] - per_xact[one])) per transaction"
	if [ -n "$bench_cg_opts" ]; then
		echo "data reads that missed the simulated caches (D1 32 kB, LL 256 kB), per transaction:"
		while IFS='|' read -r key label stmt; do
			printf "  %-40s %s\n" "$label" "$(echo "${misses[$key]}" | awk '{ printf "%s %s  ", $1, $2 }')"
		done < <(xact_variants)
	fi
	if [ -s "$work/xact_fns.txt" ]; then
		echo "distseq functions, inclusive instructions per transaction (callgrind_annotate):"
		awk '{ printf "  %-30s %8s\n", $1, $2 }' "$work/xact_fns.txt"
	fi
fi
if [ -n "$wtotal" ]; then
	IFS='|' read -r nref nwait issued <<< "$refills"
	awk -v t="$wtotal" -v f="${wrefill:-0}" -v fn="${wfn:-}" -v r="$nref" -v w="$nwait" -v n="$issued" 'BEGIN {
		printf "\nrefill worker (a separate process, not in the figures above): %d refills for %d values issued, %d refills waited for by a caller\n", r, n, w
		if (f > 0)
			printf "  in %s(): %.0f instructions per refill = %.1f per value issued\n", fn, f / r, f / n
		printf "  whole process (start-up and fork-inherited counts included): %.0f per refill = %.1f per value issued\n", t / r, t / n }'
	echo "\"refill worker: ${wfn:-whole process} per refill\",\"\",${wrefill:-$wtotal},$nref,,,$(awk -v f="${wrefill:-$wtotal}" -v r="$nref" 'BEGIN { printf "%.0f", f / r }'),," >> "$csv"
fi
bench_log "done in $(( $(date +%s) - bench_t0 ))s; $csv"
