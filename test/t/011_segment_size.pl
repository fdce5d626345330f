# Refill size adapts to demand: segments grow for a hot sequence and shrink
# for a cold one, within 2 and 1024 blocks.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('segments');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;
$node->safe_psql('postgres',
	"CREATE EXTENSION distseq; SELECT distseq_create('a', block_size => 10);");

sub segment_size
{
	return $node->safe_psql('postgres',
		"SELECT segment_size FROM distseq_status WHERE sequence_name = 'a'");
}

$node->safe_psql('postgres', "SELECT distseq_nextval('a')");
is(segment_size(), '100', 'a segment starts at 10 blocks');

# Hot: with a lifetime of an hour, every segment lasts "a moment".
$node->append_conf('postgresql.conf', "distseq.segment_lifetime = '1h'");
$node->reload;
$node->safe_psql('postgres', "SELECT count(distseq_nextval('a')) FROM generate_series(1, 200000)");
is(segment_size(), '10240', 'a hot sequence grows to 1024 blocks');
is($node->safe_psql('postgres',
		"SELECT values_per_second > 1000 AND runway_seconds > 0 AND runway_seconds < 1e6
		 FROM distseq_status WHERE sequence_name = 'a'"),
	't', 'the status estimates the rate and how long the open windows last');

# Cold: with a lifetime of 10 ms, a segment that lasts 100 ms is long.
$node->append_conf('postgresql.conf', "distseq.segment_lifetime = '10ms'");
$node->reload;
for my $i (1 .. 4)
{
	# a fresh session per round: each takes a new block from the pool
	$node->safe_psql('postgres',
		"SELECT count(distseq_nextval('a')) FROM generate_series(1, 3000)");
	usleep(100_000);
}
my $shrunk = segment_size();
cmp_ok($shrunk, '<', 10240, "a cold sequence shrinks ($shrunk)");
cmp_ok($shrunk, '>=', 20, 'not below 2 blocks');

my $values = $node->safe_psql('postgres',
	"SELECT count(*) = count(DISTINCT v) FROM (SELECT distseq_nextval('a') v FROM generate_series(1, 5000)) s");
is($values, 't', 'values stay distinct across resizes');

$node->stop;
done_testing();
