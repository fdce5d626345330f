# A member down through two membership changes is brought into the newest
# when it is back, straight from the membership it was left in, and takes
# part again without a window overlapping anyone's.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my @names = qw(a b c d e);
my %node;
$node{$_} = peer_node("node_$_", window_log => 1) for @names;
for my $n (@names)
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } @names;
}
sub sql { my ($n, $q) = @_; return $node{$n}->safe_psql('postgres', $q); }

# a, b and c form a group with a sequence and windows.
sql('a', "SELECT distseq_add_peer('node_$_')") for qw(b c);
for my $n (qw(b c))
{
	sql($n, "SELECT distseq_add_peer('node_$_')") for grep { $_ ne $n } qw(a b c);
}
sql('a', "SELECT distseq_create('orders', block_size => 5, window_size => 200, min_open_windows => 2)");
sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(a b c);

my %seen;
my $dups = 0;
sub draw
{
	my ($n, $count) = @_;
	$dups += grep { $seen{$_}++ } split /\n/,
	  sql($n, "SELECT distseq_nextval('orders') FROM generate_series(1, $count)");
}
draw($_, 300) for qw(a b c);
my $c_epoch = sql('c', 'SELECT epoch FROM distseq.distseq_node');

# c is down while a adds d, then e: it misses both changes.
$node{c}->stop('immediate');
for my $n (qw(d e))
{
	my ($ret, $out, $err) = $node{a}->psql('postgres', "SELECT distseq_add_peer('node_$n')");
	is($ret, 0, "a adds $n with c down");
	like($err, qr/not active on every member yet/, 'and warns that c missed it');
	# every other member up registers the newcomer, and the newcomer them
	sql('b', "SELECT distseq_add_peer('node_$n')");
	sql('d', "SELECT distseq_add_peer('node_e')") if $n eq 'e';
	sql($n, "SELECT distseq_add_peer('node_$_')") for grep { $_ ne $n && $_ ne 'c' } qw(a b d);
}
for (1 .. 2)
{
	draw($_, 300) for qw(a b d e);
	sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(a b d e);
}
my $epoch = sql('a', 'SELECT epoch FROM distseq.distseq_node');
is($epoch, $c_epoch + 2, 'two changes were made without c');

# c is back: the proposer's worker activates it from where it was left.
$node{c}->start;
$node{a}->poll_query_until('postgres',
	'SELECT bool_and(finished) FROM distseq.distseq_change')
  or die 'c was never brought in';
sql('c', "SELECT distseq_add_peer('node_$_')") for qw(d e);
sql($_, "SELECT distseq_add_peer('node_c')") for qw(d e);
is(sql('c', 'SELECT epoch, cardinality(members), pending FROM distseq.distseq_node'), "$epoch|5|f",
	'c is an active member of the newest membership');
sql('c', 'SELECT count(*) FROM distseq_maintain()');
for (1 .. 2)
{
	draw($_, 300) for @names;
	sql($_, 'SELECT count(*) FROM distseq_maintain()') for @names;
}

my @w;
for my $n (@names)
{
	push @w, map { [ split /\|/ ] } split /\n/,
	  sql($n, "SELECT window_start, window_end FROM public.distseq_windows_ever('orders')");
}
@w = sort { $a->[0] <=> $b->[0] } @w;
is(scalar(grep { $w[$_]->[0] < $w[ $_ - 1 ]->[1] } 1 .. $#w), 0, 'no two windows overlap');
is($dups, 0, 'no value was handed out twice (' . scalar(keys %seen) . ' values)');

$node{$_}->stop for @names;
done_testing();
