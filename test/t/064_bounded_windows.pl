# distseq_windows stays bounded: a refill that closes a window merges it
# with the run of closed windows right below it into one row (at most 256
# rows at a time).  Whatever the history, the rows of a sequence stay at
# most
#
#   min_open_windows + 2 + 2 x 8
#
# where the slack is the pieces a write-back splits rows into when a pool
# gives ranges back (at most 8 rests and the segments it holds).  Nothing
# readers need moves: the top of the windows and the highest reserved value
# are what they would be with every row kept (checked against a log of
# every window ever written), the rows hold reserved exactly what was
# reserved, setval and alter below that are still refused, a clean restart
# loses nothing, and no value comes twice, on one server or across three.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $slack = 2 * 8;

my $node = PostgreSQL::Test::Cluster->new('bounded');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'\nmax_connections = 40\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
window_log($node);
# 5,000 closed windows of history below the sequence's values, as a
# catalog kept from before the merging would have
$node->safe_psql('postgres',
	"CREATE TABLE drawn (v bigint PRIMARY KEY);
	 SELECT distseq_create('b', block_size => 5, window_size => 20,
						   start_value => 100001);
	 INSERT INTO distseq.distseq_windows
		SELECT 'b', 1 + 20 * k, 21 + 20 * k, 21 + 20 * k
		FROM generate_series(0, 4999) k;");

my $rows = "SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'b'";
my $min_open = 2;

# Many refills: sessions that draw, some leaving rests behind in the pool
for my $round (1 .. 40)
{
	$node->safe_psql('postgres',
		"INSERT INTO drawn SELECT distseq_nextval('b') FROM generate_series(1, 250)");
	$node->safe_psql('postgres',
		"INSERT INTO drawn SELECT distseq_nextval('b') FROM generate_series(1, 3)");
	$node->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()')
	  if $round % 4 == 0;
}
my $closed = $node->safe_psql('postgres',
	"SELECT count(DISTINCT window_start) FROM public.distseq_window_log
	 WHERE sequence_name = 'b' AND next_hi = window_end AND window_start > 100000");
cmp_ok($closed, '>=', 400, "$closed windows were closed");
cmp_ok($node->safe_psql('postgres', $rows), '<=', $min_open + 2 + $slack,
	'the rows of the sequence stay bounded, the history included');
is($node->safe_psql('postgres',
		"SELECT count(*) || '|' || bool_and(window_end > 100001 AND next_hi = window_end)
		 FROM distseq.distseq_windows WHERE sequence_name = 'b' AND window_start < 100001"),
	'1|true', 'the history below was merged into one closed row with later windows');

# What readers need is what the full history says
is($node->safe_psql('postgres',
		"SELECT (SELECT max(window_end) FROM distseq.distseq_windows WHERE sequence_name = 'b')
			  = (SELECT max(window_end) FROM public.distseq_window_log WHERE sequence_name = 'b')"),
	't', 'the top of the windows is unchanged');
my $reserved = $node->safe_psql('postgres',
	"SELECT max(next_hi) FROM distseq.distseq_windows
	 WHERE sequence_name = 'b' AND next_hi > window_start");
# the rows hold reserved exactly the history and what the catalog counts
# reserved for b: a merge neither drops nor adds a reserved value
is($node->safe_psql('postgres',
		"SELECT (SELECT sum(next_hi - window_start) FROM distseq.distseq_windows
				 WHERE sequence_name = 'b')
			  = 100000 + values_reserved - values_released
		 FROM distseq.distseq_sequences WHERE sequence_name = 'b'"),
	't', 'the rows hold reserved exactly what was reserved');
my $max_drawn = $node->safe_psql('postgres', 'SELECT max(v) FROM drawn');
cmp_ok($reserved, '>', $max_drawn, 'and lies above every value drawn');

my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT distseq_setval('b', $max_drawn - 10)");
like($err, qr/distseq_setval: value \d+ is below what distseq sequence "b" may have handed out/,
	'setval below the reserved values is refused');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT distseq_alter('b', max_value => $max_drawn - 10)");
like($err, qr/distseq_alter: max_value \d+ is below what distseq sequence "b" may have handed out/,
	'alter below the reserved values is refused');

# Blocks as large as the windows: each chunk of the stream is a whole
# window, and while a session draws from one, the windows after it close,
# which merges the chunk's window into one row with them.  At the
# write-back the rest of the chunk goes back into that row, split there.
$node->safe_psql('postgres',
	"CREATE TABLE f_drawn (v bigint PRIMARY KEY);
	 SELECT distseq_create('f', block_size => 20, window_size => 20);");
for (1 .. 5)
{
	$node->safe_psql('postgres',
		"INSERT INTO f_drawn SELECT distseq_nextval('f') FROM generate_series(1, 25)");
}
my $f_max = $node->safe_psql('postgres', 'SELECT max(v) FROM f_drawn');

# A clean restart writes the pool back, also what came from merged windows
$node->restart;
is($node->safe_psql('postgres',
		"SELECT values_lost FROM distseq_status WHERE sequence_name = 'f'"),
	'0', 'f: the rest of a chunk whose window was merged goes back');
($ret, $out, $err) = $node->psql('postgres',
	"SELECT distseq_alter('f', max_value => $f_max - 1)");
like($err, qr/distseq_alter: max_value \d+ is below what distseq sequence "f" may have handed out/,
	'f: after the write-back, alter below the values drawn is still refused');
$node->safe_psql('postgres',
	"INSERT INTO f_drawn SELECT distseq_nextval('f') FROM generate_series(1, 100)");
pass('f: drawing after the restart: no value twice (primary key)');
is($node->safe_psql('postgres',
		"SELECT values_lost FROM distseq_status WHERE sequence_name = 'b'"),
	'0', 'a clean restart loses no value');
$node->safe_psql('postgres',
	"INSERT INTO drawn SELECT distseq_nextval('b') FROM generate_series(1, 500)");
pass('drawing after the restart: no value twice (primary key)');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM drawn d WHERE NOT EXISTS
		 (SELECT FROM public.distseq_window_log w WHERE w.sequence_name = 'b'
		  AND d.v >= w.window_start AND d.v < w.next_hi)"),
	'0', 'every value drawn was reserved in a window');
is($node->safe_psql('postgres',
		"SELECT values_issued = (SELECT count(*) FROM drawn) AND values_lost = 0
		 FROM distseq_status WHERE sequence_name = 'b'"),
	't', 'every value issued was drawn, none lost');
cmp_ok($node->safe_psql('postgres', $rows), '<=', $min_open + 2 + $slack,
	'still bounded after the write-back');
$node->stop;

# A server that others draw from (servers => ...): their reservations
# close its windows while its own stream still draws from an older one,
# which is merged with them.  Its clean restart gives the rest of that
# chunk back into the merged row: nothing lost, and nothing handed out
# twice.
my $src = peer_node('bounded_src');
my $cli = peer_node('bounded_cli');
peer_server($cli, 'src', $src);
$src->safe_psql('postgres',
	"CREATE TABLE drawn (v bigint PRIMARY KEY);
	 SELECT distseq_create('h', block_size => 20, window_size => 20);
	 INSERT INTO drawn SELECT distseq_nextval('h') FROM generate_series(1, 3);");
$cli->safe_psql('postgres',
	"SELECT distseq_create('h', block_size => 10, servers => ARRAY['node_src'])");
my @cli_values = split /\n/, $cli->safe_psql('postgres',
	"SELECT distseq_nextval('h') FROM generate_series(1, 200)");
my $first = $src->safe_psql('postgres', 'SELECT min(v) FROM drawn');
is($src->safe_psql('postgres',
		"SELECT count(*) FROM distseq.distseq_windows
		 WHERE sequence_name = 'h' AND window_start <= $first
		 AND window_end > $first + 20 AND next_hi = window_end"),
	'1', 'the window the source\'s stream draws from was merged with later ones');
$src->restart;
is($src->safe_psql('postgres',
		"SELECT values_lost FROM distseq_status WHERE sequence_name = 'h'"),
	'0', 'the source\'s restart gives the rest of its chunk back');
$src->safe_psql('postgres',
	"INSERT INTO drawn SELECT distseq_nextval('h') FROM generate_series(1, 100)");
my %src_seen = map { $_ => 1 } split /\n/, $src->safe_psql('postgres', 'SELECT v FROM drawn');
is(scalar(grep { $src_seen{$_} } @cli_values), 0,
	'the source hands out none of the values its client drew');
$_->stop for $src, $cli;

# Three nodes: windows come from the agents' majority compare-and-set
my %node;
for my $n (qw(a b c))
{
	$node{$n} = peer_node("bounded_$n");
	window_log($node{$n});
	$node{$n}->safe_psql('postgres', 'CREATE TABLE drawn (v bigint PRIMARY KEY)');
}
peer_group(\%node, qw(a b c));
$node{a}->safe_psql('postgres',
	"SELECT distseq_create('g', block_size => 2, window_size => 20, min_open_windows => 2)");
$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()')
  for qw(a b c);

for my $round (1 .. 60)
{
	for my $n (qw(a b c))
	{
		$node{$n}->safe_psql('postgres',
			"INSERT INTO drawn SELECT distseq_nextval('g') FROM generate_series(1, 30);
			 SELECT count(*) FROM distseq_maintain();");
	}
}
my @w;
my %seen;
for my $n (qw(a b c))
{
	my $passes = $node{$n}->safe_psql('postgres',
		"SELECT count(DISTINCT window_start) FROM public.distseq_window_log
		 WHERE sequence_name = 'g'");
	cmp_ok($passes, '>=', 50, "node $n won $passes windows");
	cmp_ok($node{$n}->safe_psql('postgres',
			"SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'g'"),
		'<=', $min_open + 2 + $slack, "node $n: the rows of g stay bounded");
	push @w, logged_windows($node{$n}, $n, 'g');
	$seen{$_}++ for split /\n/, $node{$n}->safe_psql('postgres', 'SELECT v FROM drawn');
}
is(scalar(window_overlaps(@w)), 0,
	'no window any node ever had overlaps another node\'s');
is(scalar(grep { $_ > 1 } values %seen), 0, 'no value was drawn on two nodes');
is(scalar(keys %seen), 3 * 60 * 30, 'every value drawn is there');

$node{$_}->stop for qw(a b c);
done_testing();
