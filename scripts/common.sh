# Shared by scripts/*.sh: packages, build and install.

PG_CONFIG=${PG_CONFIG:-/usr/lib/postgresql/15/bin/pg_config}
PGBIN=$("$PG_CONFIG" --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)

distseq_install_packages() {
	# python3-*: the ORM examples (test/orm); pglogical: test/t/051_pglogical.pl;
	# python3 and binutils (nm): scripts/deps.py
	local pkgs="postgresql-15 postgresql-server-dev-15 libpq-dev libipc-run-perl pgbouncer make gcc
		python3 binutils python3-psycopg2 python3-sqlalchemy python3-django postgresql-15-pglogical"
	if dpkg -s $pkgs >/dev/null 2>&1; then
		return 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing packages ($pkgs) and not root to install them" >&2
		return 1
	fi
	apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $pkgs
	PGBIN=$("$PG_CONFIG" --bindir)
}

# A line on stderr every minute, "== LABEL: still running, N min so far",
# until distseq_ticker_stop: for steps silent for minutes (a build, a TAP
# file), so that a log shows they are alive
distseq_ticker_start() {
	local label=$1 t0
	t0=$(date +%s)
	(
		trap 'kill $s 2>/dev/null; exit 0' TERM
		while :; do
			sleep 60 &
			s=$!
			wait $s
			echo "== $label: still running, $(( ($(date +%s) - t0) / 60 )) min so far" >&2
		done
	) &
	distseq_ticker=$!
}
distseq_ticker_stop() {
	[ -n "${distseq_ticker:-}" ] || return 0
	kill "$distseq_ticker" 2>/dev/null
	wait "$distseq_ticker" 2>/dev/null
	distseq_ticker=
}

# Use PostgreSQL MAJOR: 15 is Debian 12's package, any other is built
# from Debian's source package by scripts/build-pg.sh (once, then reused).
# Sets PG_CONFIG and PGBIN.
distseq_use_pg() {
	case $1 in
		15) PG_CONFIG=/usr/lib/postgresql/15/bin/pg_config ;;
		*) PG_CONFIG=$(bash "$(dirname "${BASH_SOURCE[0]}")/build-pg.sh" "$1") || return 1 ;;
	esac
	PGBIN=$("$PG_CONFIG" --bindir)
	export PG_CONFIG
}

# Build and install the extension in directory $1 for $PG_CONFIG; a tree
# last built for another PostgreSQL is cleaned first
distseq_build_install() {
	local stamp="$1/.built-for"
	if [ "$(cat "$stamp" 2>/dev/null)" != "$PG_CONFIG" ]; then
		make -C "$1" PG_CONFIG="$PG_CONFIG" clean >/dev/null
	fi
	make -C "$1" PG_CONFIG="$PG_CONFIG" >/dev/null && \
		make -C "$1" PG_CONFIG="$PG_CONFIG" install >/dev/null &&
		echo "$PG_CONFIG" > "$stamp"
}

# The benchmarks' floor, an empty C function of an extension (bench/cfloor)
bench_cfloor_install() {
	distseq_build_install "$1/bench/cfloor" ||
		{ echo "build of $1/bench/cfloor failed" >&2; return 1; }
}
bench_cfloor_sql() {
	echo "CREATE FUNCTION bench_cfloor(text) RETURNS bigint AS 'bench_cfloor', 'bench_cfloor' LANGUAGE C VOLATILE PARALLEL UNSAFE;"
}

# The extension is installed system-wide, so two runs on one machine (a test
# run and a benchmark, say) would replace each other's build under running
# servers: they take turns on one lock.  The script runs again under
# flock -o, so the servers it starts do not inherit the lock (one left
# running would hold it for good).  Scripts it starts go ahead.
#   distseq_lock "$@"    # first thing in a script
distseq_lock() {
	[ -n "${DISTSEQ_LOCKED:-}" ] && return 0
	export DISTSEQ_LOCKED=1
	if ! flock -n /tmp/distseq.lock true; then
		echo "waiting for another distseq run on this machine (/tmp/distseq.lock)" >&2
	fi
	exec flock -o /tmp/distseq.lock bash "$0" "$@"
}

# The opening comment of script $1, as its --help
script_usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$1"
}

# Packages, PostgreSQL MAJOR $2 if given, and unless $1 is 0 a build and
# install of the tree the calling script is in ($here)
bench_prepare() {
	distseq_install_packages
	if [ -n "${2:-}" ]; then
		distseq_use_pg "$2" || exit 1
	fi
	if [ "$1" -eq 1 ]; then
		distseq_build_install "$here" || { echo "build of $here failed" >&2; exit 1; }
	fi
}

# A work directory /tmp/$1.XXXXXX with subdirectories $2..., in $work, that
# the postgres OS user owns when we are root; as_pg runs a command as that
# user (or as ourselves when we are not root)
bench_workdir() {
	work=$(mktemp -d "/tmp/$1.XXXXXX")
	shift
	chmod 755 "$work"
	local d
	for d in "$@"; do
		mkdir -p "$work/$d"
	done
	if [ "$(id -u)" -eq 0 ]; then
		chown -R postgres "$work"
		as_pg() { runuser -u postgres -- env LC_ALL=C.UTF-8 "$@"; }
	else
		as_pg() { env LC_ALL=C.UTF-8 "$@"; }
	fi
}

