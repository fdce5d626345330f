# A refill that needs an agent pass to open its sequence's windows reserves
# one segment.  Between the steps of that pass the worker serves pending
# refills -- this one too, as soon as the pass has won its window (test
# 085) -- and after the pass it used to reserve again: two segments for one
# request.
# 1. The first refill of a sequence since the server started counts what
#    the catalog has reserved and not handed out as lost (a crash's pools):
#    the second reservation counted the first segment, in the pool, so a
#    sequence created on a node of a group and drawn once before the
#    agent's timer opened its windows had 100 values lost, its issued count
#    went back to 0, and after a clean restart the catalog's
#    values_reserved - values_released = values_issued + values_lost failed.
# 2. With windows of one segment (block_size 10, window_size 100, the
#    segment's floor), every refill takes a whole window, so it happened at
#    every prefetch that needed the agent: the pool held the rest of its
#    segment, the prefetch and a third segment in a fragment (100
#    returned_values), and a crash lost two and a half segments instead of
#    less than one and a half.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my %node;
# no agent pass on a timer, and segments at their floor of 10 blocks
$node{a} = peer_node('once_a', conf => "distseq.agent_interval = '1h'
distseq.segment_lifetime = '1ms'
");
$node{b} = peer_node('once_b');
peer_group(\%node, 'a', 'b');
my $a = $node{a};

$a->safe_psql('postgres',
	'CREATE TABLE drawn (seq text, v bigint, PRIMARY KEY (seq, v))');

sub draw
{
	my ($seq, $n) = @_;
	$a->safe_psql('postgres',
		"INSERT INTO drawn SELECT '$seq', distseq_nextval('$seq') FROM generate_series(1, $n)");
}

# The worker is done with every refill asked before: a pass asked for now
# may be the one a refill under way runs and answers, the next is not.
sub settle
{
	$a->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()')
	  for 1 .. 2;
}

# segment, prefetch and fragments of the pool, in values
sub pool
{
	my ($seq) = @_;
	return split /\|/, $a->safe_psql('postgres', qq{
		SELECT COALESCE(p.pool_end - p.pool_start, 0),
			   COALESCE(p.prefetch_end - p.prefetch_start, 0), p.returned_values
		FROM distseq_pool_status() p
		JOIN distseq.distseq_sequences s ON p.seqrel = s.seqrel::oid
		WHERE s.sequence_name = '$seq'});
}

sub booked
{
	my ($seq) = @_;
	return $a->safe_psql('postgres', qq{
		SELECT s.values_reserved - s.values_released - s.values_issued - s.values_lost
		FROM distseq.distseq_sequences s WHERE sequence_name = '$seq'});
}

sub status
{
	my ($seq, $column) = @_;
	return $a->safe_psql('postgres',
		"SELECT $column FROM distseq_status WHERE sequence_name = '$seq'");
}

# 1. No window yet: the first draw's refill needs the agent.
$a->safe_psql('postgres',
	"SELECT distseq_create('fresh', block_size => 10, window_size => 100, min_open_windows => 1)");
draw('fresh', 1);
settle();
is(status('fresh', 'values_lost'), '0', 'a first refill that needed the agent lost nothing');
is(status('fresh', 'values_issued'), '10', 'and counts the chunk drawn from as issued');
my ($cur, $pre, $frags) = pool('fresh');
is("$cur $pre $frags", '90 0 0', 'one segment was reserved, the rest of it is in the pool');

# 2. The first refill takes the window distseq_maintain() opened, whole; 54
# more values cut the segment's sixth chunk, which leaves 40 in it: less
# than half a segment, so the next one is fetched, and that needs the agent.
$a->safe_psql('postgres', q{
	SELECT distseq_create('slow', block_size => 10, window_size => 100,
		min_open_windows => 1);
	SELECT count(*) FROM distseq_maintain();});
draw('slow', 1);
draw('slow', 54);
ok($a->poll_query_until('postgres',
		"SELECT prefetch_start IS NOT NULL FROM distseq_status WHERE sequence_name = 'slow'"),
	'the next segment arrives');
settle();
($cur, $pre, $frags) = pool('slow');
is($frags, 0, 'one segment was reserved for the prefetch, not two');
cmp_ok($cur + $pre, '<', 150,
	"the pool holds less than a segment and a half ($cur + $pre)");

# A crash loses that pool.
$a->stop('immediate');
$a->start;
draw('slow', 1);
settle();
my $lost = status('slow', 'values_lost');
cmp_ok($lost, '>=', 100, "the crash lost the pool ($lost values)");
cmp_ok($lost, '<', 150, 'less than a segment and a half');

# After a clean restart, which gives the pools back, every value is counted.
draw('slow', 60);
draw('fresh', 60);
settle();
$a->restart;
is(booked($_), '0', "$_: reserved - released = issued + lost after a clean restart")
  for qw(fresh slow);
is($a->safe_psql('postgres', 'SELECT count(*) FROM drawn'), '177',
	'every value drawn is distinct');

$_->stop for values %node;
done_testing();
