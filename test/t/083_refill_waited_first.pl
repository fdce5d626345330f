# The worker serves first the refills that backends wait for.  Most refills
# are asked for ahead of need (distseq.prefetch_threshold); with thousands
# of sequences asking at once -- every backend's first draw from each of
# 10,000 sequences, say -- a hot sequence that ran dry waited for all of
# them, longer than distseq.refill_timeout (found by bench/many.sh's warm
# clients moving on to one sequence).
#
# Here a trigger makes each refill of 30 "cold" sequences slow, and one
# session makes all 30 ask for their next segment ahead of need.  Then a
# sequence's first draw (its pool is empty) must be served while most of the
# cold refills are still queued; so must, behind 30 others, the refills of a
# hot sequence drawn dry.  The cold ones must all be served in the end.  Nothing here is
# timed: the test counts the cold refills done meanwhile.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $ncold = 30;
my $node = PostgreSQL::Test::Cluster->new('waited');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.max_sequences = 100
distseq.prefetch_threshold = 100
distseq.refill_timeout = '300s'
");
$node->start;

# block 10: the first segment is 100 values, the prefetched next one 200.
# Cold sequences a1..a30 and b1..b30: a queue for each of the two checks.
$node->safe_psql(
	'postgres', qq{
	CREATE EXTENSION distseq;
	SELECT distseq_create(p || g, block_size => 10)
	FROM generate_series(1, $ncold) g, unnest(ARRAY['a', 'b']) p;
	SELECT distseq_create('first', block_size => 10);
	SELECT distseq_create('hot', block_size => 10);
	SELECT count(distseq_nextval(p || g))
	FROM generate_series(1, $ncold) g, unnest(ARRAY['a', 'b']) p;
	SELECT distseq_nextval('hot');
});
ok( $node->poll_query_until(
		'postgres', qq{
	SELECT count(*) = 2 * $ncold + 1 FROM distseq_status
	WHERE prefetch_start IS NOT NULL AND sequence_name <> 'first'}),
	'every sequence drawn from has its next segment');

# a refill of a cold sequence takes 0.2 s from now on
slow_refills($node, '^[ab][0-9]');

# a first draw waits for the sequence's first refill
my $start = queue_refills($node, 'a', $ncold);
is($node->safe_psql('postgres', "SELECT distseq_nextval('first')"),
	'1', 'first draw of a new sequence');
my $done = refills_of($node, 'a') - $start;
cmp_ok($done, '<=', 3,
	"a first draw is served before the queued cold refills ($done of $ncold done)"
);
ok(refilled($node, 'a', $start + $ncold),
	'every queued cold refill is served');

# the hot one drawn dry: 500 values are more than its pool holds, so its
# backend waits for refills, each of which must go first
hot_served_first($node, 'b', $ncold);

fast_refills($node);
$node->stop;
done_testing();
