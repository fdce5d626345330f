#!/usr/bin/env bash
# Model check of the window allocator and its membership changes
# (test/model/allocator_sim.c).
#
# Must pass (no violation):
#   - the protocol as the code implements it ("impl", 11659f2: members are
#     only added, joiners seeded for every sequence), seeded random runs on
#     3, 5, 7, 20 and 100 nodes; each run goes through many clusters, each
#     with its own mix of events (--vary), restarted when no change is done
#     any more (a failed add whose revert failed wedges a group for good);
#   - the same with the proposed fixes ("fixed", with removes), fewer runs;
#   - the scripted counterexample "joiners" under impl (fixed by the seeds),
#     and every scripted counterexample under fixed.
# Must be caught (shows the checker can fail; one violation in the variant's
# runs is enough):
#   - each --broken variant: one mechanism taken out of fixed (which still
#     removes members: noquorum needs removes), or out of impl with adds only
#     (noepoch, nocas; noseed, the joiner left unseeded as before 11659f2:
#     random runs find it in only a few runs, 3 of these 12);
#   - the remove counterexamples twonode, shrink, shrink5, under the brief's
#     protocol and under impl with the old remove brought back
#     (--changes=add,remove), and random runs of the latter; and joiners
#     under impl without the seed.
# Needs only a C compiler.  A violation in an impl run is a flaw of the code
# (or of its model): the first ones are shown in full, with the trace that
# led to them.
#
#   bash test/model/run.sh               # MODEL_JOBS=n runs n at a time (default: nproc)
#
# Ends with "model: N passed, M failed" (one per run that must pass, one per
# variant that must be caught); exits non-zero when M > 0.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/distseq-model.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)

if ! cc -O2 -Wall -Wextra -Werror -std=c99 -o "$tmp/sim" "$here/allocator_sim.c"; then
	echo "model: 0 passed, 1 failed (allocator_sim.c does not build)"
	exit 1
fi

jobs=${MODEL_JOBS:-$(nproc 2>/dev/null || echo 2)}

# One run a line: name|expect|arguments; expect is "pass" or "caught".  The
# first word of the name is its group (pass) or its variant (caught).
{
	for spec in 3:20:1000000 5:20:1000000 7:16:1000000 20:10:1000000 100:3:400000; do
		IFS=: read -r n seeds steps <<<"$spec"
		for s in $(seq 1 "$seeds"); do
			echo "impl nodes=$n seed=$s|pass|--proto=impl --nodes=$n --seed=$s --steps=$steps --show=60"
		done
	done
	for spec in 3:3:1000000 5:3:1000000 7:3:1000000 20:2:1000000 100:1:400000; do
		IFS=: read -r n seeds steps <<<"$spec"
		for s in $(seq 1 "$seeds"); do
			echo "fixed nodes=$n seed=$s|pass|--proto=fixed --nodes=$n --seed=$s --steps=$steps --show=60"
		done
	done
	echo "scenario joiners impl|pass|--scenario=joiners --proto=impl"
	for sc in twonode shrink shrink5 joiners; do
		echo "scenario $sc fixed|pass|--scenario=$sc --proto=fixed"
	done

	for sc in twonode shrink shrink5; do
		echo "$sc/brief|caught|--scenario=$sc --proto=brief"
		echo "$sc/impl+removes|caught|--scenario=$sc --proto=impl --changes=add,remove"
	done
	echo "joiners/impl+noseed|caught|--scenario=joiners --proto=impl --broken=noseed"
	for n in 3 5 7; do
		echo "impl+removes nodes=$n|caught|--proto=impl --changes=add,remove --nodes=$n --seed=1 --steps=1000000"
	done
	for b in noepoch nocas noseed allatonce noquorum; do
		for n in 3 5 7; do
			for s in 1 2; do
				echo "broken=$b nodes=$n seed=$s|caught|--broken=$b --nodes=$n --seed=$s --steps=1000000"
			done
		done
	done
	for spec in noepoch:3,5,7:1,2,3 nocas:3,5,7:1 noseed:5,7,12:1,2,3,4; do
		IFS=: read -r b ns ss <<<"$spec"
		for n in ${ns//,/ }; do
			for s in ${ss//,/ }; do
				echo "impl+broken=$b nodes=$n seed=$s|caught|--proto=impl --broken=$b --nodes=$n --seed=$s --steps=1000000"
			done
		done
	done
} >"$tmp/jobs"

run_job() {
	local i=$1
	shift
	"$tmp/sim" "$@" >"$tmp/out.$i" 2>&1
	echo $? >"$tmp/rc.$i"
}
export -f run_job
export tmp
awk -F'|' '{ print NR, $3 }' "$tmp/jobs" | xargs -P "$jobs" -L 1 bash -c 'run_job "$@"' _

passed=0
failed=0
shown=0
declare -A caught runs group_pass group_runs
variants=()
groups=()
i=0
while IFS='|' read -r name expect args; do
	i=$((i + 1))
	rc=$(cat "$tmp/rc.$i" 2>/dev/null || echo missing)
	out="$tmp/out.$i"
	if [ "$expect" = caught ]; then
		v=${name%% *}
		if [ -z "${runs[$v]:-}" ]; then
			variants+=("$v")
			runs[$v]=0
			caught[$v]=0
		fi
		runs[$v]=$((runs[$v] + 1))
		if [ "$rc" = 1 ] && grep -q '^VIOLATION (' "$out"; then
			caught[$v]=$((caught[$v] + 1))
		elif [ "$rc" != 0 ]; then
			echo "--- $name: exit $rc"
			tail -n 5 "$out"
			caught[$v]=-1000
		fi
		continue
	fi
	g=${name%% *}
	if [ -z "${group_runs[$g]:-}" ]; then
		groups+=("$g")
		group_runs[$g]=0
		group_pass[$g]=0
	fi
	group_runs[$g]=$((group_runs[$g] + 1))
	if [ "$rc" = 0 ]; then
		passed=$((passed + 1))
		group_pass[$g]=$((group_pass[$g] + 1))
		continue
	fi
	failed=$((failed + 1))
	if [ "$shown" -lt 4 ]; then
		# the first failures in full: the trace that led to the violation
		shown=$((shown + 1))
		echo "--- $name ($args): FAILED, exit $rc"
		cat "$out"
	else
		echo "--- $name: FAILED: $(grep '^VIOLATION (' "$out" || tail -n 1 "$out")"
	fi
done <"$tmp/jobs"

for g in "${groups[@]}"; do
	echo "$g: ${group_pass[$g]} of ${group_runs[$g]} runs with no violation"
done
for v in "${variants[@]}"; do
	if [ "${caught[$v]}" -gt 0 ]; then
		passed=$((passed + 1))
		echo "$v: caught in ${caught[$v]} of ${runs[$v]} runs"
	else
		failed=$((failed + 1))
		echo "$v: NOT caught (${runs[$v]} runs)"
	fi
done
echo "model: $(($(date +%s) - start)) s, $jobs at a time"
echo "model: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
