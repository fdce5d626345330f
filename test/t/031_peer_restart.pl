# A server that closed its end of a kept connection answers again on a new
# one: it is no reason to fail a refill nor to let the server rest.
#
# d draws 'far' only from a (servers => ARRAY['node_a']), so every refill of
# it calls a.  The worker of d keeps its connection to a between refills;
# a then closes it by itself:
# 1. a restarts (a minor update, a configuration change): its backends
#    leave with a FATAL error, and a is back before d's next refill;
# 2. a's role ends idle sessions (idle_session_timeout), as a pooler or a
#    firewall ends idle connections.
# Each time d's next draws must succeed: the closed connection is seen
# before it is used, and a new one is made.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $a = peer_node('restart_a');
# every segment as small as can be: each draw below refills many times
my $d = peer_node('restart_d', conf => "distseq.segment_lifetime = '1ms'\n");
peer_server($d, 'a', $a);
$a->safe_psql('postgres', "SELECT distseq_create('far', block_size => 10)");
$d->safe_psql('postgres',
	"SELECT distseq_create('far', block_size => 10, servers => ARRAY['node_a'])");

my %seen;
my $drawn = 0;

# draws enough values for several refills, each of which calls a
sub draw_far
{
	my ($what) = @_;
	my ($ret, $out, $err) = $d->psql('postgres',
		"SELECT distseq_nextval('far') FROM generate_series(1, 3000)");
	is($ret, 0, "d draws from a $what") or diag($err);
	my @v = split /\n/, $out;
	$seen{$_}++ for @v;
	$drawn += @v;
}

draw_far('while its connection is fresh');

$a->restart;
draw_far('after a restarted');

# The peer's session ends a command given up on by itself, after
# distseq.remote_timeout (2 s here), whatever the role there sets: a
# reservation blocked on a's catalog row times out on d, and a's backend
# cancels it.
$a->safe_psql('postgres', 'ALTER ROLE postgres SET statement_timeout = 0');
$a->restart;
draw_far('with statement_timeout = 0 set for its role there');
my $holder = IPC::Run::start(
	[
		'psql', '-XAtq', '-d', $a->connstr('postgres'), '-c',
		'BEGIN; SELECT 1 FROM distseq.distseq_sequences FOR UPDATE; SELECT pg_sleep(8); COMMIT'
	],
	'>', '/dev/null', '2>', '/dev/null');
$a->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep'")
  or die 'the catalog row was never locked';
my ($ret, $out, $err) = $d->psql('postgres',
	"SELECT distseq_nextval('far') FROM generate_series(1, 3000)");
# d's deadline and a's statement_timeout are the same 2 s: either may end it
like($err, qr/did not answer within 2000 ms|"node_a": canceling statement due to statement timeout/,
	'd gives up on a blocked reservation');
ok($a->wait_for_log(qr/distseq ERROR:  canceling statement due to statement timeout/),
	'and a ends it by itself, its role\'s statement_timeout notwithstanding');
$holder->finish;
$a->safe_psql('postgres', 'ALTER ROLE postgres RESET statement_timeout');
# a rests on d for having timed out: distseq_maintain() ends the rest
$d->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');

# a connection made with the setting, then left idle past it
$a->safe_psql('postgres', "ALTER ROLE postgres SET idle_session_timeout = '200ms'");
$a->restart;
draw_far('with its connections ended after 200 ms idle');
$a->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'distseq'")
  or die 'd\'s connection to a is still there';
draw_far('once its idle connection was ended');

is(scalar(keys %seen), $drawn, 'all distinct');
$a->stop;
$d->stop;
done_testing();
