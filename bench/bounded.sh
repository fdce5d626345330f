#!/usr/bin/env bash
# distseq benchmark: does the catalog stay bounded on a long history?
#
#   bash bench/bounded.sh            # full run (about 2 minutes)
#   bash bench/bounded.sh --quick    # smoke run (under a minute)
#
# Options (after --quick, if any, to override it):
#   --solo-n N       values drawn on the lone server    (full 200000, quick 20000)
#   --group-n N      values drawn on each group server  (full 30000, quick 5000)
#   --passes M       distseq_maintain() passes on each  (full 1000, quick 50)
#   --aged N         synthetic closed windows for the refill cost
#                    (full 100000, quick 10000; 0 skips callgrind)
#   --aged-draw D    values per phase under callgrind   (full 2000, quick 200)
#   --keep           keep the work directory
#   --no-build       use the installed extension, do not build and install it
#   --pg MAJOR       PostgreSQL to run on: 15 (default) or one built by
#                    scripts/build-pg.sh
#
# Windows are small so that refills close them often: on a lone server,
# sequence 'solo' (block_size 10, window_size 20: every refill takes and
# closes one window, a segment being at least 10 blocks); on three servers
# in one group, sequence 'g' (block_size 10, window_size 100), whose
# windows the agents open by majority, with distseq.agent_interval = 200ms.  One session draws the values of solo
# while one per group server draws those of g, one server after the other
# (at once, three agents racing for windows this small can fail a refill
# with "could not win a window ... in 5 tries"), then each server runs
# --passes distseq_maintain() passes, all at once.  The table gives, per server and sequence, the
# windows' worth of values it drew and the rows of distseq_windows it keeps
# (of them open): a bounded catalog keeps a few rows whatever the history.
# Then bench/callgrind.sh --aged: the refill worker's instructions per
# refill on a sequence with N closed windows against a fresh one.
# Results in bench/out/bounded.csv (and callgrind_aged.csv).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

solo_n=200000
group_n=30000
passes=1000
aged=100000
aged_draw=2000
keep=0
build=1
pg_major=
while [ $# -gt 0 ]; do
	case $1 in
		--quick) solo_n=20000; group_n=5000; passes=50; aged=10000; aged_draw=200 ;;
		--solo-n) solo_n=$2; shift ;;
		--group-n) group_n=$2; shift ;;
		--passes) passes=$2; shift ;;
		--aged) aged=$2; shift ;;
		--aged-draw) aged_draw=$2; shift ;;
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
bench_workdir dsbounded
trap bench_cleanup EXIT

port_base=54480
node_port() { echo $((port_base + $1)); }
psql_node() {	# node psql-args...
	local s=$1
	shift
	as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$(node_port "$s")" -d bench "$@"
}
# node 0 is the lone server; 1, 2 and 3 the group
start_node() {	# node
	local m
	bench_initdb "n$1" "listen_addresses = '127.0.0.1'
port = $(node_port "$1")
max_connections = 20
shared_buffers = 32MB
shared_preload_libraries = 'distseq'
distseq.segment_lifetime = 1ms
distseq.agent_interval = 200ms"
	bench_start "n$1"
	as_pg "$PGBIN/createdb" -h "$work" -p "$(node_port "$1")" bench
	{
		echo "CREATE EXTENSION distseq;"
		if [ "$1" -gt 0 ]; then
			for m in 1 2 3; do
				[ "$m" = "$1" ] && continue
				echo "CREATE SERVER node$m FOREIGN DATA WRAPPER distseq
					OPTIONS (hostaddr '127.0.0.1', port '$(node_port "$m")', dbname 'bench');"
				echo "CREATE USER MAPPING FOR CURRENT_USER SERVER node$m OPTIONS (user 'postgres');"
			done
		fi
	} | psql_node "$1" >/dev/null
}

bench_log "starting a lone server and three in one group in $work"
for s in 0 1 2 3; do start_node "$s"; done
for s in 1 2 3; do
	for m in 1 2 3; do
		[ "$m" = "$s" ] || psql_node "$s" -c "SELECT distseq_add_peer('node$m')" >/dev/null
	done
done
psql_node 0 -c "SELECT distseq_create('solo', block_size => 10, window_size => 20)" >/dev/null
psql_node 1 -c "SELECT distseq_create('g', block_size => 10, window_size => 100)" >/dev/null
for s in 1 2 3; do psql_node "$s" -c "SELECT count(*) FROM distseq_maintain()" >/dev/null; done

bench_log "drawing: $solo_n values of solo, and $group_n of g on each group server in turn"
draw() {	# node sequence N
	psql_node "$1" -At -c "SELECT count(distseq_nextval('$2')) FROM generate_series(1, $3)" >/dev/null
}
draw 0 solo "$solo_n" &
solo_pid=$!
for s in 1 2 3; do draw "$s" g "$group_n"; done
wait "$solo_pid" || { echo "the draw of solo failed" >&2; exit 1; }

