# What a hostile peer says reaches nobody as it is: not a client, not a
# view, not the log.  Every text of a peer -- an error's message, detail,
# hint and context, a warning, libpq's message -- is cleaned and bounded
# where it enters (remote.c): no control character, C0 or C1 (CSI, U+009B,
# drives a terminal as ESC [ does; NEL, U+0085, is a line break), no byte
# that is no character of the database's encoding, at most 1 kB.  Checked
# through distseq_peers.error, which shows a failed probe's message, in
# two databases of one node: UTF-8 (the peer's text as it is) and LATIN1
# (the peer converts to it: C1 controls are single bytes there).  (A peer
# cannot send bytes that are no text in the encoding asked for: a SQL_ASCII
# peer's server refuses to send them to a UTF-8 client.)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $na = peer_node('text_a');
my $nb = peer_node('text_b');

# a's databases, each with a peer database of its own on b
my %pairs = (postgres => 'postgres', lat => 'fresh');
$na->safe_psql('postgres',
	"CREATE DATABASE lat ENCODING 'LATIN1' TEMPLATE template0 LOCALE 'C'");
$nb->safe_psql('postgres', 'CREATE DATABASE fresh');
my $bport = $nb->port;
for my $adb (sort keys %pairs)
{
	my $bdb = $pairs{$adb};
	$na->safe_psql($adb, 'CREATE EXTENSION IF NOT EXISTS distseq');
	$nb->safe_psql($bdb, 'CREATE EXTENSION IF NOT EXISTS distseq');
	$na->safe_psql($adb, qq(
		CREATE SERVER node_b FOREIGN DATA WRAPPER distseq
			OPTIONS (host '127.0.0.1', port '$bport', dbname '$bdb');
		CREATE USER MAPPING FOR CURRENT_USER SERVER node_b OPTIONS (user 'postgres');
		SELECT distseq_add_peer('node_b');));
	is($na->safe_psql($adb, 'SELECT reachable FROM distseq_peers'),
		't', "$adb: b is a reachable peer");
}

# b turns hostile: its node state is an error with line breaks, ESC, CR,
# the C1 controls CSI and NEL, a forged log line and 6 kB of two-byte
# characters, in its message, detail and hint.
sub hostile
{
	my ($bdb, $evil) = @_;
	$nb->safe_psql($bdb, qq{
		SET search_path = distseq, pg_catalog;
		ALTER EXTENSION distseq DROP FUNCTION distseq_peer_state();
		DROP FUNCTION distseq_peer_state();
		CREATE FUNCTION distseq_peer_state(OUT node_id bigint, OUT epoch bigint,
			OUT epoch_id bigint, OUT members bigint[], OUT pending boolean)
			LANGUAGE plpgsql AS \$\$ BEGIN RAISE EXCEPTION '%', $evil
				USING DETAIL = $evil, HINT = $evil; END \$\$;
		ALTER EXTENSION distseq ADD FUNCTION distseq_peer_state();});
}
my $evil = q{'evil' || E'\n' || 'LOG:  forged line' || E'\x1b[31m' || E'\r'
	|| chr(155) || '[32m' || chr(133) || repeat('é', 3001) || 'END'};
hostile('postgres', $evil);
hostile('fresh', $evil);

for my $adb (sort keys %pairs)
{
	my ($ret, $out, $err) = $na->psql($adb,
		"SET client_encoding = 'UTF8';
		 SELECT reachable, error FROM distseq_peers");
	is($ret, 0, "$adb: distseq_peers can be read") or diag($err);
	like($out, qr/^f\|distseq peer "node_b": evil /,
		"$adb: b is not reachable, and the view says what it said");
	unlike($out, qr/\n|\r|\x1b|\xc2[\x80-\x9f]/,
		"$adb: no control character of the peer's, C0 or C1");
	my $copy = $out;
	ok(utf8::decode($copy), "$adb: valid UTF-8");
	# characters: in LATIN1 a 1 kB cut holds twice as many é
	cmp_ok(length($copy), '<', 1100, "$adb: the peer's text is cut short");
	like($out, qr/\.\.\.$/, "$adb: the cut is marked");
}

$na->stop;
$nb->stop;
done_testing();
