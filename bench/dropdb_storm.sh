#!/usr/bin/env bash
# A victim session draws values while another role tries, about 60 times a
# second, to drop the victim's database (issue #19: every attempt fails, the
# role does not own it, and must disturb nothing).
#
#   bash bench/dropdb_storm.sh              # 20,000 values, 60 attempts/s
#   bash bench/dropdb_storm.sh --values N --rate R --keep --no-build
#
# Starts a throwaway server (postgres user, under /tmp) with distseq
# preloaded; roles "victim" and "attacker", each owning a database; in the
# victim's, sequence v (default block size, 100).  One victim session (psql,
# one `SELECT distseq_nextval('v')` per transaction, \timing on) draws N
# values in each phase:
#   warm-up   N / 10 values, not reported
#   quiet     nobody else on the server
#   control   the attacker's psql runs DROP DATABASE of a database that does
#             not exist, in a loop paced to R attempts a second
#             (pg_sleep_until), from a second before the victim starts until
#             it is done: the cost of the loop itself on a small machine
#   storm     the same loop, dropping the victim's database
#   quiet2    nobody else again (the machine's drift)
# and prints per phase: values drawn, errors, whether every value was above
# the session's one before, p50/p99/p99.9/max latency as psql measures it
# (ms), the attempts made and their rate; then the storm's p99.9 over the
# other phases'.  Latency includes psql's round trip, the same in every
# phase.  Writes bench/out/dropdb_storm.txt.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

values=20000
rate=60
keep=0
build=1
while [ $# -gt 0 ]; do
	case $1 in
		--values) values=$2; shift ;;
		--rate) rate=$2; shift ;;
		--keep) keep=1 ;;
		--no-build) build=0 ;;
		-h|--help) script_usage "$0"; exit 0 ;;
		*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
	shift
done

bench_clock

bench_prepare $build

out=$here/bench/out
mkdir -p "$out"
bench_workdir dsstorm
port=54451

trap bench_cleanup EXIT

bench_log "starting a server in $work"
bench_initdb data "listen_addresses = ''
port = $port
max_connections = 100
shared_buffers = 256MB
shared_preload_libraries = 'distseq'"
bench_start data

psql_as() {	# role database psql-args...
	local role=$1 db=$2
	shift 2
	as_pg "$PGBIN/psql" -X -q -h "$work" -p "$port" -U "$role" -d "$db" "$@"
}
psql_as postgres postgres -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE ROLE victim LOGIN;
CREATE ROLE attacker LOGIN;
CREATE DATABASE vdb OWNER victim;
CREATE DATABASE adb OWNER attacker;
SQL
psql_as postgres vdb -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE EXTENSION distseq;
SELECT distseq_create('v');
GRANT USAGE ON SEQUENCE distseq.v TO victim;
SQL

