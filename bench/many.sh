#!/usr/bin/env bash
# distseq benchmark: many sequences, many clients.
#
#   bash bench/many.sh            # full run (about 10 minutes)
#   bash bench/many.sh --quick    # smoke run (about a minute)
#
# Options (after --quick, if any, to override it):
#   --sequences N    sequences of each kind        (full 10000, quick 1000)
#   --clients C      pgbench clients               (full 200, quick 20)
#   --duration S     seconds per pgbench run       (full 10, quick 2)
#   --rounds R       interleaved pgbench rounds    (full 3, quick 1)
#   --settle S       seconds warm backends draw before the calm wait
#                    (full 30, quick 2)
#   --phase S        seconds of a turn of warm backends (full 5, quick 3)
#   --pairs P        measured pairs of turns        (full 8, quick 2)
#   --conf LINE      a line for the server's postgresql.conf, e.g.
#                    "distseq.backend_marks = 1024" (may be repeated)
#   --keep           keep the work directory
#   --no-build       use the installed extension, do not build and install it
#   --pg MAJOR       PostgreSQL to run on: 15 (default) or one built by
#                    scripts/build-pg.sh
#
# One server with distseq.max_sequences = N + 10 and max_connections =
# 2C + 10.  It times creating N distseq sequences (distseq_create, one
# statement each, as a migration would) against N native sequences
# (CREATE SEQUENCE ... CACHE 100), in ten interleaved chunks, and one
# session's first draw from each.
# The same draws again in a new session time a backend's first use of
# each sequence on a warm server.  Then pgbench runs C clients, each
# transaction drawing one value from a sequence chosen at random among the
# N (distseq_nextval('d' || :k), nextval('n' || :k)), and the same
# statement with k always 1 (one sequence of each kind), in interleaved
# rounds.  Each pgbench run connects anew, so its clients pay a first use
# for most sequences they draw from: many ÷ one shows that cost, for native
# sequences too.  Then the same draws on backends that have used every
# sequence already, as a pool's long-lived connections have: each client
# first draws from all N, 20 per transaction, then sets its
# application_name.  Two such runs of C clients each, one drawing from a
# random one of the N once warm, the other from the first (so that only
# the number of sequences differs), take turns: one draws while the other
# is stopped, S seconds each (see warm_pair below).  Warm many ÷ one is
# the median of the ratios of each two turns in a row.
# Last, the shared memory distseq allocated (pg_shmem_allocations) and what
# it comes to per sequence.  Results in bench/out/many.csv.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

nseq=10000
clients=200
duration=10
rounds=3
settle=30
phase=5
pairs=8
conf=
keep=0
build=1
pg_major=
while [ $# -gt 0 ]; do
	case $1 in
		--quick) nseq=1000; clients=20; duration=2; rounds=1; settle=2; phase=3; pairs=2 ;;
		--sequences) nseq=$2; shift ;;
		--clients) clients=$2; shift ;;
		--duration) duration=$2; shift ;;
		--rounds) rounds=$2; shift ;;
		--settle) settle=$2; shift ;;
		--phase) phase=$2; shift ;;
		--pairs) pairs=$2; shift ;;
		--conf) conf="$conf
$2"; shift ;;
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
bench_workdir dsmany scripts
trap bench_cleanup EXIT

port=54490
psql_a() {
	as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$port" -d bench "$@"
}

bench_initdb a "port = $port
max_connections = $((2 * clients + 10))
shared_buffers = 256MB
max_wal_size = 4GB
shared_preload_libraries = 'distseq'
distseq.max_sequences = $((nseq + 10))
$conf"
bench_start a
as_pg "$PGBIN/createdb" -h "$work" -p "$port" bench
psql_a -c "CREATE EXTENSION distseq" >/dev/null

