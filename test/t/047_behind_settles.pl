# A member left behind by a change whose proposer is lost in phase two:
# c was down while a decided a change with b and activated b, then a is
# lost for good.  c is active in the old membership, b in the new one, and
# neither has a majority in its own.  c's distseq_remove_peer() of a must
# settle (1.7): b, active after the old membership, shows the change was
# decided; c takes it, finishes phase two and removes a.  No value is
# handed out twice.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my @names = qw(a b c);
my %node;
$node{$_} = peer_node("node_$_", window_log => 1) for @names;
for my $n (@names)
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } @names;
}
sub sql { my ($n, $q) = @_; return $node{$n}->safe_psql('postgres', $q); }
sub state { return sql($_[0], 'SELECT epoch, cardinality(members), pending FROM distseq.distseq_node'); }

sql('a', "SELECT distseq_add_peer('node_$_')") for qw(b c);
for my $n (qw(b c))
{
	sql($n, "SELECT distseq_add_peer('node_$_')") for grep { $_ ne $n } @names;
}
sql('a', "SELECT distseq_create('orders', block_size => 5, window_size => 100, min_open_windows => 1)");
sql($_, 'SELECT count(*) FROM distseq_maintain()') for @names;

my %seen;
my $dups = 0;
sub draw
{
	my ($n, $count) = @_;
	$dups += grep { $seen{$_}++ } split /\n/,
	  sql($n, "SELECT distseq_nextval('orders') FROM generate_series(1, $count)");
}
draw($_, 150) for @names;
my ($epoch, $epoch_id, $a_id) = split /\|/,
  sql('a', 'SELECT epoch, epoch_id, node_id FROM distseq.distseq_node');

# c is down; a moves b and decides (as change_propose does), and its
# worker runs phase two: b becomes active, c cannot be reached.
$node{c}->stop;
my $cas = "distseq.distseq_peer_epoch_cas($epoch, $epoch_id, $epoch + 1, 4242,"
  . " (SELECT members FROM distseq.distseq_node), $a_id, (SELECT node_id FROM distseq.distseq_node))";
$node{b}->safe_psql('postgres', "SELECT $cas");
$node{a}->safe_psql('postgres', qq(
	BEGIN;
	SELECT $cas;
	INSERT INTO distseq.distseq_change (epoch, epoch_id, prev_epoch, prev_epoch_id, members, prev_members)
	  SELECT epoch, epoch_id, prev_epoch, prev_epoch_id, members, prev_members FROM distseq.distseq_node;
	COMMIT;));
$node{a}->psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
$node{b}->poll_query_until('postgres', 'SELECT NOT pending FROM distseq.distseq_node')
  or die 'phase two did not activate b';
$node{a}->stop('immediate');
$node{c}->start;
is(state('b'), ($epoch + 1) . '|3|f', 'b is active in the change of a, which is lost');
is(state('c'), "$epoch|3|f", 'c is left behind, active in the membership before');

# c removes a: b shows the change was decided, c takes it and removes a.
my ($ret, $out, $err) = $node{c}->psql('postgres', "SELECT distseq_remove_peer('node_a')");
is($ret, 0, 'c, left behind, removes the lost proposer a') or diag($err);
like(slurp_file($node{c}->logfile), qr/settled here: it was decided, membership ${\($epoch + 1)} of 3 members/,
	'c settled: the change was decided');
is(state('c'), ($epoch + 2) . '|2|f', 'c is active without a');
$node{b}->poll_query_until('postgres', 'SELECT NOT pending AND cardinality(members) = 2 FROM distseq.distseq_node')
  or die 'b stayed behind';
is(state('b'), ($epoch + 2) . '|2|f', 'b is active without a');

for (1 .. 3)
{
	draw($_, 150) for qw(b c);
	sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(b c);
}
my @w = map { [ split /\|/ ] } map { split /\n/,
	  sql($_, "SELECT window_start, window_end FROM public.distseq_windows_ever('orders')") }
  qw(b c);
@w = sort { $a->[0] <=> $b->[0] } @w;
is(scalar(grep { $w[$_]->[0] < $w[ $_ - 1 ]->[1] } 1 .. $#w), 0, 'no two windows of b and c overlap');
is($dups, 0, 'no value was handed out twice (' . scalar(keys %seen) . ' values)');

$node{$_}->stop for qw(b c);
done_testing();
