# Servers of two PostgreSQL majors in one group: a member on each side
# draws one sequence, and a server of one major draws from a member of the
# other through servers =>.  Runs when DISTSEQ_OTHER_PG names the install
# directory of another major with distseq installed (scripts/test.sh sets
# it when it tests more than one major: the oldest major's test harness
# runs the newest major's servers too).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $other = $ENV{DISTSEQ_OTHER_PG};
plan skip_all => 'DISTSEQ_OTHER_PG names no other PostgreSQL installation'
  unless $other;

my %node;
$node{a} = peer_node('mixed_a');
$node{b} = peer_node('mixed_b', install_path => $other);
$node{c} = peer_node('mixed_c');
$node{d} = peer_node('mixed_d', install_path => $other);

my %version = map {
	$_ => $node{$_}->safe_psql('postgres', 'SHOW server_version_num') / 10000
} keys %node;
isnt($version{a}, $version{b}, "a runs $version{a}, b runs $version{b}");

# a, b and c form a group (each names the others); d, on b's major, draws
# from a.
for my $n (qw(a b c))
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } qw(a b c);
}
peer_server($node{d}, 'a', $node{a});
for my $n (qw(a b c))
{
	$node{$n}->safe_psql('postgres', "SELECT distseq_add_peer('node_$_')")
	  for grep { $_ ne $n } qw(a b c);
}
is($node{b}->safe_psql('postgres', 'SELECT cardinality(members) FROM distseq.distseq_peer_state()'),
	'3', 'the member on the other major joined the group');

$node{b}->safe_psql('postgres',
	"SELECT distseq_create('orders', block_size => 7, window_size => 5000)");
$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()') for qw(b a c);
$node{d}->safe_psql('postgres',
	"SELECT distseq_create('orders', block_size => 7, servers => ARRAY['node_a'])");

# Draw in turns, so windows of every member are used while the others
# draw too; every value must be new.
my %seen;
my $dups = 0;
my %drawn;
for my $round (1 .. 4)
{
	for my $n (qw(a b c d))
	{
		my @v = split /\n/, $node{$n}->safe_psql('postgres',
			"SELECT distseq_nextval('orders') FROM generate_series(1, 700)");
		$drawn{$n} += @v;
		$dups += grep { $seen{$_}++ } @v;
	}
	$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()') for qw(a b c);
}
is_deeply(\%drawn, { a => 2800, b => 2800, c => 2800, d => 2800 },
	'every server drew its values');
is($dups, 0, 'no value twice across two PostgreSQL majors');

$node{$_}->stop for qw(d c b a);
done_testing();
