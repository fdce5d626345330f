# A peer that hangs mid-command costs a bounded time, and only what waits
# on it: a TCP proxy between nodes forwards normally until told to stop
# passing the server's answers (on every connection, old and new, while it
# still accepts new ones and passes what clients send).
#
# 1. Three nodes a, b, c in one group; only the link a -> b goes through
#    the proxy.  With it hung, a (still with a majority, a and c) never
#    fails a draw, and distseq_maintain() on a returns within
#    3 x distseq.remote_timeout.
# 2. A fourth node d with a sequence drawing only from c, through a second
#    proxy, and one of its own: while the remote one's refill hangs, the
#    local one's draws never wait anywhere near distseq.remote_timeout;
#    the hung source then rests, and comes back on distseq_maintain().
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;
use Time::HiRes qw(time);

# distseq.remote_timeout, as peer_node sets it
my $timeout = 2;

my %node;
$node{$_} = peer_node("hung_$_") for qw(a b c);
$node{d} = peer_node('hung_d', conf => "distseq.segment_lifetime = '1ms'\n");

my $hang_ab = $node{a}->basedir . '/hang';
my $hang_dc = $node{d}->basedir . '/hang';
my ($proxy_ab, $port_ab) = tcp_proxy($node{b}->port, hang => $hang_ab);
my ($proxy_dc, $port_dc) = tcp_proxy($node{c}->port, hang => $hang_dc);

# a reaches b through the proxy; every other link is direct.
$node{a}->safe_psql('postgres', qq(
	CREATE SERVER node_b FOREIGN DATA WRAPPER distseq
		OPTIONS (host '127.0.0.1', port '$port_ab', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER node_b OPTIONS (user 'postgres');));
peer_server($node{a}, 'c', $node{c});
for my $n (qw(b c))
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } qw(a b c);
}
for my $n (qw(a b c))
{
	$node{$n}->safe_psql('postgres', "SELECT distseq_add_peer('node_$_')")
	  for grep { $_ ne $n } qw(a b c);
}

$node{a}->safe_psql('postgres',
	"SELECT distseq_create('hot', block_size => 10, window_size => 500, min_open_windows => 2)");
$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()') for qw(a b c);
is($node{a}->safe_psql('postgres',
		"SELECT count(distseq_nextval('hot')) FROM generate_series(1, 2000)"),
	'2000', 'a draws while the proxy forwards');

# Hang the link a -> b: the next command a sends b gets no answer.
open my $fh, '>', $hang_ab or die;
close $fh;

# Three clients draw for a while, far more than the open windows hold.
my @clients;
for my $c (1 .. 3)
{
	my $script = $node{a}->basedir . "/draw_$c.sql";
	open my $s, '>', $script or die;
	print $s "SELECT distseq_nextval('hot') FROM generate_series(1, 100);\n"
	  . "SELECT pg_sleep(0.05) \\g /dev/null\n"
	  for 1 .. 60;
	close $s;
	my $out = $node{a}->basedir . "/draw_$c.out";
	my $h = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d',
			$node{a}->connstr('postgres'), '-f', $script
		],
		'>', $out, '2>', "$out.err");
	push @clients, [ $h, $out ];
}

# Meanwhile distseq_maintain(), which tries b afresh, returns in time.
for my $i (1 .. 2)
{
	my $start = time;
	my ($ret, $out, $err) = $node{a}->psql('postgres',
		'SELECT count(*) FROM distseq_maintain()');
	my $took = time - $start;
	is($ret, 0, "maintain $i on a succeeds with a and c") or diag($err);
	cmp_ok($took, '<', 3 * $timeout,
		"maintain $i on a returned within 3 x remote_timeout ($took s)");
}

