# A proposer lost for good half way through a membership change: the
# members it moved wait pending for it, and with a pending majority no
# window opens.  A survivor's distseq_remove_peer() of the lost proposer
# settles the change (1.7: a prepare and an accept round with a ballot on
# a majority; test/model, "Settling a change") and removes it: the others
# are active again and open windows, with no manual SQL, and no value is
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

# a, b and c form a group with a sequence and windows.
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

# a proposes a change and moves b (with a, a majority: it may have been
# decided), then a is lost for good.  (The call is what a's phase one
# leaves on b.)
$node{b}->safe_psql('postgres', qq(
	SELECT distseq.distseq_peer_epoch_cas($epoch, $epoch_id, $epoch + 1, 4242,
		(SELECT members FROM distseq.distseq_node), $a_id, (SELECT node_id FROM distseq.distseq_node))));
$node{a}->stop('immediate');
is(state('b'), ($epoch + 1) . '|3|t', 'b is pending in the change of a, which is lost');

# b asks a, which never answers: b stays pending, and c alone cannot open
# a window (before 1.7: for good).
my ($ret, $out, $err) = $node{b}->psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
like($err, qr/in a membership change that is not active here yet/, 'b, pending, opens no window');
($ret, $out, $err) = $node{c}->psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
like($err, qr/could not reach a majority of the 3 members/, 'nor does c, alone active');
is(state('b'), ($epoch + 1) . '|3|t', 'b waits for a');
my $hwm = sql('c', "SELECT hwm FROM distseq.distseq_sequences WHERE sequence_name = 'orders'");

# c removes a: it settles a's change first.  b took it and a may have too:
# that makes a majority, so c finishes it (b and c take it at c's ballot,
# then phase two activates them), then removes a from it.
($ret, $out, $err) = $node{c}->psql('postgres', "SELECT distseq_remove_peer('node_a')");
is($ret, 0, 'c removes the lost proposer a') or diag($err);
like(slurp_file($node{c}->logfile), qr/settled here: finished, membership ${\($epoch + 1)} of 3 members/,
	'c settled the change of a: it finished it');
is(state('c'), ($epoch + 2) . '|2|f', 'c is active without a');
$node{b}->poll_query_until('postgres', 'SELECT NOT pending FROM distseq.distseq_node')
  or die 'b stayed pending';
is(state('b'), ($epoch + 2) . '|2|f', 'b is active without a');
is(sql('b', 'SELECT accepted_round, promised_round FROM distseq.distseq_node'), '0|0',
	'an active member keeps no ballot of the settled change');

# b and c open windows again.
for (1 .. 3)
{
	draw($_, 150) for qw(b c);
	sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(b c);
}
cmp_ok(sql('c', "SELECT hwm FROM distseq.distseq_sequences WHERE sequence_name = 'orders'"), '>', $hwm,
	'b and c win windows again');
my @w = map { [ split /\|/ ] } map { split /\n/,
	  sql($_, "SELECT window_start, window_end FROM public.distseq_windows_ever('orders')") }
  qw(b c);
@w = sort { $a->[0] <=> $b->[0] } @w;
is(scalar(grep { $w[$_]->[0] < $w[ $_ - 1 ]->[1] } 1 .. $#w), 0, 'no two windows of b and c overlap');
is($dups, 0, 'no value was handed out twice (' . scalar(keys %seen) . ' values)');

$node{$_}->stop for qw(b c);
done_testing();
