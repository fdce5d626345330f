#!/usr/bin/env bash
# Build a PostgreSQL major that Debian 12 has no binary package of, from
# Debian's source package, into a prefix of its own; reuse that build when
# it is there already (same version).  Prints the prefix's pg_config.
#
#   bash scripts/build-pg.sh 18            # -> /opt/distseq-pg18/bin/pg_config
#   PG_PREFIX=/somewhere bash scripts/build-pg.sh 18
#
# The source comes from the development suite (sid) of the mirror this
# machine already uses for Debian (read from its apt sources, never written
# down here), as a deb-src entry: source packages only, no binary package of
# another suite is ever installed.  Needs root for apt-get; about 6 minutes
# of CPU on 2 cores.  Configured with TAP tests, and the TAP modules are
# installed with the server, so the test suites run on it as on 15.
set -euo pipefail

major=${1:?usage: build-pg.sh MAJOR}
prefix=${PG_PREFIX:-/opt/distseq-pg$major}
src_root=${PG_SRC_ROOT:-/var/tmp/distseq-pg$major-src}
log() { echo "== build-pg: $*" >&2; }
. "$(dirname "$0")/common.sh"

if [ -x "$prefix/bin/pg_config" ] && [ -f "$prefix/.distseq-built" ]; then
	log "PostgreSQL $("$prefix/bin/pg_config" --version) already in $prefix"
	echo "$prefix/bin/pg_config"
	exit 0
fi
[ "$(id -u)" -eq 0 ] || { echo "build-pg.sh: needs root (apt-get)" >&2; exit 1; }

# a deb-src entry for sid on the machine's own Debian mirror
mirror=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' \
	/etc/apt/sources.list.d/*.sources 2>/dev/null || true)
if [ -z "$mirror" ]; then
	mirror=$(awk '$1 == "deb" && $0 !~ /security/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
		/etc/apt/sources.list 2>/dev/null || true)
fi
[ -n "$mirror" ] || { echo "build-pg.sh: no Debian mirror found in the apt sources" >&2; exit 1; }
cat > /etc/apt/sources.list.d/distseq-sid-src.sources <<EOF
Types: deb-src
URIs: $mirror
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
log "apt-get update and build dependencies"
apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q bison flex zlib1g-dev \
	libreadline-dev libssl-dev pkg-config make gcc libipc-run-perl dpkg-dev >/dev/null

rm -rf "$src_root"
mkdir -p "$src_root"
cd "$src_root"
log "fetching the source package postgresql-$major"
apt-get source --download-only -q "postgresql-$major" >/dev/null
tarball=$(ls postgresql-"$major"_*.orig.tar.* | head -1)
tar xf "$tarball"
dir=$(find . -maxdepth 1 -type d -name "postgresql-$major*" | head -1)
cd "$dir"
log "configure and build $(basename "$dir") into $prefix (a few minutes)"
distseq_ticker_start "build-pg: building $(basename "$dir")"
trap distseq_ticker_stop EXIT
./configure --prefix="$prefix" --without-icu --with-openssl --enable-tap-tests \
	--enable-debug >/dev/null
make -j"$(nproc)" -s world-bin >/dev/null
make -s install-world-bin >/dev/null
# PGXS's test drivers: TAP modules and the isolation tester
make -s -C src/test/perl install >/dev/null
make -s -C src/test/isolation install >/dev/null
distseq_ticker_stop
touch "$prefix/.distseq-built"
log "PostgreSQL $("$prefix/bin/pg_config" --version) installed in $prefix"
rm -rf "$src_root"
echo "$prefix/bin/pg_config"
