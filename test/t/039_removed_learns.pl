# A member removed while it was cut off learns it is out when it is back,
# from a majority of the members it knew, and says so; the members stop
# listing it; it can be added again and draws values no one else drew.
# Neither a partitioned member nor a hostile peer's answer makes a node
# think it is out, and a node that has not learned it is out cannot join.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my @names = qw(a b c d);
my %node;
$node{$_} = peer_node("learn_$_", window_log => 1) for @names;
for my $n (@names)
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } @names;
}
sub sql { my ($n, $q) = @_; return $node{$n}->safe_psql('postgres', $q); }
sub state { return sql($_[0], 'SELECT epoch, cardinality(members), pending FROM distseq.distseq_node'); }
sub member { return sql($_[0], 'SELECT node_id = ANY (members) FROM distseq.distseq_node'); }

# Point the servers on $on for the nodes in @to at the node's own port, or
# at a closed one: a link that is cut, or mended.
my $closed = PostgreSQL::Test::Cluster::get_free_port();
sub link_to
{
	my ($on, $up, @to) = @_;
	sql($on, "ALTER SERVER node_$_ OPTIONS (SET port '" . ($up ? $node{$_}->port : $closed) . "')")
	  for @to;
}

my %seen;
my $dups = 0;
sub draw
{
	my ($n, $count) = @_;
	$dups += grep { $seen{$_}++ } split /\n/,
	  sql($n, "SELECT distseq_nextval('orders') FROM generate_series(1, $count)");
}

# a, b and c form a group with a sequence and windows.
sql('a', "SELECT distseq_add_peer('node_$_')") for qw(b c);
for my $n (qw(b c))
{
	sql($n, "SELECT distseq_add_peer('node_$_')") for grep { $_ ne $n } qw(a b c);
}
sql('a', "SELECT distseq_create('orders', block_size => 5, window_size => 50, min_open_windows => 2)");
sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(a b c);
draw($_, 30) for qw(a b c);

# A hostile b answers that it is in a later membership without c.  With a
# up, c still has its majority; with a down, c has none, and one member's
# word does not make it think it is out.
my $b_id = sql('b', 'SELECT node_id FROM distseq.distseq_node');
my $state_sig = 'distseq.distseq_peer_state(OUT node_id bigint, OUT epoch bigint,'
  . ' OUT epoch_id bigint, OUT members bigint[], OUT pending boolean)';
sql('b', "CREATE OR REPLACE FUNCTION $state_sig LANGUAGE sql
	AS \$\$ SELECT $b_id, 99::bigint, 1::bigint, ARRAY[$b_id], false \$\$");
is(sql('c', 'SELECT count(*) FROM distseq_maintain()'), '1', 'with b lying, c still draws on a and itself');
$node{a}->stop('immediate');
my ($ret, $out, $err) = $node{c}->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/could not reach a majority/, 'with a down too, c has no majority');
unlike($err, qr/no longer a member/, 'and b alone cannot tell c it is out');
is(member('c'), 't', 'c is still a member');
$node{a}->start;
sql('b', "CREATE OR REPLACE FUNCTION $state_sig
	AS '\$libdir/distseq', 'distseq_peer_state'
	LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp");

# c is cut off while a adds d: the group moves on with c.  When c hears
# from a and b again (they still cannot reach c), they are in a later
# membership, but c is in it: c is not out, and is brought in once a
# reaches it.
link_to('c', 0, qw(a b));
link_to($_, 0, 'c') for qw(a b);
($ret, $out, $err) = $node{a}->psql('postgres', "SELECT distseq_add_peer('node_d')");
like($err, qr/not active on every member yet/, 'a adds d with c cut off');
sql('b', "SELECT distseq_add_peer('node_d')");
sql('d', "SELECT distseq_add_peer('node_$_')") for qw(a b);
link_to('c', 1, qw(a b));
($ret, $out, $err) = $node{c}->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/in another membership epoch/, 'c sees the others in a later membership');
unlike($err, qr/no longer a member/, 'one with c in it: c is not out');
is(member('c'), 't', 'c is still a member');
link_to($_, 1, 'c') for qw(a b);
$node{a}->poll_query_until('postgres', 'SELECT bool_and(finished) FROM distseq.distseq_change')
  or die 'c was never brought in';
