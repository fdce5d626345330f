# A refill that fails tells the session why: on a node that cannot reach a
# majority, the error names the sequence that ran dry (not the first one the
# agent tried) and carries the agent's reason, with the members reached and
# why the others were not.  What a hostile peer says there is bounded and
# cleaned: no control character (no forged log line), valid text when cut
# inside a two-byte character, a few hundred bytes however long it was.
# The worker's repeated log lines are rate-limited: the same message at
# most once per 10 seconds, the next one counting those left out.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $na = peer_node('reasons_a', conf => "distseq.refill_timeout = '30s'\n");
my $nb = peer_node('reasons_b');
peer_server($na, 'b', $nb);
peer_server($nb, 'a', $na);
$na->safe_psql('postgres', "SELECT distseq_add_peer('node_b')");

# Three sequences with one window of 10 values each, opened while b answers
my @seqs = qw(a_first m_mid z_dry);
for my $s (@seqs)
{
	$na->safe_psql('postgres',
		"SELECT distseq_create('$s', block_size => 5, window_size => 10, min_open_windows => 1)");
}
$na->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
is($na->safe_psql('postgres', 'SELECT sum(open_windows) FROM distseq_status'),
	'3', 'a window open for each sequence');

# b turns hostile: its node state is an error, long, with line breaks, an
# escape sequence, a forged log line and two-byte characters.  A group of
# two with one member failing has no majority.
my $evil = q{'evil' || E'\n' || 'LOG:  forged line' || E'\x1b[31m'
	|| E'\r' || repeat('é', 3001) || 'END'};
$nb->safe_psql('postgres', qq{
	SET search_path = distseq, pg_catalog;
	ALTER EXTENSION distseq DROP FUNCTION distseq_peer_state();
	DROP FUNCTION distseq_peer_state();
	CREATE FUNCTION distseq_peer_state(OUT node_id bigint, OUT epoch bigint,
		OUT epoch_id bigint, OUT members bigint[], OUT pending boolean)
		LANGUAGE plpgsql AS \$\$ BEGIN RAISE EXCEPTION '%', $evil; END \$\$;
	ALTER EXTENSION distseq ADD FUNCTION distseq_peer_state();});

# Each sequence runs dry in turn; each session learns why, for its own
# sequence.
my $log_start = -s $na->logfile;
my $t0 = time;
for my $s (reverse @seqs)
{
	my ($ret, $out, $err) = $na->psql('postgres',
		"SELECT count(*) FROM (SELECT distseq_nextval('$s') FROM generate_series(1, 10)) v;\n"
		  . "SELECT distseq_nextval('$s')");
	is($out, '10', "$s: the open window serves its 10 values");
	like($err,
		qr/ERROR:  could not refill distseq sequence "$s"\nDETAIL:  The refill worker failed: could not reach a majority of the 2 members to allocate a window of distseq sequence "$s" \(1 reached\)\.\nReached: this node\. Not reached: node_b: distseq peer "node_b": evil/,
		"$s: the error names the sequence that ran dry and the agent's reason");
	my @others = grep { $_ ne $s } @seqs;
	unlike($err, qr/"(?:@{[join '|', @others]})"/, "$s: and no other sequence");
	unlike($err, qr/\x1b|\r|\nLOG:  forged/, "$s: no control character of the peer's");
	cmp_ok(length($err), '<', 1200, "$s: the peer's text is cut short");
	my $copy = $err;
	ok(utf8::decode($copy), "$s: valid UTF-8, cut between characters");
}

# distseq_maintain() reports the pass's first failure, bounded too
my ($ret, $out, $err) = $na->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/could not reach a majority.*"a_first".*node_b: distseq peer "node_b": evil/s,
	'distseq_maintain() fails with the reason');
cmp_ok(length($err), '<', 1200, 'bounded as well');
like($err, qr/é\.\.\./, 'the cut is marked');
my $copy = $err;
ok(utf8::decode($copy), 'valid UTF-8, cut between characters');

# A burst of failing draws (and the agent's passes every 200 ms meanwhile)
($ret, $out, $err) = $na->psql('postgres',
	join('', map { "SELECT distseq_nextval('z_dry');\n" } 1 .. 20),
	on_error_stop => 0);
is(scalar(() = $err =~ /could not refill distseq sequence "z_dry"/g), 20,
	'every draw of the burst fails with the reason');

my $log = substr(slurp_file($na->logfile), $log_start);
my $lines = () = $log =~ /distseq agent: could not reach a majority[^\n]*"z_dry"/g;
my $elapsed = time - $t0;
cmp_ok($lines, '<=', 1 + int($elapsed / 10) + 1,
	"the same agent line for z_dry logged at most once per 10 s ($lines lines in "
	  . sprintf('%.1f', $elapsed) . ' s)');
ok($lines >= 1, 'but logged');
# a_first fails at every agent pass too, five times a second
my $first_lines = () = $log =~ /distseq agent: could not reach a majority[^\n]*"a_first"/g;
cmp_ok($first_lines, '<=', 1 + int($elapsed / 10) + 1,
	"so is the agent line for a_first, failing at every pass ($first_lines lines)");
unlike($log, qr/^\s*LOG:  forged line/m, 'no forged log line: the line break became a space');
unlike($log, qr/\x1b|\r/, 'no escape sequence nor carriage return in the log');
my ($longest) = sort { $b <=> $a } map { length } split /\n/, $log;  ## no critic
cmp_ok($longest, '<', 4096, 'no log line near the size of what the peer sent');

# After the interval the message comes again, counting the ones left out.
ok($na->wait_for_log(
		qr/distseq agent: could not reach a majority[^\n]*"z_dry"[^\n]*\n[^\n]*DETAIL:  [^\n]*The same message came \d+ more times in the 10 seconds before and was not logged\./,
		$log_start),
	'the next line counts the repeats left out');

$na->stop;
$nb->stop;
done_testing();
