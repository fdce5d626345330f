# A proposer that decided a membership change and was lost before phase
# two comes back after a survivor settled its change (1.7) and removed it.
# It must not finish its old change on the members that moved on, nor win
# a window from a stale membership: no value is handed out twice and no
# two windows overlap, whatever it does with what it had.
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

# draws that stop at the first error (a, out of its group, runs dry)
for my $n (@names)
{
	sql($n, q{CREATE FUNCTION draw_some(n int) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
		BEGIN
			FOR i IN 1 .. n LOOP
				BEGIN
					RETURN NEXT distseq_nextval('orders');
				EXCEPTION WHEN others THEN
					RETURN;
				END;
			END LOOP;
		END $$});
}
my %seen;
my $dups = 0;
sub draw
{
	my ($n, $count) = @_;
	$dups += grep { $seen{$_}++ } split /\n/, sql($n, "SELECT draw_some($count)");
}
draw($_, 150) for @names;
my ($epoch, $epoch_id, $a_id) = split /\|/,
  sql('a', 'SELECT epoch, epoch_id, node_id FROM distseq.distseq_node');

# a moves b, then decides: its own move with the record of the change, in
# one transaction, as change_propose does; lost before phase two.
my $cas = "distseq.distseq_peer_epoch_cas($epoch, $epoch_id, $epoch + 1, 4242,"
  . " (SELECT members FROM distseq.distseq_node), $a_id, (SELECT node_id FROM distseq.distseq_node))";
$node{b}->safe_psql('postgres', "SELECT $cas");
$node{a}->safe_psql('postgres', qq(
	BEGIN;
	SELECT $cas;
	INSERT INTO distseq.distseq_change (epoch, epoch_id, prev_epoch, prev_epoch_id, members, prev_members)
	  SELECT epoch, epoch_id, prev_epoch, prev_epoch_id, members, prev_members FROM distseq.distseq_node;
	COMMIT;));
$node{a}->stop('immediate');
is(state('b'), ($epoch + 1) . '|3|t', 'b is pending in the change a decided');

# c removes a: it settles a's change (finishes it), then removes a.
my ($ret, $out, $err) = $node{c}->psql('postgres', "SELECT distseq_remove_peer('node_a')");
is($ret, 0, 'c removes the lost proposer a') or diag($err);
like(slurp_file($node{c}->logfile), qr/settled here: finished, membership ${\($epoch + 1)} of 3 members/,
	'c settled the change of a: it finished it');
is(state('c'), ($epoch + 2) . '|2|f', 'c is active without a');
$node{b}->poll_query_until('postgres', 'SELECT NOT pending FROM distseq.distseq_node')
  or die 'b stayed pending';
is(state('b'), ($epoch + 2) . '|2|f', 'b is active without a');
for (1 .. 2)
{
	draw($_, 150) for qw(b c);
	sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(b c);
}

# a comes back: its worker resumes phase two of the change it decided.
my $hwm_bc = sql('c', "SELECT hwm FROM distseq.distseq_sequences WHERE sequence_name = 'orders'");
my $before = scalar(keys %seen);
$node{a}->start;
for (1 .. 3)
{
	$node{a}->psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
	draw('a', 150);
	draw($_, 150) for qw(b c);
	sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(b c);
	sleep 1;
}
is(state('b'), ($epoch + 2) . '|2|f', 'b stays in the membership without a');
is(state('c'), ($epoch + 2) . '|2|f', 'c stays in the membership without a');
note('a: ' . state('a') . ', ' . (scalar(keys %seen) - $before) . ' values drawn after a came back');
is(sql('a', 'SELECT count(*) FROM distseq.distseq_windows w, distseq.distseq_sequences s'
	. ' WHERE w.sequence_name = s.sequence_name AND w.window_end > ' . $hwm_bc), '0',
	'a won no window above what b and c had won before it came back');

my @w = map { [ split /\|/ ] } map { split /\n/,
	  sql($_, "SELECT window_start, window_end FROM public.distseq_windows_ever('orders')") }
  @names;
@w = sort { $a->[0] <=> $b->[0] } @w;
is(scalar(grep { $w[$_]->[0] < $w[ $_ - 1 ]->[1] } 1 .. $#w), 0, 'no two windows of a, b and c overlap');
is($dups, 0, 'no value was handed out twice (' . scalar(keys %seen) . ' values)');

$node{$_}->stop for @names;
done_testing();