sql('c', "SELECT distseq_add_peer('node_d')");
sql('d', "SELECT distseq_add_peer('node_c')");
my $epoch = sql('a', 'SELECT epoch FROM distseq.distseq_node');
is(state('c'), "$epoch|4|f", 'c is active in the membership with d');
sql($_, 'SELECT count(*) FROM distseq_maintain()') for @names;
draw($_, 30) for @names;

# c is cut off (it cannot reach anyone) and down while a removes it.
link_to('c', 0, qw(a b d));
$node{c}->stop('immediate');
($ret, $out, $err) = $node{a}->psql('postgres', "SELECT distseq_remove_peer('node_c')");
is($ret, 0, 'a removes c while c is down');
is(state('a'), ($epoch + 1) . '|3|f', 'a, b and d are the group');
for my $n (qw(a b d))
{
	is(sql($n, "SELECT count(*) FROM distseq_peers WHERE server_name = 'node_c'"), '0',
		"$n no longer lists c in distseq_peers");
}
draw($_, 30) for qw(a b d);
sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(a b d);

# c is back, still cut off: it has not learned it is out, so it cannot
# join again yet.
$node{c}->start;
($ret, $out, $err) = $node{a}->psql('postgres', "SELECT distseq_add_peer('node_c')");
like($err, qr/cannot join: it is not a fresh node/, 'c cannot join before it knows it is out');
like($err, qr/learns it when it is back/, 'and the hint says why');
is(member('c'), 't', 'c, cut off, still thinks it is a member');

# Its links mended, c asks the others and learns it is out.
link_to('c', 1, qw(a b d));
($ret, $out, $err) = $node{c}->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/ERROR:  this server is no longer a member of the distseq group/,
	'c says it is no longer a member');
like($err, qr/DETAIL:  Membership @{[$epoch + 1]} of the group does not include it, as distseq peer "node_[abd]" said/,
	'naming the membership and who said so');
unlike($err, qr/majority/, 'not that it could not reach a majority');
($ret, $out, $err) = $node{c}->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/HINT:  Run distseq_add_peer\(\) for this server on a member/,
	'asked again, it says what to do');
is(state('c'), ($epoch + 1) . '|3|f', 'c holds the membership that left it out, not pending');
like(slurp_file($node{c}->logfile), qr/this server is no longer a member of its group: a majority/,
	'and its log says how it learned');
# it serves the windows it has, then its sessions get the same error
($ret, $out, $err) = $node{c}->psql('postgres',
	"SELECT distseq_nextval('orders') FROM generate_series(1, 1000)");
like($err, qr/no longer a member of the distseq group/, 'its sessions are told so once its windows are used up');
unlike($err, qr/majority/, 'not that it could not reach a majority');

# c can be added again, and draws values no one else drew.
($ret, $out, $err) = $node{a}->psql('postgres', "SELECT distseq_add_peer('node_c')");
is($ret, 0, 'a adds c again') or diag($err);
sql($_, "SELECT distseq_add_peer('node_c')") for qw(b d);
sql('c', "SELECT distseq_add_peer('node_$_')") for qw(a b d);
is(state('c'), ($epoch + 2) . '|4|f', 'c is an active member again');
for (1 .. 2)
{
	sql($_, 'SELECT count(*) FROM distseq_maintain()') for @names;
	draw($_, 60) for @names;
}

# d, removed while it is up, is pending outside the new membership until it
# asks a, which says the change was decided: then it waits for nothing, the
# others no longer list it, and it can be added again.
sql('a', "SELECT distseq_remove_peer('node_d')");
$node{d}->poll_query_until('postgres', 'SELECT NOT pending FROM distseq.distseq_node')
  or die 'd stayed pending';
is(state('d'), ($epoch + 3) . '|3|f', 'd is out, not pending');
for my $n (qw(a b c))
{
	is(sql($n, "SELECT count(*) FROM distseq_peers WHERE server_name = 'node_d'"), '0',
		"$n no longer lists d");
}
($ret, $out, $err) = $node{d}->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/no longer a member of the distseq group.*\n.*as distseq peer "node_a" said/,
	'd says it is out, as a said');
sql('a', "SELECT distseq_add_peer('node_d')");
sql($_, "SELECT distseq_add_peer('node_d')") for qw(b c);
sql('d', "SELECT distseq_add_peer('node_$_')") for qw(a b c);
is(state('d'), ($epoch + 4) . '|4|f', 'd is an active member again');
for (1 .. 2)
{
	sql($_, 'SELECT count(*) FROM distseq_maintain()') for @names;
	draw($_, 60) for @names;
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
