# Refill size adapts to demand: segments grow for a hot sequence and shrink
# for a cold one, within 10 and 1024 blocks: a segment never shrinks below
# where it starts.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(min);

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

# Cold: with a lifetime of 1 ms every segment lasts long, and each refill
# halves the next one, down to the floor.
$node->append_conf('postgresql.conf', "distseq.segment_lifetime = '1ms'");
$node->reload;
my @sizes;
for my $i (1 .. 60)
{
	$node->safe_psql('postgres',
		"SELECT count(distseq_nextval('a')) FROM generate_series(1, 3000)");
	push @sizes, segment_size();
	last if @sizes > 3 && $sizes[-4] == 100;
}
my $sizes = join(' ', @sizes);
cmp_ok($sizes[-1], '<', 10240, "a cold sequence shrinks ($sizes)");
is(min(@sizes), 100, 'down to 10 blocks, where it started');
is_deeply([ @sizes[-4 .. -1] ], [ (100) x 4 ], 'and no further');

my $values = $node->safe_psql('postgres',
	"SELECT count(*) = count(DISTINCT v) FROM (SELECT distseq_nextval('a') v FROM generate_series(1, 5000)) s");
is($values, 't', 'values stay distinct across resizes');

$node->stop;
done_testing();
