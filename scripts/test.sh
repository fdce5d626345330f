#!/usr/bin/env bash
# Build and install distseq, then run every test suite against temporary
# servers: pg_regress (sql/), isolation (test/specs/) and TAP (test/t/), a
# smoke run of the benchmark runner so that it does not rot, and the model
# check of the window allocator (test/model/).
#
#   bash scripts/test.sh                 # everything, on PostgreSQL 15
#   bash scripts/test.sh --pg "15 18"    # everything, on 15 and then on 18
#   bash scripts/test.sh regress         # one suite: regress, isolation, tap, bench or model
#   PROVE_TESTS=test/t/002_crash.pl bash scripts/test.sh tap
#   REGRESS_TESTS=distseq_errors bash scripts/test.sh regress   # files alone
#
# PostgreSQL 15 is Debian 12's package; another major is built from
# Debian's source package once (scripts/build-pg.sh) and reused.
# Runs as root (installing what a fresh Debian 12 machine lacks) or as any
# user that can write the PostgreSQL install directories.  The servers run
# as the postgres OS user on a copy of the tree under /tmp.  Each suite
# prints how long it took, each TAP file when it ended and its time, and a
# step still running says so every minute.
set -uo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/common.sh"
distseq_lock "$@"

majors=15
if [ "${1:-}" = "--pg" ]; then
	majors=$2
	shift 2
fi
suites=${*:-regress isolation tap bench model}

distseq_install_packages || exit 1

run_make() {
	runuser -u postgres -- env HOME=/var/lib/postgresql LC_ALL=C.UTF-8 \
		TMPDIR=/tmp PG_CONFIG="$PG_CONFIG" \
		${DISTSEQ_OTHER_PG:+DISTSEQ_OTHER_PG="$DISTSEQ_OTHER_PG"} \
		make -C "$work" PG_CONFIG="$PG_CONFIG" installcheck \
		${PROVE_TESTS:+PROVE_TESTS="$PROVE_TESTS"} "$@"
}

first_major=${majors%% *}
passed=0
failed=0

# Build and install for every major first: the TAP test of groups that mix
# majors runs servers of another major (DISTSEQ_OTHER_PG) with distseq.
declare -A pg_config_of work_of
for major in $majors; do
	distseq_use_pg "$major" || { failed=$((failed + 1)); continue; }
	# build in a copy of the tree, which the servers' user may write
	work=$(mktemp -d /tmp/distseq-test.XXXXXX)
	cp -a "$here/." "$work/"
	rm -f "$work/.built-for"
	if ! distseq_build_install "$work"; then
		echo "--- build for PostgreSQL $major failed"
		failed=$((failed + 1))
		continue
	fi
	# src/ files call each other one way only (README, Source map)
	if ! python3 "$here/scripts/deps.py" "$work" > "$work/deps.txt"; then
		echo "--- src/ files call each other in a loop (scripts/deps.py):"
		grep -A100 '^loop' "$work/deps.txt"
		failed=$((failed + 1))
	fi
	chown -R postgres "$work"
	pg_config_of[$major]=$PG_CONFIG
	work_of[$major]=$work
done

for major in $majors; do
	[ -n "${work_of[$major]:-}" ] || continue
	PG_CONFIG=${pg_config_of[$major]}
	PGBIN=$("$PG_CONFIG" --bindir)
	work=${work_of[$major]}
	# the first major's test harness runs the mixed groups with the last
	# one (a newer harness may write settings an older server rejects)
	unset DISTSEQ_OTHER_PG
	last_major=${majors##* }
	if [ "$major" = "$first_major" ] && [ "$last_major" != "$major" ] &&
		[ -n "${pg_config_of[$last_major]:-}" ]; then
		export DISTSEQ_OTHER_PG=$(dirname "$("${pg_config_of[$last_major]}" --bindir)")
	fi
	echo "=== PostgreSQL $("$PG_CONFIG" --version)${DISTSEQ_OTHER_PG:+ (and $DISTSEQ_OTHER_PG in mixed groups)}"

	for suite in $suites; do
		# the model check does not depend on PostgreSQL: once is enough
		[ "$suite" = model ] && [ "$major" != "$first_major" ] && continue
		echo "=== $suite (PostgreSQL $major)"
		start=$SECONDS
		distseq_ticker_start "$suite (PostgreSQL $major)"
		case $suite in
			# REGRESS_TESTS="a b": only those files, in that order
			regress) run_make ISOLATION= TAP_TESTS= \
					${REGRESS_TESTS:+"REGRESS=$REGRESS_TESTS"} ;;
			isolation) run_make REGRESS= TAP_TESTS= ;;
			# --timer: each file's line says when it ended and how long it took
			tap) run_make REGRESS= ISOLATION= PROVE_FLAGS=--timer ;;
			bench) bash "$here/bench/run.sh" --pg "$major" --quick --no-build ;;
			model) bash "$here/test/model/run.sh" ;;
			*) echo "unknown suite: $suite"; false ;;
		esac
		rc=$?
		distseq_ticker_stop
		if [ $rc -eq 0 ]; then
			passed=$((passed + 1))
			echo "=== $suite (PostgreSQL $major) passed in $((SECONDS - start)) s"
		else
			failed=$((failed + 1))
			echo "=== $suite (PostgreSQL $major) FAILED after $((SECONDS - start)) s; logs follow"
			for f in "$work"/regression.diffs "$work"/output_iso/regression.diffs; do
				[ -f "$f" ] && { echo "--- $f"; head -c 20000 "$f"; }
			done
			for f in "$work"/tmp_check/log/regress_log_* "$work"/tmp_check/log/*.log \
				"$work"/log/*.log "$work"/output_iso/log/*.log; do
				[ -f "$f" ] && { echo "--- $f"; tail -n 80 "$f"; }
			done
		fi
	done
done

echo "test suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
