# A membership change and an agent pass asked of one worker at the same
# time (mailbox.c): each waiter gets the answer to its own request, not
# the other's.  a's link to b hangs, so the change (adding c, which needs
# b) waits distseq.remote_timeout and fails, while distseq_maintain(),
# asked meanwhile, waits behind it for the pass that follows.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my %node;
$node{$_} = peer_node("kinds_$_") for qw(a b c);

my $hang = $node{a}->basedir . '/hang';
my ($proxy, $port) = tcp_proxy($node{b}->port, hang => $hang);

# a reaches b through the proxy; every other link is direct
$node{a}->safe_psql('postgres', qq(
	CREATE SERVER node_b FOREIGN DATA WRAPPER distseq
		OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER node_b OPTIONS (user 'postgres');));
peer_server($node{a}, 'c', $node{c});
peer_server($node{b}, 'a', $node{a});
$node{a}->safe_psql('postgres', "SELECT distseq_add_peer('node_b')");
$node{b}->safe_psql('postgres', "SELECT distseq_add_peer('node_a')");
open my $fh, '>', $hang or die;
close $fh;
# no window yet: the agent must win one, and b has to agree
$node{a}->safe_psql('postgres',
	"SELECT distseq_create('s', block_size => 1, window_size => 10, min_open_windows => 1)");

my ($add_out, $maint_out) = ('', '');
my $add = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $node{a}->connstr('postgres'),
	  '-c', "SELECT distseq_add_peer('node_c')" ],
	'>', \$add_out, '2>', \$add_out);
# the change is posted and running before the pass is asked for
$node{a}->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM pg_stat_activity WHERE query = 'distseq membership change'")
  or die 'the change never started';
my $maint = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $node{a}->connstr('postgres'),
	  '-c', 'SELECT count(*) FROM distseq_maintain()' ],
	'>', \$maint_out, '2>', \$maint_out);
$add->finish;
$maint->finish;
note "add_peer: $add_out";
note "maintain: $maint_out";

like($add_out, qr/could not change the distseq membership: 1 of 2 members agreed/,
	'the change reports its own failure');
unlike($add_out, qr/majority of the 2 members to allocate/,
	'not the agent pass\'s');
like($maint_out, qr/could not reach a majority of the 2 members to allocate a window of distseq sequence "s"/,
	'the agent pass reports its own failure');
unlike($maint_out, qr/could not change the distseq membership/,
	'not the change\'s');

unlink $hang;
is($node{a}->safe_psql('postgres', 'SELECT epoch, cardinality(members), pending FROM distseq.distseq_node'),
	'1|2|f', 'a is still in the group of two');
is($node{c}->safe_psql('postgres', 'SELECT epoch, cardinality(members), pending FROM distseq.distseq_node'),
	'0|1|f', 'c was put back alone');

kill 'TERM', $proxy;
waitpid($proxy, 0);
done_testing();