# creation, one statement each in autocommit, as a migration would run
# them: in ten interleaved chunks, which kind goes first alternating, so
# that a change in the machine's speed during the run weighs on both kinds
create_ms() {	# file
	local t0 t1
	t0=$(date +%s%N)
	psql_a -f "$1" >/dev/null
	t1=$(date +%s%N)
	echo $(( (t1 - t0) / 1000000 ))
}
create_chunks=10
native_ms=0
distseq_ms=0
bench_log "creating $nseq native and $nseq distseq sequences, $create_chunks interleaved chunks"
for c in $(seq 0 $((create_chunks - 1))); do
	lo=$(( c * nseq / create_chunks + 1 ))
	hi=$(( (c + 1) * nseq / create_chunks ))
	seq "$lo" "$hi" | awk '{ printf "CREATE SEQUENCE n%d CACHE 100;\n", $1 }' > "$work/scripts/native.sql"
	seq "$lo" "$hi" | awk '{ printf "SELECT distseq_create(\x27d%d\x27);\n", $1 }' > "$work/scripts/distseq.sql"
	kinds="native distseq"
	[ $((c % 2)) -eq 1 ] && kinds="distseq native"
	for k in $kinds; do
		ms=$(create_ms "$work/scripts/$k.sql")
		if [ "$k" = native ]; then native_ms=$((native_ms + ms)); else distseq_ms=$((distseq_ms + ms)); fi
	done
done

# the same statement for many and one: only the number of sequences differs
draw_script() {	# file N function prefix
	printf '\\set k random(1, %d)\nSELECT %s(%s || :k);\n' "$2" "$3" "'$4'" > "$work/scripts/$1.sql"
}
draw_script many_distseq "$nseq" distseq_nextval d
draw_script many_native "$nseq" nextval n
draw_script one_distseq 1 distseq_nextval d
draw_script one_native 1 nextval n
# warm backends: each client first draws from all N, 20 per transaction (a
# first use locks the sequence until the transaction ends: 100 at once in
# 200 backends would fill the shared lock table, max_locks_per_transaction)
warm_chunk=20
warm_txns=$(( (nseq + warm_chunk - 1) / warm_chunk ))
warm_script() {	# file function prefix sequences-drawn-after
	{
		printf '\\if :warmed < %d\n' "$warm_txns"
		printf 'SELECT count(%s((%s || g)::text)) FROM generate_series(:warmed * %d + 1, least(:warmed * %d + %d, %d)) g;\n' \
			"$2" "'$3'" "$warm_chunk" "$warm_chunk" "$warm_chunk" "$nseq"
		printf '\\set warmed :warmed + 1\n'
		printf '\\elif :warmed = %d\nSET application_name = %s;\n\\set warmed :warmed + 1\n' "$warm_txns" "'$1'"
		printf '\\else\n\\set k random(1, %d)\nSELECT %s(%s || :k);\n\\endif\n' "$4" "$2" "'$3'"
	} > "$work/scripts/$1.sql"
}
warm_script warm_distseq distseq_nextval d "$nseq"
warm_script warm_native nextval n "$nseq"
warm_script wone_distseq distseq_nextval d 1
warm_script wone_native nextval n 1
chown -R postgres "$work/scripts" 2>/dev/null || true

raw=$work/many.raw
: > "$raw"
variants="many_distseq many_native one_distseq one_native"
# one draw from every sequence of each kind, in one session: the server's
# first refills (distseq) and first cached values (native) are not what the
# rounds measure; its time is reported
draw_each() {	# expr
	psql_a -At -c "SELECT count($1) FROM generate_series(1, $nseq) g" >/dev/null
}
draw_both_ms() {	# one draw from each distseq, then each native sequence: "ms ms"
	local t0 t1 t2
	t0=$(date +%s%N)
	draw_each "distseq_nextval('d' || g)"
	t1=$(date +%s%N)
	draw_each "nextval(('n' || g)::regclass)"
	t2=$(date +%s%N)
	echo "$(( (t1 - t0) / 1000000 )) $(( (t2 - t1) / 1000000 ))"
}
read -r first_distseq_ms first_native_ms < <(draw_both_ms)
bench_log "first draw of each: distseq ${first_distseq_ms} ms, native ${first_native_ms} ms"
# the same in a new session: the server is warm, the backend is not (what
# a pgbench client pays at its first draw from each sequence)
read -r use_distseq_ms use_native_ms < <(draw_both_ms)
bench_log "first use of each in a new session: distseq ${use_distseq_ms} ms, native ${use_native_ms} ms"

