#!/usr/bin/env bash
# What distseq.standby_ack = all costs: refill latency with an asynchronous
# standby, acknowledgements off and on, and with no standby at all.
#
#   bash bench/standby_ack.sh            # about a minute on 2 cores
#
# Options:
#   --rounds R      interleaved rounds per variant (default 5)
#   --n N           values drawn per round (default 4000)
#   --keep          keep the work directory (servers' logs)
#   --no-build      use the installed extension, do not build and install it
#
# A primary with distseq preloaded and a streaming standby made with
# pg_basebackup, both under /tmp as the postgres OS user, both with fsync
# and synchronous_commit on.  Every refill is waited for: block_size 1, no
# prefetch (distseq.prefetch_threshold = 0) and segments that never grow
# (distseq.segment_lifetime = 1ms; they start at 10 blocks), so one session
# drawing N values waits for a refill every 10 values or fewer.  Each
# round draws from a fresh sequence and reads distseq_status: the refill
# latency is wait_time_ms / waits, what a session waits for a segment.
# Variants: standby_ack = off and all with the standby streaming, then, with
# the standby stopped, all with no standby.  The order of the first two
# rotates every round.  Prints the median of the rounds; the raw rounds go
# to bench/out/standby_ack.csv.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

rounds=5
n=4000
keep=0
build=1
while [ $# -gt 0 ]; do
	case $1 in
		--rounds) rounds=$2; shift ;;
		--n) n=$2; shift ;;
		--keep) keep=1 ;;
		--no-build) build=0 ;;
		-h|--help) script_usage "$0"; exit 0 ;;
		*) echo "unknown option: $1" >&2; exit 2 ;;
	esac
	shift
done

bench_prepare $build
out=$here/bench/out
mkdir -p "$out"
csv=$out/standby_ack.csv

bench_workdir dsack
port_p=54451
port_s=54452
trap bench_cleanup EXIT

psql_p() { as_pg "$PGBIN/psql" -X -q -At -v ON_ERROR_STOP=1 -h "$work" -p $port_p -d postgres "$@"; }

bench_initdb primary "listen_addresses = ''
port = $port_p
shared_preload_libraries = 'distseq'
distseq.prefetch_threshold = 0
distseq.segment_lifetime = '1ms'"
bench_start primary
as_pg "$PGBIN/pg_basebackup" -h "$work" -p $port_p -D "$work/standby" -R -X stream \
	-d "application_name=standby" >/dev/null
echo "port = $port_s" >> "$work/standby/postgresql.conf"
bench_start standby
psql_p -c "CREATE EXTENSION distseq" >/dev/null
for i in $(seq 1 100); do
	[ "$(psql_p -c "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")" = 1 ] && break
	sleep 0.1
done

set_ack() {
	psql_p -c "ALTER SYSTEM SET distseq.standby_ack = '$1'" -c "SELECT pg_reload_conf()" >/dev/null
	# the worker reads the file at its next wake-up: wait until a backend sees it
	for i in $(seq 1 50); do
		[ "$(psql_p -c "SHOW distseq.standby_ack")" = "$1" ] && break
		sleep 0.1
	done
	sleep 0.3
}

# variant round: draw n values from a fresh sequence, print its refill figures
measure() {
	local seq="b_$1_$2"
	psql_p -c "SELECT distseq_create('$seq', block_size => 1)" >/dev/null
	psql_p -c "SELECT count(distseq_nextval('$seq')) FROM generate_series(1, $n)" >/dev/null
	psql_p -F, -c "SELECT '$1', $2, refills, waits, round((wait_time_ms / GREATEST(waits, 1))::numeric, 3)
		FROM distseq_status WHERE sequence_name = '$seq'"
}

echo "variant,round,refills,waits,ms_per_refill" > "$csv"
set_ack off
measure warmup 0 >/dev/null
for r in $(seq 1 "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then order="off all"; else order="all off"; fi
	for v in $order; do
		set_ack $v
		measure "$v" "$r" >> "$csv"
	done
done
bench_stop standby
for i in $(seq 1 100); do
	[ "$(psql_p -c "SELECT count(*) FROM pg_stat_replication")" = 0 ] && break
	sleep 0.1
done
set_ack all
for r in $(seq 1 "$rounds"); do
	measure all_no_standby "$r" >> "$csv"
done

echo "refill latency, $n values per round, block_size 1, segments of at most 10 values, no prefetch"
echo "median of $rounds rounds ($(nproc) cores, $("$PGBIN/postgres" --version)):"
for v in off all all_no_standby; do
	case $v in
		off) label="off, standby streaming" ;;
		all) label="all, standby streaming" ;;
		*) label="all, no standby" ;;
	esac
	awk -F, -v v=$v '$1 == v { print $5 "," $3 }' "$csv" | sort -t, -g | awk -F, -v l="$label" '
		{ ms[NR] = $1; refills += $2 }
		END {
			if (NR == 0 || refills == 0) { print "no refill measured for " l; exit 1 }
			printf "  standby_ack = %-24s %7.3f ms per refill (%d refills in all)\n", l, ms[int((NR + 1) / 2)], refills
		}'
done
echo "raw rounds: $csv"
