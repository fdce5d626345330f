# Three nodes share sequences through windows won by a majority
# compare-and-set: concurrent load, a node down, a majority lost, agents
# racing, and credentials that must not leak.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my %node;
for my $n (qw(a b c))
{
	# the password test below needs a role that must authenticate
	$node{$n} = peer_node("node_$n",
		conf => "distseq.refill_timeout = '30s'\n",
		hba => "host all app 127.0.0.1/32 scram-sha-256\n");
	window_log($node{$n});
}

# Every node names the other two and adds them as peers.
for my $n (qw(a b c))
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } qw(a b c);
}
for my $n (qw(a b c))
{
	$node{$n}->safe_psql('postgres', "SELECT distseq_add_peer('node_$_')")
	  for grep { $_ ne $n } qw(a b c);
}
my %epochs;
for my $n (qw(a b c))
{
	my $state = $node{$n}->safe_psql('postgres',
		'SELECT epoch, cardinality(members) FROM distseq.distseq_node');
	$epochs{$state}++;
}
is_deeply(\%epochs, { '2|3' => 3 }, 'all three nodes agree: epoch 2, three members');

# A sequence introduced on one node reaches the others.
$node{a}->safe_psql('postgres',
	"SELECT distseq_create('orders', block_size => 5, window_size => 400, min_open_windows => 2)");
$node{a}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
for my $n (qw(b c))
{
	is($node{$n}->safe_psql('postgres',
			"SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 'orders'"),
		'1', "orders was introduced on $n");
	$node{$n}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
}

# Every window each node ever had (closed ones are merged: window_log),
# as one union per node: no two nodes' may overlap.
sub all_windows
{
	my ($seq, @nodes) = @_;
	return map { logged_windows($node{$_}, $_, $seq) } @nodes;
}

sub overlaps
{
	return window_overlaps(@_);
}

# Load: four clients on each node, small windows, the agents keep up.
sub load
{
	my ($count, @nodes) = @_;
	my @clients;
	for my $n (@nodes)
	{
		for my $c (1 .. 4)
		{
			my $out = $node{$n}->basedir . "/load_$c.out";
			unlink $out;
			my $h = IPC::Run::start(
				[
					'psql', '-XAtq', '-d', $node{$n}->connstr('postgres'), '-c',
					"SELECT distseq_nextval('orders') FROM generate_series(1, $count)"
				],
				'>', $out, '2>', "$out.err");
			push @clients, [ $h, $out, $n ];
		}
	}
	my @values;
	for my $c (@clients)
	{
		$c->[0]->finish;
		my @v = split /\n/, slurp_file($c->[1]);
		diag("client on $c->[2]: " . slurp_file("$c->[1].err")) if @v != $count;
		push @values, @v;
	}
	return @values;
}

my %seen;
my @v = load(1000, qw(a b c));
is(scalar(@v), 12000, '3 nodes x 4 clients drew 1000 values each');
$seen{$_}++ for @v;
is(scalar(keys %seen), scalar(@v), 'all distinct');
is(scalar(overlaps(all_windows('orders', qw(a b c)))), 0, 'no two windows overlap');

# One node down: the other two carry on, and their agents still win.
$node{c}->stop('immediate');
@v = load(500, qw(a b));
is(scalar(@v), 4000, 'two nodes keep issuing with the third down');
my $dups = grep { $seen{$_}++ } @v;
is($dups, 0, 'nothing repeated');
my $before = $node{a}->safe_psql('postgres', "SELECT count(*) FROM distseq.distseq_windows");
$node{a}->safe_psql('postgres', "SELECT distseq_create('more', window_size => 10, min_open_windows => 3)");
$node{a}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
cmp_ok($node{a}->safe_psql('postgres', "SELECT count(*) FROM distseq.distseq_windows"), '>', $before,
	'with 2 of 3 up, distseq_maintain creates windows');