# A line on stderr with the seconds since bench_clock ran
bench_clock() { bench_t0=$(date +%s); }
bench_log() { echo "== [$(( $(date +%s) - bench_t0 ))s] $*" >&2; }

# initdb of a throwaway server in $work/$1 (trust, UTF8), its socket in
# $work and no JIT, then the postgresql.conf lines $2
bench_initdb() {
	as_pg "$PGBIN/initdb" -D "$work/$1" -A trust -E UTF8 >/dev/null
	printf "unix_socket_directories = '%s'\njit = off\n%s\n" "$work" "$2" >> "$work/$1/postgresql.conf"
}

# Starts the server in $work/$1, its log in $work/$1.log
bench_start() {
	as_pg "$PGBIN/pg_ctl" -D "$work/$1" -l "$work/$1.log" -w -t 120 start >/dev/null ||
		{ tail -20 "$work/$1.log" >&2; exit 1; }
}

# Stops the server in $work/$1 (mode $2, fast by default), if it runs
bench_stop() {
	[ -f "$work/$1/postmaster.pid" ] || return 0
	as_pg "$PGBIN/pg_ctl" -D "$work/$1" -m "${2:-fast}" -t 300 stop >/dev/null 2>&1 || true
}

# The EXIT trap of a bench script: stops every server in $work, then
# removes it unless $keep is 1
bench_cleanup() {
	local d
	for d in "$work"/*/; do
		bench_stop "$(basename "$d")"
	done
	if [ "${keep:-0}" -eq 1 ]; then
		echo "work directory kept: $work" >&2
	else
		rm -rf "$work"
	fi
}

# SQL of two timing functions, run in the server: bench_ms(q) is the
# milliseconds query q takes; bench_span(q, t0) waits until t0, runs q and
# returns its count and the epochs (s) it started and ended at, for
# sessions on several servers
bench_sql_functions() {
	cat <<'SQL'
CREATE FUNCTION bench_ms(q text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE
	t0 timestamptz;
BEGIN
	t0 := clock_timestamp();
	EXECUTE q;
	RETURN 1000 * extract(epoch FROM clock_timestamp() - t0);
END $$;
CREATE FUNCTION bench_span(q text, t0 timestamptz,
	OUT n bigint, OUT t_start float8, OUT t_end float8) LANGUAGE plpgsql AS $$
BEGIN
	PERFORM pg_sleep_until(t0);
	t_start := extract(epoch FROM clock_timestamp());
	EXECUTE q INTO n;
	t_end := extract(epoch FROM clock_timestamp());
END $$;
SQL
}

# Callgrind (bench/callgrind.sh, bench/compare.sh).  bench_cg_start starts
# the server in $work/$1 (made by bench_initdb, listening on port $2) under
#   valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=$work/cg/cg.%p
# so that every backend writes its own file when it exits; sets bench_cg_pid
# (valgrind's, for a clean-up that must kill it) and waits until it accepts
# connections.  $work/cg must exist.  Further valgrind options, if any, in
# $bench_cg_opts.
bench_cg_start() {	# dir port
	as_pg valgrind --tool=callgrind --trace-children=yes ${bench_cg_opts:-} \
		--callgrind-out-file="$work/cg/cg.%p" \
		"$PGBIN/postgres" -D "$work/$1" > "$work/$1.log" 2>&1 &
	bench_cg_pid=$!
	local i
	for i in $(seq 1 600); do
		as_pg "$PGBIN/pg_isready" -q -h "$work" -p "$2" && return 0
		kill -0 $bench_cg_pid 2>/dev/null || { cat "$work/$1.log" >&2; exit 1; }
		sleep 0.5
	done
	echo "server did not start under callgrind" >&2
	exit 1
}

# Total instructions of the process whose callgrind file is cg.<pid>, once
# it exited (its file then has its totals line)
bench_cg_total() {	# pid
	local f="$work/cg/cg.$1" t= i
	for i in $(seq 1 600); do
		if [ -f "$f" ]; then
			t=$(awk '/^totals:/ { v = $2 } /^summary:/ { if (v == "") v = $2 } END { print v }' "$f")
			[ -n "$t" ] && break
		fi
		sleep 0.5
	done
	[ -n "$t" ] || { echo "no callgrind totals for pid $1 in $f" >&2; exit 1; }
	echo "$t"
}

# Instructions of a fresh session's backend (database bench on port $1)
# that ran SELECT count(expr) FROM generate_series(1, N) g, all included:
# the per-row cost is the difference of two N over the difference of the N
bench_cg_session() {	# port expr N
	local pid
	pid=$(as_pg "$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$work" -p "$1" -d bench -At \
		-c "SELECT pg_backend_pid()" -c "SELECT count($2) FROM generate_series(1, $3) g" | sed -n 1p)
	bench_cg_total "$pid"
}

# p50 p99 p99.9 in ms of a file of latencies in microseconds, one a line
bench_percentiles() {
	sort -n "$1" | awk '{ v[NR] = $1 }
	function pct(p,   i) { i = int(p * NR); if (i < p * NR) i++; if (i < 1) i = 1; return v[i] / 1000 }
	END { if (NR) printf "%.3f %.3f %.3f\n", pct(0.50), pct(0.99), pct(0.999); else print "- - -" }'
}
