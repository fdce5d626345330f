#!/usr/bin/env bash
# Model check of the window allocator and its membership changes
# (test/model/allocator_sim.c), as the code does them since e93a7f3 (1.4:
# two-phase changes, adds and removes, pending members, recovery), with the
# changes of cfeb8eb and 2564abe (activation names its node, a repeated move
# keeps the way back, a superseded change is finished, resuming a change
# cannot stop the agent, a removed member is forgotten when the change is
# finished), 4c3967b (a joiner moves in phase one, only if fresh; a
# change first finishes the one before, in its transaction) and c772f3e
# (phase one names the node it means, a repeated move must come from the
# membership named, and only the proposer itself says whether its change
# was decided), and the recovery of 1.7 (any member settles the change
# from its membership whose proposer is lost: see "Recovery" in
# allocator_sim.c).
#
# Must pass (no violation):
#   - "impl": seeded random runs on 3, 5, 7, 20 and 100 nodes, adds and
#     removes racing agents, crashes, partitions, lost replies, late
#     requests, dying workers, machines wiped and reinstalled at their
#     address (removed ones, and at times members); each run goes through
#     many clusters, each with its own mix of events (--vary), some with
#     fresh nodes that have a sequence of the same name, and windows, of
#     their own;
#   - the scripted histories twonode, shrink, shrink5, joiners, fewmarks,
#     behind, and the regressions freshrace, superseded, reinstall and
#     rejoin (flaws of the code before cfeb8eb, 4c3967b or c772f3e that the
#     model found or that their fixes prevent);
#   - lost0-lost4: a proposer lost for good half way (after the join, after
#     one member moved, after a majority moved, after it decided, in phase
#     two); a survivor settles the change and removes it, and the others
#     must be active and open windows again; and splitprepare and
#     lateproposer, races of a recovery the variants below get wrong;
#   - --raisepromise (a failed recovery raises its own promise, as the C
#     code does, which the model's recovery does not): random runs on 3, 5
#     and 7 nodes;
# Must be caught (shows the checker can fail; one violation in the variant's
# runs is enough): each --broken variant, one mechanism of impl taken out, in
# random runs, or in the scripted history that needs it (noquorum: twonode;
# fewmarks: fewmarks; nofreshcheck: freshrace; nomovefrom: rejoin;
# recnoquorum: splitprepare; recnopromise: lateproposer, and random runs).
# Must be stuck (the liveness hole the recovery closes): lost1-lost4 with
# --norecovery, the code before 1.7, end with members that are not active
# or open no window (exit 3).
# blindrevert and nodecidedid are not listed: no run found a violation with
# them; nor noidcheck, which 4c3967b made moot (see allocator_sim.c).
# Needs only a C compiler.  A violation in a run that must pass is a flaw of
# the code (or of its model): the first ones are shown in full, with the
# trace that led to them.
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
	for spec in 3:24:2000000 5:24:2000000 7:20:2000000 20:12:2000000 100:4:1000000; do
		IFS=: read -r n seeds steps <<<"$spec"
		for s in $(seq 1 "$seeds"); do
			echo "impl nodes=$n seed=$s|pass|--nodes=$n --seed=$s --steps=$steps --show=60"
		done
	done
	# a failed recovery raises its own promise, as change_settle does
	for n in 3 5 7; do
		for s in 1 2 3 4; do
			echo "raisepromise nodes=$n seed=$s|pass|--raisepromise --nodes=$n --seed=$s --steps=1000000"
		done
	done
	for sc in twonode shrink shrink5 joiners fewmarks freshrace superseded reinstall behind rejoin \
		lost0 lost1 lost2 lost3 lost4 splitprepare lateproposer; do
		echo "scenario $sc|pass|--scenario=$sc"
	done
	for sc in lost1 lost2 lost3 lost4; do
		echo "norecovery/$sc|stuck|--scenario=$sc --norecovery"
	done

	echo "noquorum/twonode|caught|--scenario=twonode --broken=noquorum"
	echo "fewmarks/fewmarks|caught|--scenario=fewmarks --broken=fewmarks"
	echo "nofreshcheck/freshrace|caught|--scenario=freshrace --broken=nofreshcheck"
	echo "nomovefrom/rejoin|caught|--scenario=rejoin --broken=nomovefrom"
	echo "recnoquorum/splitprepare|caught|--scenario=splitprepare --broken=recnoquorum"
	echo "recnopromise/lateproposer|caught|--scenario=lateproposer --broken=recnopromise"
	# anyepoch: since c772f3e the seeds above no longer catch it; these do
	for ns in 12:7 9:15 6:37; do
		echo "broken=anyepoch nodes=${ns%:*} seed=${ns#*:}|caught|--broken=anyepoch --nodes=${ns%:*} --seed=${ns#*:} --steps=500000"
	done
	# nofreshcheck: since the recovery of 1.7 draws its own events, these
	for ns in 3:10 5:7 7:20; do
		echo "broken=nofreshcheck nodes=${ns%:*} seed=${ns#*:}|caught|--broken=nofreshcheck --nodes=${ns%:*} --seed=${ns#*:} --steps=1000000"
	done
	for b in noepoch nocas nopending noquorum inlinealone recnopromise; do
		for n in 3 5 7; do
			for s in 1 2; do
				echo "broken=$b nodes=$n seed=$s|caught|--broken=$b --nodes=$n --seed=$s --steps=1000000"
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
declare -A caught runs group_pass group_runs word
variants=()
groups=()
i=0
while IFS='|' read -r name expect args; do
	i=$((i + 1))
	rc=$(cat "$tmp/rc.$i" 2>/dev/null || echo missing)
	out="$tmp/out.$i"
	if [ "$expect" = stuck ]; then
		# every run of it must end stuck, with no violation
		v=${name%%/*}
		if [ -z "${runs[$v]:-}" ]; then
			variants+=("$v")
			runs[$v]=0
			caught[$v]=0
		fi
		runs[$v]=$((runs[$v] + 1))
		word[$v]=stuck
		if [ "$rc" = 3 ] && grep -q 'nodes stuck' "$out"; then
			caught[$v]=$((caught[$v] + 1))
		else
			echo "--- $name: exit $rc, not stuck"
			tail -n 5 "$out"
			caught[$v]=-1000
		fi
		continue
	fi
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
		echo "$v: ${word[$v]:-caught} in ${caught[$v]} of ${runs[$v]} runs"
	else
		failed=$((failed + 1))
		echo "$v: NOT caught (${runs[$v]} runs)"
	fi
done
echo "model: $(($(date +%s) - start)) s, $jobs at a time"
echo "model: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