bench_log "$passes distseq_maintain() passes on each server"
pids=()
for s in 0 1 2 3; do
	psql_node "$s" -At -c "DO \$\$ BEGIN FOR i IN 1..$passes LOOP PERFORM count(*) FROM distseq_maintain(); END LOOP; END \$\$" >/dev/null &
	pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { echo "distseq_maintain() failed" >&2; exit 1; }; done

# server,sequence,window_size,values_issued,refills,windows_worth,rows,open_rows
: > "$work/rows"
for s in 0 1 2 3; do
	psql_node "$s" -At -F, -c "SELECT $s, s.sequence_name, s.window_size, st.values_issued, st.refills,
			st.values_issued / s.window_size,
			(SELECT count(*) FROM distseq.distseq_windows w WHERE w.sequence_name = s.sequence_name),
			(SELECT count(*) FROM distseq.distseq_windows w WHERE w.sequence_name = s.sequence_name
				AND w.next_hi < w.window_end)
		FROM distseq.distseq_sequences s JOIN distseq_status st USING (sequence_name)" >> "$work/rows"
done
# the open windows of the group's servers never overlap (a closed row
# merges a run of a server's windows, spanning the others' between them)
for s in 1 2 3; do
	psql_node "$s" -At -F, -c "SELECT $s, window_start, window_end FROM distseq.distseq_windows
		WHERE sequence_name = 'g' AND next_hi < window_end"
done | sort -t, -k2,2n | awk -F, 'NR > 1 && $2 < top { print "windows of servers " topn " and " $1 " overlap"; bad = 1 }
	{ top = $3; topn = $1 } END { exit bad }' >&2 || exit 1
for s in 0 1 2 3; do bench_stop "n$s"; done

aged_txt=
if [ "$aged" -gt 0 ]; then
	if ! command -v valgrind >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
		bench_log "installing valgrind"
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind; } >/dev/null || true
	fi
	if command -v valgrind >/dev/null 2>&1; then
		bench_log "bench/callgrind.sh --aged $aged --aged-draw $aged_draw"
		bash "$here/bench/callgrind.sh" --no-build ${pg_major:+--pg "$pg_major"} \
			--aged "$aged" --aged-draw "$aged_draw" > "$work/aged.txt"
		aged_txt=$work/aged.txt
	else
		echo "valgrind is not installed: no refill cost" >&2
	fi
fi

csv=$out/bounded.csv
{
	echo "server,sequence,window_size,values_issued,refills,windows_worth,rows,open_rows,passes"
	awk -F, -v p="$passes" '{ print $0 "," p }' "$work/rows"
} > "$csv"

echo
echo "distseq bounded catalog, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores; a lone server (solo) and three in one group (g)" \
	"drawing (the group's in turn), then $passes distseq_maintain() passes on each; distseq.segment_lifetime 1ms, agent_interval 200ms"
awk -F, 'NR > 1 {
	if (!hdr++) printf "%-8s %-9s %7s %12s %8s %15s %14s %10s\n", "server", "sequence", "window", "values drawn", "refills", "windows worth", "rows in table", "open rows"
	printf "%-8s %-9s %7s %12s %8s %15s %14s %10s\n", ($1 == 0 ? "lone" : "group " $1), $2, $3, $4, $5, $6, $7, $8 }' "$csv"
if [ -n "$aged_txt" ]; then
	awk -F, '$1 == "refills" { nf = $2; na = $3 }
		$1 == "windows_rows_before" { bf = $2; ba = $3 }
		$1 == "windows_rows_after" { af = $2; aa = $3 }
		$1 == "worker_process" { wf = $2; wa = $3; wr = $4 }
		$1 == "distseq_catalog_reserve" { cf = $2; ca = $3; cr = $4 }
		END {
			printf "refill cost under callgrind (worker instructions per refill, %d and %d refills):\n", nf, na
			printf "  %-36s %12s %12s %8s\n", "", "fresh", "aged", "ratio"
			printf "  %-36s %12s %12s %7sx\n", "distseq_catalog_reserve()", cf, ca, cr
			printf "  %-36s %12s %12s %7sx\n", "whole worker process", wf, wa, wr
			printf "  %-36s %12s %12s\n", "distseq_windows rows before the draws", bf, ba
			printf "  %-36s %12s %12s\n", "distseq_windows rows after the draws", af, aa
		}' "$out/callgrind_aged.csv"
	sed -n 's/^callgrind: the refill worker on a long history, [^;]*; /  callgrind.sh --aged: /p' "$aged_txt"
fi
bench_log "done in $(( $(date +%s) - bench_t0 ))s"