# Two down: no majority; maintain refuses clearly, open windows still serve.
$node{b}->stop('immediate');
my ($ret, $out, $err) = $node{a}->psql('postgres', 'SELECT * FROM distseq_maintain()');
isnt($ret, 0, 'with 1 of 3 up, distseq_maintain refuses');
like($err, qr/could not reach a majority of the 3 members/, 'with a clear error');
unlike($err, qr/password/i, 'that names no password');
my $one = $node{a}->safe_psql('postgres', "SELECT distseq_nextval('orders')");
ok($one > 0 && !$seen{$one}, 'nextval still works from open windows');
$seen{$one}++;

$node{b}->start;
$node{c}->start;

# Agents racing: maintain in a loop on all three nodes at once; a sequence
# that wants many open windows makes every call allocate.
$node{a}->safe_psql('postgres',
	"SELECT distseq_create('race', window_size => 7, min_open_windows => 40)");
$node{a}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
my @racers;
for my $n (qw(a b c))
{
	my $sql = join('', map { "SELECT count(*) FROM distseq_maintain();\n" } 1 .. 5);
	my $file = $node{$n}->basedir . '/race.sql';
	open my $fh, '>', $file or die;
	print $fh $sql;
	close $fh;
	push @racers, IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node{$n}->connstr('postgres'), '-f', $file ],
		'>', "$file.out", '2>', "$file.err");
}
$_->finish for @racers;
is($node{a}->safe_psql('postgres',
		'SELECT count(*), bool_and(reachable), bool_and(open_windows > 0),
		        bool_and(members = 3) FROM distseq_peers'),
	'2|t|t|t', 'distseq_peers shows both peers reachable, with open windows');
my @race = all_windows('race', qw(a b c));
my $won = 0;
$won += $node{$_}->safe_psql('postgres',
	"SELECT count(DISTINCT window_start) FROM public.distseq_window_log WHERE sequence_name = 'race'")
  for qw(a b c);
cmp_ok($won, '>=', 100, "the racing agents allocated many windows ($won)");
my @bad = overlaps(@race);
is(scalar(@bad), 0, 'no two windows of racing agents overlap') or diag("@bad[0..2]");

# A wrong password, and a role that would borrow the server's identity.
$node{b}->safe_psql('postgres', "CREATE ROLE app LOGIN PASSWORD 'right-secret'");
$node{a}->safe_psql('postgres', qq(
	CREATE ROLE mallory LOGIN;
	GRANT EXECUTE ON FUNCTION distseq_add_peer(name) TO mallory;
	CREATE SERVER node_b_bad FOREIGN DATA WRAPPER distseq
		OPTIONS (host '127.0.0.1', port '@{[ $node{b}->port ]}', dbname 'postgres');
	CREATE USER MAPPING FOR mallory SERVER node_b_bad OPTIONS (user 'app', password 'wrong-secret');
	CREATE SERVER node_b_trust FOREIGN DATA WRAPPER distseq
		OPTIONS (host '127.0.0.1', port '@{[ $node{b}->port ]}', dbname 'postgres');
	CREATE USER MAPPING FOR mallory SERVER node_b_trust OPTIONS (user 'postgres');));
($ret, $out, $err) = $node{a}->psql('postgres',
	"SET ROLE mallory; SELECT distseq_add_peer('node_b_bad')");
like($err, qr/permission denied for foreign server node_b_bad/,
	'a server the role may not use is refused');
$node{a}->safe_psql('postgres',
	'GRANT USAGE ON FOREIGN SERVER node_b_bad, node_b_trust TO mallory');
($ret, $out, $err) = $node{a}->psql('postgres',
	"SET ROLE mallory; SELECT distseq_add_peer('node_b_bad')");
like($err, qr/could not connect to distseq peer "node_b_bad"/, 'a wrong password: the error names the server');
unlike($err, qr/wrong-secret/, 'and not the password');
($ret, $out, $err) = $node{a}->psql('postgres',
	"SET ROLE mallory; SELECT distseq_add_peer('node_b_trust')");
like($err, qr/password is required to reach distseq peer "node_b_trust"/,
	'a non-superuser cannot connect without a password');
($ret, $out, $err) = $node{a}->psql('postgres',
	"CREATE SERVER bad_opt FOREIGN DATA WRAPPER distseq OPTIONS (password 'x')");
like($err, qr/invalid option "password"/, 'a password is not a server option');
# (the test's own CREATE USER MAPPING is logged as a statement, by log_statement)
my @leaks = grep { /wrong-secret/ && !/statement: / && !/CREATE USER MAPPING/ }
  split /\n/, slurp_file($node{a}->logfile);
is(scalar(@leaks), 0, 'the log never shows the password') or diag(@leaks);

# A shared sequence cannot be dropped on a node with peers: its mark there
# is part of the group's memory.
($ret, $out, $err) = $node{a}->psql('postgres', "SELECT distseq_drop('orders')");
like($err, qr/cannot drop distseq sequence "orders" on a node with peers/,
	'a shared sequence is not dropped on one member');
# nor with the table whose column owns it
($ret, $out, $err) = $node{a}->psql('postgres',
	"CREATE TABLE orders_owner (id bigint);
	 ALTER SEQUENCE distseq.orders OWNED BY orders_owner.id;
	 DROP TABLE orders_owner");
like($err, qr/cannot drop distseq sequence "orders" on a node with peers/,
	'nor with the table whose column owns it');

# A copy of a member -- here a promoted standby of c, on a new timeline --
# takes no part in the group.
$node{c}->safe_psql('postgres', 'CHECKPOINT');
$node{c}->backup('c_backup');
my $copy = PostgreSQL::Test::Cluster->new('node_c_copy');
$copy->init_from_backup($node{c}, 'c_backup', has_streaming => 1);
$copy->start;
$copy->promote;
$copy->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die;
my $state = $copy->safe_psql('postgres', 'SELECT epoch, epoch_id FROM distseq.distseq_node');
my ($ep, $epid) = split /\|/, $state;
($ret, $out, $err) = $copy->psql('postgres',
	"SELECT distseq.distseq_peer_cas('orders', $ep, $epid, 9223372036854775000, 9223372036854775001)");
like($err, qr/this distseq node is a copy of a member/, 'a promoted copy of a member does not vote');
($ret, $out, $err) = $copy->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/copy of a member|could not reach a majority/, 'nor allocates');
$copy->stop;

# A fourth node joins after the sequences exist: it is seeded with every
# mark, so the sequences introduced to it later start above every window.
my $d = peer_node('node_d');
window_log($d);
$node{d} = $d;
for my $pair ([ 'a', 'd' ], [ 'b', 'd' ], [ 'c', 'd' ], [ 'd', 'a' ], [ 'd', 'b' ], [ 'd', 'c' ])
{
	peer_server($node{ $pair->[0] }, $pair->[1], $node{ $pair->[1] });
}
$node{a}->safe_psql('postgres', "SELECT distseq_add_peer('node_d')");
$node{$_}->safe_psql('postgres', "SELECT distseq_add_peer('node_d')") for qw(b c);
$d->safe_psql('postgres', "SELECT distseq_add_peer('node_$_')") for qw(a b c);
is($d->safe_psql('postgres', 'SELECT count(*) > 0 FROM distseq.distseq_seed'), 't',
	'the joiner was seeded for sequences it does not have yet');
$d->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
is($d->safe_psql('postgres', "SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'orders'"),
	'2', 'the joiner opened its own windows');
is(scalar(overlaps(all_windows('orders', qw(a b c d)))), 0, "the joiner's windows overlap no one's");
is(scalar(overlaps(all_windows('race', qw(a b c d)))), 0, 'for every sequence');

# All of it again after the restarts: still nothing twice.
@v = load(300, qw(a b c));
$dups = grep { $seen{$_}++ } @v;
is($dups, 0, 'after restarts nothing is repeated');
is(scalar(overlaps(all_windows('orders', qw(a b c)))), 0, 'and no windows overlap');

$node{$_}->stop for qw(a b c d);
done_testing();
