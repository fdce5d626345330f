#!/usr/bin/env bash
# What a hung server of one sequence costs the other sequences of its
# database: the throughput of a sequence served from the node's own
# windows, with and without another sequence whose only server hangs, as a
# ratio measured in one run.
#
#   bash bench/hung_source.sh              # 3 rounds of 5 s per phase
#   bash bench/hung_source.sh --rounds R --duration S --clients C --no-build
#
# Two throwaway servers as the postgres OS user under /tmp: S holds
# sequence "far"; D draws "far" only from S (servers => ARRAY['src']) and
# has "near" of its own, refilled as often as it can be
# (distseq.segment_lifetime = 1ms, block_size 1: a refill every ten
# values, the segment's floor), so that every stall of D's worker shows.  Each round runs
# pgbench on "near" for S seconds twice: once with S running and no one
# drawing "far" ("alone"), once with S stopped by SIGSTOP (connections hang:
# the kernel accepts them, nobody answers) while two sessions draw "far"
# every 10 ms, as an application that retries would ("hung").  distseq.remote_timeout is 1s on D.  Prints tps of each
# phase per round and the ratio hung / alone of the sums; exits non-zero if
# a pgbench run did no transaction.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

rounds=3
duration=5
clients=4
build=1
while [ $# -gt 0 ]; do
	case $1 in
		--rounds) rounds=$2; shift ;;
		--duration) duration=$2; shift ;;
		--clients) clients=$2; shift ;;
		--no-build) build=0 ;;
		-h|--help) script_usage "$0"; exit 0 ;;
		*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
	shift
done

bench_prepare $build

bench_workdir dshung
port_s=54451
port_d=54452
stopped=

cleanup() {
	[ -n "$stopped" ] && kill -CONT $stopped 2>/dev/null || true
	bench_stop s immediate
	bench_stop d immediate
	rm -rf "$work"
}
trap cleanup EXIT

start_server() {	# dir port extra-conf
	bench_initdb "$1" "listen_addresses = '127.0.0.1'
port = $2
shared_preload_libraries = 'distseq'
$3"
	bench_start "$1"
}
psql_on() {	# port psql-args...
	local port=$1
	shift
	as_pg "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work" -p "$port" -d postgres "$@"
}

start_server s $port_s ""
start_server d $port_d "distseq.remote_timeout = '1s'
distseq.segment_lifetime = '1ms'"
psql_on $port_s -c "CREATE EXTENSION distseq" -c "SELECT distseq_create('far', block_size => 10)" >/dev/null
psql_on $port_d >/dev/null <<SQL
CREATE EXTENSION distseq;
CREATE SERVER src FOREIGN DATA WRAPPER distseq
	OPTIONS (host '127.0.0.1', port '$port_s', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER src OPTIONS (user 'postgres');
SELECT distseq_create('far', block_size => 10, servers => ARRAY['src']);
SELECT distseq_create('near', block_size => 1);
SELECT distseq_nextval('far'), distseq_nextval('near');
SQL
echo "SELECT distseq_nextval('near');" > "$work/near.sql"
# an application that retries "far" every 10 ms, error or not
for i in $(seq 1 $((duration * 200 + 400))); do
	echo "SELECT distseq_nextval('far');"
	echo "SELECT pg_sleep(0.01);"
done > "$work/far.sql"
chmod 644 "$work/near.sql" "$work/far.sql"

tps() {	# phase
	local out
	out=$(as_pg "$PGBIN/pgbench" -n -h "$work" -p $port_d -c "$clients" -j "$clients" \
		-T "$duration" -f "$work/near.sql" postgres 2>&1) || { echo "$out" >&2; return 1; }
	local t n
	n=$(echo "$out" | awk '/number of transactions actually processed/ { print $NF }')
	t=$(echo "$out" | awk '/^tps = / { print $3; exit }')
	if [ -z "$t" ] || [ -z "$n" ] || [ "$n" -eq 0 ] || [ "$t" = nan ] || [ "$t" = -nan ]; then
		echo "pgbench ($1) ran no transaction:" >&2
		echo "$out" >&2
		return 1
	fi
	echo "$t"
}

s_pids() {
	local pm
	pm=$(head -1 "$work/s/postmaster.pid")
	echo "$pm $(pgrep -P "$pm" | tr '\n' ' ')"
}

sum_alone=0
sum_hung=0
printf '%-6s %12s %12s\n' round alone_tps hung_tps
for r in $(seq 1 "$rounds"); do
	alone=$(tps alone)

	stopped=$(s_pids)
	kill -STOP $stopped
	loops=()
	for l in 1 2; do
		psql_on $port_d -v ON_ERROR_STOP=0 -f "$work/far.sql" >/dev/null 2>&1 &
		loops+=($!)
	done
	hung=$(tps hung)
	kill "${loops[@]}" 2>/dev/null || true
	wait "${loops[@]}" 2>/dev/null || true
	kill -CONT $stopped
	stopped=
	# the next round starts with a source that answers
	psql_on $port_d -c "SELECT count(*) FROM distseq_maintain()" >/dev/null

	printf '%-6s %12.0f %12.0f\n' "$r" "$alone" "$hung"
	sum_alone=$(awk -v a="$sum_alone" -v b="$alone" 'BEGIN { print a + b }')
	sum_hung=$(awk -v a="$sum_hung" -v b="$hung" 'BEGIN { print a + b }')
done
awk -v a="$sum_alone" -v h="$sum_hung" \
	'BEGIN { printf "near keeps %.0f%% of its throughput while far'"'"'s only server hangs\n", 100 * h / a }'