# round 0 warms the backends up and is dropped
for r in $(seq 0 "$rounds"); do
	set -- $variants
	# rotate the order every round
	for i in $(seq $((r % 3))); do set -- "$@" "$1"; shift; done
	for v in "$@"; do
		d=$duration
		[ "$r" -eq 0 ] && d=$(( duration > 3 ? duration : 3 ))
		bench_log "round $r: $v, $clients clients, ${d}s"
		tps=$(as_pg "$PGBIN/pgbench" -n -M prepared -h "$work" -p "$port" -c "$clients" -j 2 \
			-T "$d" -f "$work/scripts/$v.sql" bench 2>&1 |
			awk '/^tps = / { print $3 }' || true)
		[ -n "$tps" ] || { echo "pgbench $v measured nothing" >&2; exit 1; }
		echo "$r,$v,$tps" >> "$raw"
	done
done

# Warm backends, many and one of a kind measured in turns: two pgbench runs
# of C clients each after the same warm-up, A drawing from a random one of
# the N sequences, B always from the first.  One runs at a time, the other
# is stopped (SIGSTOP: its clients send nothing, its backends idle), so
# that C clients draw at any moment.  They take turns of $phase seconds,
# A B A B ..., first for $settle seconds (the warm-up drew from every
# sequence at once, and their next refills come in a wave of thousands,
# seconds later), then until a pair of turns made at most 5 refills a
# second (or two more minutes); then $pairs pairs of turns count.  pgbench
# reports progress every second with a timestamp; a turn's tps is that of
# the reports whose whole interval lies in it, and many ÷ one is the
# median of the ratios of each two turns in a row: a change in the
# machine's speed weighs on both alike.
pg_user=$(as_pg id -un)
declare -A pid
refills() { psql_a -At -c "SELECT sum(refills) FROM distseq_status"; }
warm_failed() {	# script what
	echo "pgbench $1 $2:" >&2
	cat "$work/$1.out" >&2
	exit 1
}
# let script run for $phase seconds; sets $made_refills to the refill
# worker's count when it stopped and appends "script from to count" to
# $turns
warm_turn() {	# script
	local from to
	from=$(date +%s%N)
	kill -CONT "${pid[$1]}" 2>/dev/null || warm_failed "$1" ended
	sleep "$phase"
	kill -STOP "${pid[$1]}"
	to=$(date +%s%N)
	made_refills=$(refills)
	echo "$1 $from $to $made_refills" >> "$turns"
}
# the EXIT trap of warm_pair: ends the pgbench runs it started
warm_end() {
	local p
	for p in "${pid[@]}"; do
		kill -CONT "$p" 2>/dev/null || true
		kill -TERM "$p" 2>/dev/null || true
	done
	wait
}
warm_start() {	# script: start it and wait until its clients are warm
	local i
	# not through as_pg: runuser would stop itself when pgbench stops
	env LC_ALL=C.UTF-8 "$PGBIN/pgbench" -n -M prepared -h "$work" -p "$port" -U "$pg_user" \
		-c "$clients" -j 2 -T 7200 -P 1 --progress-timestamp -D warmed=0 \
		-f "$work/scripts/$1.sql" bench > "$work/$1.out" 2>&1 &
	pid[$1]=$!
	for i in $(seq 1 1800); do
		sleep 0.5
		kill -0 "${pid[$1]}" 2>/dev/null || warm_failed "$1" ended
		if [ "$(psql_a -At -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$1'")" -ge "$clients" ]; then
			kill -STOP "${pid[$1]}"
			bench_log "$1: every client warm after $((i / 2))s"
			return
		fi
	done
	echo "pgbench $1: the clients never finished warming up" >&2
	exit 1
}
warm_pair() {	# kind: prints "many-tps one-tps ratio most-refills-in-a-turn ratios..."
	local a=warm_$1 b=wone_$1 t0 i r0 r1 rs result
	trap warm_end EXIT
	turns=$work/turns_$1
	: > "$turns"
	warm_start "$a"
	warm_start "$b"
	rs=$(refills)
	made_refills=$rs
	t0=$(date +%s)
	while [ $(( $(date +%s) - t0 )) -lt "$settle" ]; do
		warm_turn "$a"
		warm_turn "$b"
	done
	for i in $(seq 1 $(( 120 / (2 * phase) + 1 ))); do
		r0=$made_refills
		warm_turn "$a"
		warm_turn "$b"
		[ $((made_refills - r0)) -le $(( 5 * 2 * phase )) ] && break
	done
	r0=$made_refills
	: > "$turns"
	for i in $(seq 1 "$pairs"); do
		warm_turn "$a"
		warm_turn "$b"
	done
	r1=$made_refills
	for v in "$a" "$b"; do
		kill -0 "${pid[$v]}" 2>/dev/null && ! grep -q 'aborted' "$work/$v.out" ||
			warm_failed "$v" failed
	done
	# per turn, the reports of whole intervals in it: count = tps x seconds
	result=$(awk -v a="$a" -v r0="$r0" '
		FILENAME == ARGV[1] {
			n++; who[n] = $1; from[n] = $2 / 1e9; to[n] = $3 / 1e9
			made = $4 - (n > 1 ? prev : r0); prev = $4
			if (made > most) most = made
			next
		}
		/^progress: / {
			t = $2 + 0
			if (FILENAME in last) {
				for (k = 1; k <= n; k++)
					if (index(FILENAME, "/" who[k] ".out") && last[FILENAME] >= from[k] && t <= to[k]) {
						cnt[k] += ($4 + 0) * (t - last[FILENAME]); sec[k] += t - last[FILENAME]
					}
			}
			last[FILENAME] = t
		}
		function median(v, c,    i, j, x) {
			for (i = 2; i <= c; i++) { x = v[i]; for (j = i - 1; j > 0 && v[j] > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
			return c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2
		}
		END {
			for (k = 1; k <= n; k++) {
				if (sec[k] < 1) { print "a turn of " who[k] " had no whole second of reports" > "/dev/stderr"; exit 1 }
				tps[k] = cnt[k] / sec[k]
				if (who[k] == a) ta[++na] = tps[k]; else tb[++nb] = tps[k]
			}
			for (k = 1; k < n; k++) {
				ratio[k] = (who[k] == a ? tps[k] / tps[k + 1] : tps[k + 1] / tps[k])
				sorted[k] = ratio[k]
			}
			printf "%.1f %.1f %.4f %d", median(ta, na), median(tb, nb), median(sorted, n - 1), most
			for (k = 1; k < n; k++) printf " %.3f", ratio[k]
			printf "\n"
		}' "$turns" "$work/$a.out" "$work/$b.out")
	bench_log "$1 warm: $((r0 - rs)) refills before the measured turns, $((r1 - r0)) in them; many, one, many ÷ one (tps: medians of the turns; the ratio: of each two turns in a row), the most refills in one turn, the ratios in order: $result"
	echo "$result"
}
for kind in distseq native; do
	bench_log "warm backends, $kind: $pairs pairs of ${phase}s turns"
	read -r tps_many tps_one ratio _ < <(warm_pair $kind) || true
	[ -n "$ratio" ] || { echo "warm $kind measured nothing" >&2; exit 1; }
	echo "1,warm_$kind,$tps_many" >> "$raw"
	echo "1,wone_$kind,$tps_one" >> "$raw"
	echo "1,warm_ratio_$kind,$ratio" >> "$raw"
done

in_use=$(psql_a -At -c "SELECT count(*) FROM distseq_status")
shmem=$(psql_a -At -c "SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name LIKE 'distseq%'")
psql_a -At -c "SELECT 1 FROM distseq_status WHERE values_issued < 0" | grep -q . &&
	{ echo "a sequence reports negative values issued" >&2; exit 1; }

csv=$out/many.csv
{
	echo "measure,value,unit"
	echo "create_native,$native_ms,ms"
	echo "create_distseq,$distseq_ms,ms"
	echo "first_native,$first_native_ms,ms"
	echo "first_distseq,$first_distseq_ms,ms"
	echo "use_native,$use_native_ms,ms"
	echo "use_distseq,$use_distseq_ms,ms"
	# per variant the median tps of the rounds; warm, the median tps of the
	# turns and the median of the pairs' own many / one ratios
	awk -F, '$1 > 0 { print $2 "," $3 "," ($2 ~ /^warm_ratio/ ? "ratio" : "tps") }' "$raw" | sort -t, -k1,1 -k2,2g | awk -F, '
		function flush() { if (c) printf (unit == "tps" ? "%s,%.1f,%s\n" : "%s,%.3f,%s\n"), key, (c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2), unit }
		$1 != key { flush(); key = $1; unit = $3; c = 0 }
		{ v[++c] = $2 }
		END { flush() }'
	echo "sequences_in_use,$in_use,count"
	echo "shmem_distseq,$shmem,bytes"
} > "$csv"

echo
echo "distseq with many sequences, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores;" \
	"$nseq sequences of each kind, $clients pgbench clients, median of $rounds interleaved ${duration}s rounds;" \
	"warm: $pairs pairs of ${phase}s turns"
awk -F, -v n="$nseq" -v c="$clients" '
	NR > 1 { val[$1] = $2 }
	END {
		printf "%-58s %12s %10s\n", "measure", "value", "ratio"
		printf "%-58s %10.1f s %9.2fx\n", "create " n " distseq sequences (x native)", val["create_distseq"] / 1000, val["create_distseq"] / val["create_native"]
		printf "%-58s %10.1f s\n", "create " n " native sequences CACHE 100", val["create_native"] / 1000
		printf "%-58s %10.1f s %9.2fx\n", "first draw of each distseq sequence, one session (x native)", val["first_distseq"] / 1000, val["first_distseq"] / val["first_native"]
		printf "%-58s %8.0f tps %9.2fx\n", "distseq_nextval, random one of " n " (x native)", val["many_distseq"], val["many_distseq"] / val["many_native"]
		printf "%-58s %8.0f tps\n", "nextval CACHE 100, random one of " n, val["many_native"]
		printf "%-58s %10.1f s %9.2fx\n", "first use of each, a new session, server warm (x native)", val["use_distseq"] / 1000, val["use_distseq"] / val["use_native"]
		printf "%-58s %8.0f tps %9.2fx\n", "distseq_nextval, one sequence (many x one)", val["one_distseq"], val["many_distseq"] / val["one_distseq"]
		printf "%-58s %8.0f tps %9.2fx\n", "nextval, one native sequence (many x one)", val["one_native"], val["many_native"] / val["one_native"]
		printf "%-58s %8.0f tps %9.2fx\n", "distseq_nextval, random one, backends warm (x one)", val["warm_distseq"], val["warm_ratio_distseq"]
		printf "%-58s %8.0f tps\n", "distseq_nextval, one sequence, backends warm", val["wone_distseq"]
		printf "%-58s %8.0f tps %9.2fx\n", "nextval, random one, backends warm (x one)", val["warm_native"], val["warm_ratio_native"]
		printf "%-58s %8.0f tps\n", "nextval, one native sequence, backends warm", val["wone_native"]
		printf "%-58s %8.1f MB %7.0f B/seq\n", "distseq shared memory, " val["sequences_in_use"] " sequences in use", val["shmem_distseq"] / 1048576, val["shmem_distseq"] / val["sequences_in_use"]
	}' "$csv"
