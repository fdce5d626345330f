# A refill that a backend waits for goes first (refill.c) also when, on a
# node with peers, the sequence has no open window left, so that its
# refill starts an agent pass.  Between the steps of that pass the worker
# served every other pending refill in entry order (a whole pass of
# distseq_refill_serve), so the waited one, served only once the pass had
# opened its window, waited for all those before it: here 30 queued slow
# refills (30 of 30 done meanwhile, 6 s, before the fix; 1 of 30 after).
# Now only the refills that backends wait for are served between the steps.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $ncold = 30;
my %node;
# no agent pass on a timer: only the one a refill needs
$node{a} = peer_node('needs_agent_a', conf => "distseq.agent_interval = '1h'
distseq.max_sequences = 100
distseq.prefetch_threshold = 100
distseq.refill_timeout = '300s'
");
$node{b} = peer_node('needs_agent_b');
peer_group(\%node, 'a', 'b');
my $a = $node{a};

# cold ones first: their entries come before hot's
$a->safe_psql('postgres', qq{
	SELECT distseq_create('c' || g, block_size => 10, window_size => 100000)
	FROM generate_series(1, $ncold) g;
	SELECT distseq_create('hot', block_size => 10, window_size => 100,
		min_open_windows => 1);
	SELECT count(*) FROM distseq_maintain();
	SELECT count(distseq_nextval('c' || g)) FROM generate_series(1, $ncold) g;
	SELECT distseq_nextval('hot');
});
ok( $a->poll_query_until(
		'postgres', qq{
	SELECT count(*) = $ncold + 1 FROM distseq_status
	WHERE prefetch_start IS NOT NULL}),
	'every sequence has its next segment');

slow_refills($a, '^c[0-9]');

# hot's windows hold 100 values each: drawing 500 runs it dry, and its
# refills need windows the agent opens
hot_served_first($a, 'c', $ncold);

fast_refills($a);
$_->stop for values %node;
done_testing();