# The victim's script: one value per transaction, each timed by psql.
victim_script() {	# n
	echo '\timing on'
	awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) print "SELECT distseq_nextval('\''v'\'');" }'
}
victim_script "$values" > "$work/victim.sql"
victim_script $(( values / 10 )) > "$work/warmup.sql"
# The attacker's: DROP DATABASE of "target" at t0 + i / rate seconds, until
# a row in table stop says so.
attacker_script() {	# target
	echo "SELECT clock_timestamp() AS t0 \\gset"
	awk -v r="$rate" -v t="$1" 'BEGIN { for (i = 1; i <= r * 3600; i++)
		printf "DROP DATABASE %s;\nSELECT pg_sleep_until(:'\''t0'\''::timestamptz + interval '\''1 microsecond'\'' * %d), EXISTS (SELECT FROM stop) AS stop \\gset\n\\if :stop\n\\q\n\\endif\n", t, i * 1000000 / r }'
}
attacker_script vdb > "$work/storm.sql"
attacker_script no_such_database > "$work/control.sql"
chmod 644 "$work"/*.sql
psql_as postgres adb -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
CREATE TABLE stop ();
GRANT SELECT ON stop TO attacker;
SQL

# One phase: the victim's session, its values and timings into $work/<phase>.*
run_victim() {	# phase script
	psql_as victim vdb -At -f "$work/$2" > "$work/$1.out" 2> "$work/$1.err" || true
	grep -v '^Time: ' "$work/$1.out" > "$work/$1.values" || true
	sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' "$work/$1.out" > "$work/$1.ms"
}

# phase,values,errors,rising,p50,p99,p99.9,max
summarize() {	# phase
	local n errors rising
	n=$(grep -c . "$work/$1.values" || true)
	errors=$(grep -c 'ERROR' "$work/$1.err" || true)
	rising=$(awk 'NR > 1 && $1 <= prev { bad++ } { prev = $1 }
		END { print (bad ? "no:" bad : "yes") }' "$work/$1.values")
	sort -n "$work/$1.ms" | awk -v p="$1" -v n="$n" -v e="$errors" -v r="$rising" '{ v[NR] = $1 }
		function pct(q,   i) { i = int(q * NR); if (i < q * NR) i++; if (i < 1) i = 1; return v[i] }
		END { printf "%s,%d,%d,%s,%.3f,%.3f,%.3f,%.3f\n", p, n, e, r, pct(0.50), pct(0.99), pct(0.999), v[NR] }'
}

bench_log "warm-up: $(( values / 10 )) values"
run_victim warmup warmup.sql
bench_log "quiet: $values values"
run_victim quiet victim.sql

# The victim draws while the attacker runs script <phase>.sql
run_attacked() {	# phase
	local pid t0 t1
	psql_as postgres adb -c 'TRUNCATE stop'
	psql_as attacker adb -At -f "$work/$1.sql" > /dev/null 2> "$work/$1.attacker" &
	pid=$!
	sleep 1
	t0=$(date +%s.%N)
	run_victim "$1" victim.sql
	t1=$(date +%s.%N)
	psql_as postgres adb -c 'INSERT INTO stop DEFAULT VALUES'
	wait "$pid" || true
	# attempts, seconds they went on for
	echo "$(grep -c ERROR "$work/$1.attacker" || true) $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a + 1 }')" > "$work/$1.attempts"
}

bench_log "control: $values values, $rate attempts a second to drop a database that does not exist"
run_attacked control
bench_log "storm: $values values, $rate attempts a second by another role to drop the victim's database"
run_attacked storm
refused=$(grep -c 'must be owner of database vdb' "$work/storm.attacker" || true)

bench_log "quiet2: $values values"
run_victim quiet2 victim.sql

report=$out/dropdb_storm.txt
{
	echo "dropdb_storm: $values values per phase, one per transaction; commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo none)$(git -C "$here" diff --quiet HEAD -- src 2>/dev/null || echo ' + uncommitted changes in src'); $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
	printf "%-7s %7s %6s %-8s %9s %9s %9s %9s\n" phase values errors rising "p50 ms" "p99 ms" "p99.9 ms" "max ms"
	for p in quiet control storm quiet2; do
		summarize "$p"
	done | tee "$work/summary.csv" | while IFS=, read -r p n e r p50 p99 p999 mx; do
		printf "%-7s %7s %6s %-8s %9s %9s %9s %9s\n" "$p" "$n" "$e" "$r" "$p50" "$p99" "$p999" "$mx"
	done
	for p in control storm; do
		read -r attempts secs < "$work/$p.attempts"
		echo "$p: $attempts DROP DATABASE attempts in $secs s ($(awk -v a="$attempts" -v s="$secs" 'BEGIN { printf "%.1f", a / s }')/s)"
	done
	echo "storm: $refused attempts refused as not the owner"
	awk -F, '{ p999[$1] = $7 } END {
		printf "storm p99.9 over quiet: %.2fx, over quiet2: %.2fx, over control: %.2fx\n",
			p999["storm"] / p999["quiet"], p999["storm"] / p999["quiet2"],
			p999["storm"] / p999["control"] }' "$work/summary.csv"
	if grep -q ERROR "$work/storm.err"; then
		echo "victim's errors in the storm (first 5):"
		grep ERROR "$work/storm.err" | sed "s/^psql:[^ ]* //" | sort | uniq -c | sort -rn | head -5
	fi
} | tee "$report"
bench_log "written to $report"
