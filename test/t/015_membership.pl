# Changing the membership: removing a member that is down, a member that
# missed a change catching up, a group of two shrinking, and a change whose
# proposer died half way being abandoned.  Windows of every node, removed
# ones included, must never overlap, and no value is handed out twice.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::INET;
use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my %node;
my @names = qw(a b c d e);
$node{$_} = peer_node("node_$_", window_log => 1) for @names;
for my $n (@names)
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } @names;
}

sub sql { my ($n, $q) = @_; return $node{$n}->safe_psql('postgres', $q); }

sub state { return sql($_[0], 'SELECT epoch, cardinality(members), pending FROM distseq.distseq_node'); }

sub windows_of
{
	my ($seq, @nodes) = @_;
	my @w;
	for my $n (@nodes)
	{
		push @w, map { [ split /\|/ ] } split /\n/,
		  sql($n, "SELECT window_start, window_end FROM public.distseq_windows_ever('$seq')");
	}
	return @w;
}

sub windows { return windows_of('orders', @_); }

sub overlaps
{
	my @w = sort { $a->[0] <=> $b->[0] } @_;
	my $bad = 0;
	for my $i (1 .. $#w)
	{
		$bad++ if $w[$i]->[0] < $w[ $i - 1 ]->[1];
	}
	return $bad;
}

my %seen;
my $dups = 0;

sub draw
{
	my ($n, $count) = @_;
	for my $v (split /\n/,
		sql($n, "SELECT distseq_nextval('orders') FROM generate_series(1, $count)"))
	{
		$dups++ if $seen{$v}++;
	}
}

# a, b and c form a group; d stays fresh for later.
sql('a', "SELECT distseq_add_peer('node_$_')") for qw(b c);
for my $n (qw(b c))
{
	sql($n, "SELECT distseq_add_peer('node_$_')") for grep { $_ ne $n } qw(a b c);
}
is(join(',', map { state($_) } qw(a b c)), '2|3|f,2|3|f,2|3|f', 'a, b and c are one group');
sql('a', "SELECT distseq_create('orders', block_size => 5, window_size => 1000, min_open_windows => 2)");
sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(a b c);
draw($_, 150) for qw(a b c);

# c hangs: a listener that takes connections and never answers stands in
# for it.  a and b keep drawing and opening windows, waiting on c at most
# distseq.remote_timeout now and then, not at every step.
my $hung = IO::Socket::INET->new(Listen => 64, LocalAddr => '127.0.0.1', LocalPort => 0)
  or die "no listener: $!";
sql($_, "ALTER SERVER node_c OPTIONS (SET port '" . $hung->sockport . "')") for qw(a b);
$node{c}->stop('immediate');
sql('a', "SELECT distseq_create('hang$_', block_size => 1, window_size => 50, min_open_windows => 2)")
  for 1 .. 3;
for my $round (1 .. 3)
{
	for my $n (qw(a b))
	{
		sql($n, 'SELECT count(*) FROM distseq_maintain()');
		is(sql($n, "SELECT count(DISTINCT v) FROM (SELECT distseq_nextval('hang' || (g % 3 + 1)) * 3 + g % 3 AS v"
				  . " FROM generate_series(1, 600) g) s"),
			'600', "with c hung, $n draws on, across many windows (round $round)");
	}
}
is(overlaps(windows_of("hang$_", qw(a b))), 0, "no windows of hang$_ overlap") for 1 .. 3;
# With b down too, a's agent finds no majority; its periodic passes let c
# rest instead of waiting on it every time, and say so.
my $offset = -s $node{a}->logfile;
$node{b}->stop('immediate');
ok($node{a}->wait_for_log(qr/node_c: [^\n]*\(a moment ago\)/, $offset),
	'the agent lets a peer that did not answer rest a while');
$node{b}->start;

# c is down for good; a removes it with b: two of three agree.
sql('a', "SELECT distseq_remove_peer('node_c')");
is(join(',', map { state($_) } qw(a b)), '3|2|f,3|2|f', 'c removed: a and b in epoch 3, two members');
is(sql('a', "SELECT count(*) FROM distseq.distseq_peer WHERE server_name = 'node_c'"), '0',
	'a forgot the server of c once the change was finished');
is(sql('b', "SELECT count(*) FROM distseq.distseq_peer WHERE server_name = 'node_c'"), '0',
	'b forgot it when it took the membership without c');
for (1 .. 3)
{
	draw($_, 300) for qw(a b);
	sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(a b);
}

# c comes back: it serves what it has, but never opens a window again.
$node{c}->start;
my ($ret, $out, $err) = $node{c}->psql('postgres', 'SELECT * FROM distseq_maintain()');
isnt($ret, 0, 'the removed member cannot open windows');
like($err, qr/no longer a member of the distseq group/,
	'with a clear error: the others moved on without it');
draw('c', 20);
# out of its group, c has no member to remove: it just forgets the server
sql('c', "SELECT distseq_remove_peer('node_a')");
is(sql('c', "SELECT count(*) FROM distseq.distseq_peer WHERE server_name = 'node_a'"), '0',
	'a server removed on a node that is no member any more is simply forgotten');
is(state('a'), '3|2|f', 'and nothing was proposed to the group');
is(overlaps(windows(qw(a b c))), 0, 'no windows overlap, the removed member\'s included');

# A node that makes windows of its own while it is being added cannot
# join: e creates a sequence (its first windows) in a transaction that a's
# join of e has to wait for.
my ($in, $solo_out) = ('', '');
my $solo = IPC::Run::start([ 'psql', '-XAtq', '-d', $node{e}->connstr('postgres') ],
	'<', \$in, '>', \$solo_out, '2>', \$solo_out);
$in .= "BEGIN; SELECT distseq_create('solo'); SELECT 'created';\n";
$solo->pump until $solo_out =~ /created/;
my $aout = '';
my $adding = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $node{a}->connstr('postgres'),
	  '-c', "SELECT distseq_add_peer('node_e')" ],
	'>', \$aout, '2>', \$aout);