my %seen;
my $drawn = 0;
for my $c (@clients)
{
	$c->[0]->finish;
	my @v = split /\n/, slurp_file($c->[1]);
	my $err = slurp_file("$c->[1].err");
	is($err, '', 'a client on a never failed a draw');
	is(scalar(@v), 6000, 'and drew all its values');
	$seen{$_}++ for @v;
	$drawn += @v;
}
is(scalar(keys %seen), $drawn, 'all distinct');
like($node{a}->safe_psql('postgres',
		"SELECT reachable, error FROM distseq_peers WHERE server_name = 'node_b'"),
	qr/^f\|.*(?:timed out|did not answer within)/, 'b looks hung from a');
unlink $hang_ab;

# 2. d draws 'far' only from c (through the second proxy), and 'near' from
# its own windows.
$node{c}->safe_psql('postgres', "SELECT distseq_create('far', block_size => 10)");
$node{c}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
$node{d}->safe_psql('postgres', qq(
	CREATE SERVER src_c FOREIGN DATA WRAPPER distseq
		OPTIONS (host '127.0.0.1', port '$port_dc', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER src_c OPTIONS (user 'postgres');
	SELECT distseq_create('far', block_size => 10, servers => ARRAY['src_c']);
	SELECT distseq_create('near', block_size => 1);
	CREATE FUNCTION near_probe(secs float8, OUT draws int, OUT max_ms float8)
	LANGUAGE plpgsql AS \$\$
	DECLARE
		t0 timestamptz := clock_timestamp();
		t timestamptz;
	BEGIN
		draws := 0;
		max_ms := 0;
		WHILE clock_timestamp() < t0 + secs * interval '1 second' LOOP
			t := clock_timestamp();
			PERFORM distseq_nextval('near');
			max_ms := greatest(max_ms, extract(epoch FROM clock_timestamp() - t) * 1000);
			draws := draws + 1;
		END LOOP;
	END \$\$;));
is($node{d}->safe_psql('postgres', "SELECT count(distseq_nextval('far'))"), '1',
	'd draws from c while the proxy forwards');

open $fh, '>', $hang_dc or die;
close $fh;
my $far_out = $node{d}->basedir . '/far.out';
my $far = IPC::Run::start(
	[
		'psql', '-XAtq', '-d', $node{d}->connstr('postgres'), '-c',
		"SELECT count(distseq_nextval('far')) FROM generate_series(1, 100000)"
	],
	'>', $far_out, '2>', "$far_out.err");
ok($node{d}->poll_query_until('postgres', q(
	SELECT count(*) > 0 FROM pg_stat_activity
	WHERE backend_type = 'distseq worker' AND query = 'distseq remote refill')),
	"d's worker waits on the hung source");

my $refills = "SELECT refills FROM distseq_status WHERE sequence_name = 'near'";
my $before = $node{d}->safe_psql('postgres', $refills);
my ($draws, $max_ms) = split /\|/, $node{d}->safe_psql('postgres',
	"SELECT * FROM near_probe($timeout * 1.5)");
my $after = $node{d}->safe_psql('postgres', $refills);
cmp_ok($after - $before, '>', 10, "near refilled meanwhile ($draws draws)");
cmp_ok($max_ms, '<', $timeout * 1000 / 2,
	"no draw of near waited for the hung source (longest: $max_ms ms)");

$far->finish;
like(slurp_file("$far_out.err"),
	qr/could not refill distseq sequence "far".*did not answer within/s,
	'far fails once its source timed out');
my ($ret, $out, $err) = $node{d}->psql('postgres',
	"SELECT count(distseq_nextval('far')) FROM generate_series(1, 100000)");
like($err, qr/"src_c" did not answer within \d+ ms \(a moment ago\)/,
	'then the source rests: far fails at once, saying why');

unlink $hang_dc;
$node{d}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
is($node{d}->safe_psql('postgres',
		"SELECT count(distseq_nextval('far')) FROM generate_series(1, 1000)"),
	'1000', 'distseq_maintain() tries it afresh: far draws again');

kill 'TERM', $proxy_ab, $proxy_dc;
waitpid($_, 0) for $proxy_ab, $proxy_dc;
$node{$_}->stop for qw(a b c d);
done_testing();
