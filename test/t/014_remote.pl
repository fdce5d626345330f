# A server that holds no windows draws from others, in its own order,
# failing over when the first is gone.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my %node;
$node{$_} = peer_node("remote_$_") for qw(a b c d);

sub server
{
	my ($on, $to) = @_;
	peer_server($node{$on}, $to, $node{$to});
}

# a and b share 'audit'; c has no windows and draws from a, then b.
server('a', 'b');
server('b', 'a');
server('c', 'a');
server('c', 'b');
$node{a}->safe_psql('postgres', "SELECT distseq_add_peer('node_b')");
$node{b}->safe_psql('postgres', "SELECT distseq_add_peer('node_a')");
$node{a}->safe_psql('postgres',
	"SELECT distseq_create('audit', block_size => 10, window_size => 1000)");
$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()') for qw(a b);
$node{c}->safe_psql('postgres',
	"SELECT distseq_create('audit', block_size => 10, servers => ARRAY['node_a', 'node_b'])");
is($node{c}->safe_psql('postgres',
		"SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'audit'"),
	'0', 'c holds no window of its own');

my %seen;
my $dups = 0;
sub draw
{
	my ($n, $count) = @_;
	my @v = split /\n/, $node{$n}->safe_psql('postgres',
		"SELECT distseq_nextval('audit') FROM generate_series(1, $count)");
	$dups += grep { $seen{$_}++ } @v;
	return @v;
}

my @c1 = draw('c', 500);
is(scalar(@c1), 500, 'c draws through a');
my ($c_first) = $node{a}->safe_psql('postgres',
	"SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'audit' AND next_hi > window_start");
ok($c_first > 0, "the values came out of a's windows");
draw('a', 300);
draw('b', 300);

# A server whose definition differs (here: values past this max_value) is
# no source.
$node{a}->safe_psql('postgres', "SELECT distseq_create('small', block_size => 10)");
$node{a}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
$node{c}->safe_psql('postgres',
	"SELECT distseq_create('small', block_size => 10, max_value => 5, servers => ARRAY['node_a'])");
my ($r, $o, $e) = $node{c}->psql('postgres', "SELECT distseq_nextval('small')");
like($e, qr/returned values 1 to \d+ for sequence "small", outside what was asked/,
	'a range past max_value is refused');

# The servers of a sequence must share one id space: d has a 'mixed' of
# its own, outside the group of a and b, so once c has drawn from a it
# refuses d's values (they could repeat a's).
server('c', 'd');
$node{a}->safe_psql('postgres', "SELECT distseq_create('mixed', block_size => 10)");
$node{a}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
$node{d}->safe_psql('postgres', "SELECT distseq_create('mixed', block_size => 10)");
$node{d}->safe_psql('postgres', "SELECT distseq_nextval('mixed')");
$node{c}->safe_psql('postgres',
	"SELECT distseq_create('mixed', block_size => 10, servers => ARRAY['node_a', 'node_d'])");
$node{c}->safe_psql('postgres', "SELECT distseq_nextval('mixed')");
is($node{c}->safe_psql('postgres',
		"SELECT cardinality(server_nodes) FROM distseq.distseq_sequences WHERE sequence_name = 'mixed'"),
	'2', 'c learned the group it draws from: a and b');

$node{a}->stop('immediate');
($r, $o, $e) = $node{c}->psql('postgres',
	"SELECT distseq_nextval('mixed') FROM generate_series(1, 10000)");
like($e, qr/"node_d" is not in the group sequence "mixed"/,
	'a server outside that group is refused');
my @c2 = draw('c', 500);
is(scalar(@c2), 500, 'with a gone, c fails over to b');
draw('b', 300);
is($dups, 0, 'no value twice across a, b and c');

# Nobody to draw from: a clear error naming the servers.
$node{b}->stop('immediate');
my ($ret, $out, $err) = $node{c}->psql('postgres',
	"SELECT distseq_nextval('audit') FROM generate_series(1, 10000)");
isnt($ret, 0, 'with both servers down, c fails');
like($err, qr/could not refill distseq sequence "audit".*no server answered.*node_a.*node_b/s,
	'saying which servers it tried');

# Bad input.
($ret, $out, $err) = $node{c}->psql('postgres',
	"SELECT distseq_create('bad', servers => ARRAY['nope'])");
like($err, qr/server "nope" does not exist/, 'an unknown server is refused');
($ret, $out, $err) = $node{c}->psql('postgres',
	"SELECT distseq_create('bad', servers => ARRAY['node_a'], stripes => 2)");
like($err, qr/cannot be striped/, 'a striped sequence cannot draw from others');

$node{c}->stop;
done_testing();