$node{e}->poll_query_until('postgres', 'SELECT count(*) > 0 FROM pg_locks WHERE NOT granted')
  or die 'the join never waited';
$in .= "COMMIT;\n";
$solo->finish;
$adding->finish;
like($aout, qr/cannot join: it is not fresh/, 'a node that made windows while joining is refused');
is(state('e'), '0|1|f', 'and stays alone');

# d joins while b is down: a majority of {a, b} is both, so it is refused;
# with b back it works.
$node{b}->stop('immediate');
($ret, $out, $err) = $node{a}->psql('postgres', "SELECT distseq_add_peer('node_d')");
like($err, qr/1 of 2 members agreed, 2 needed/, 'a change needs a majority of the members');
is(state('a'), '3|2|f', 'and the failed change left a as it was');
$node{b}->start;
sql('a', "SELECT distseq_add_peer('node_d')");
sql('b', "SELECT distseq_add_peer('node_d')");
sql('d', "SELECT distseq_add_peer('node_$_')") for qw(a b);
is(join(',', map { state($_) } qw(a b d)), '4|3|f,4|3|f,4|3|f', 'd joined a and b');
sql('d', 'SELECT count(*) FROM distseq_maintain()');
draw($_, 200) for qw(a b d);

# A change decided while a member is down: that member catches up later,
# straight from the membership before.  a removes d with b down... no: b
# down leaves a and d, a majority of {a, b, d}; b missed the change.
$node{b}->stop('immediate');
($ret, $out, $err) = $node{a}->psql('postgres', "SELECT distseq_remove_peer('node_d')");
is($ret, 0, 'a removes d with b down (a and d agree)');
like($err, qr/decided, but not active on every member yet/, 'with a warning that b missed it');
is(sql('a', 'SELECT count(*) FROM distseq.distseq_change WHERE NOT finished'), '1',
	'the change is not finished on a');
$node{b}->start;
$node{a}->poll_query_until('postgres',
	'SELECT count(*) = 0 FROM distseq.distseq_change WHERE NOT finished')
  or die 'b never caught up';
is(join(',', map { state($_) } qw(a b)), '5|2|f,5|2|f', 'b caught up: epoch 5, a and b');
($ret, $out, $err) = $node{d}->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/no longer a member of the distseq group/,
	'd, removed while up, knows it is out');
draw($_, 200) for qw(a b);
sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(a b);

# A proposer that died after moving b, before deciding: b is pending, so
# it refuses every compare-and-set, until it asks the proposer and goes
# back.  (The call below is what a dying proposer leaves behind.)
my ($epoch, $epoch_id, $a_id) = split /\|/,
  sql('a', 'SELECT epoch, epoch_id, node_id FROM distseq.distseq_node');
$node{b}->safe_psql('postgres', qq(
	SELECT distseq.distseq_peer_epoch_cas($epoch, $epoch_id, $epoch + 1, 12345,
		(SELECT members FROM distseq.distseq_node), $a_id, (SELECT node_id FROM distseq.distseq_node))));
is(sql('b', "SELECT distseq.distseq_peer_cas('orders', $epoch + 1, 12345, 9223372036854775000, 9223372036854775001)"),
	'f', 'a pending member refuses every compare-and-set');
$node{b}->poll_query_until('postgres', 'SELECT NOT pending FROM distseq.distseq_node')
  or die 'b stayed pending';
is(state('b'), '5|2|f', 'b asked a, learned the change was never decided, and went back');
like(slurp_file($node{b}->logfile), qr/was abandoned; this node is back in the membership before it/,
	'and said so in its log');

# A group of two shrinks only with both: b removes a while a is down: no.
$node{a}->stop('immediate');
($ret, $out, $err) = $node{b}->psql('postgres', "SELECT distseq_remove_peer('node_a')");
like($err, qr/1 of 2 members agreed, 2 needed/, 'one of two cannot remove the other alone');
$node{a}->start;
sql('b', "SELECT distseq_remove_peer('node_a')");
is(state('b'), '6|1|f', 'with a up, b removes a: b alone, epoch 6');
# (a's worker, which asks b, starts with a's first draw)
draw('a', 20);
$node{a}->poll_query_until('postgres', 'SELECT NOT pending FROM distseq.distseq_node')
  or die 'a stayed pending';
is(state('a'), '6|1|f', 'a is out: b says the change was decided, so a waits for nothing');
sql('b', 'SELECT count(*) FROM distseq_maintain()');
draw('b', 300);
($ret, $out, $err) = $node{a}->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/no longer a member/, 'a knows it is out');

is(overlaps(windows(qw(a b c d e))), 0, 'no two windows of any node ever overlap');
is($dups, 0, 'no value was handed out twice (' . scalar(keys %seen) . ' values)');

$node{$_}->stop for @names;
done_testing();
