# Attack on bounded windows: pools that give back whole windows and rests
# of merged ones at clean restarts, then distseq_alter lowering max_value
# to the least value it accepts and raising it again (which, without peers,
# lowers the mark to the cut and opens windows from there).  If the highest
# reserved value ever fell below a value handed out, the raise would hand
# it out again.  Every value drawn (committed or rolled back) is kept; every
# fourth restart is a crash.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $node = PostgreSQL::Test::Cluster->new('attack');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
window_log($node);

my %spec = (
	s => "block_size => 20, window_size => 20",
	t => "block_size => 5, window_size => 20",
	u => "block_size => 40, window_size => 10",
	p => "block_size => 20, window_size => 20, stripes => 2, stripe => 1");
my (%seen, %dups);
for my $seq (sort keys %spec)
{
	$node->safe_psql('postgres', "SELECT distseq_create('$seq', $spec{$seq})");
	$seen{$seq} = {};
}

sub draw
{
	my ($seq, $n, $rollback) = @_;
	my $sql = "SELECT distseq_nextval('$seq') FROM generate_series(1, $n)";
	$sql = "BEGIN; $sql; ROLLBACK" if $rollback;
	for my $v (split /\n/, $node->safe_psql('postgres', $sql))
	{
		push @{ $dups{$seq} }, $v if $seen{$seq}{$v}++;
	}
}

sub max_drawn
{
	my ($seq) = @_;
	my $m;
	for (keys %{ $seen{$seq} })
	{
		$m = $_ if !defined $m || $_ > $m;
	}
	return $m;
}

for my $round (1 .. 24)
{
	for my $seq (sort keys %spec)
	{
		draw($seq, 1 + ($round * 7) % 45, 0);
		draw($seq, 1 + $round % 4, 1);
		draw($seq, 2, 0);
	}
	next if $round % 3;
	# mostly clean restarts (the pools go back), every fourth a crash
	if ($round % 12)
	{
		$node->restart;
	}
	else
	{
		$node->stop('immediate');
		$node->start;
	}
	for my $seq (sort keys %spec)
	{
		my $m = max_drawn($seq);
		my ($ret, $out, $err) = $node->psql('postgres',
			"SELECT distseq_alter('$seq', max_value => $m - 1)");
		isnt($ret, 0, "round $round $seq: alter below $m refused");
		($ret, $out, $err) = $node->psql('postgres',
			"SELECT distseq_alter('$seq', max_value => 1)");
		my ($least) = $err =~ /max_value of at least (\d+)/;
		ok(defined $least, "round $round $seq: hint") or diag $err;
		next unless defined $least;
		$node->safe_psql('postgres',
			"SELECT distseq_alter('$seq', max_value => $least);
			 SELECT distseq_alter('$seq', max_value => 9000000000000000000);");
		draw($seq, 30, 0);
	}
}
for my $seq (sort keys %spec)
{
	is(scalar(@{ $dups{$seq} // [] }), 0, "$seq: no value twice")
	  or diag "@{ $dups{$seq} }[0 .. 9]";
}
diag $node->safe_psql('postgres',
	"SELECT sequence_name, values_issued, values_released, values_lost FROM distseq.distseq_sequences ORDER BY 1");
diag $node->safe_psql('postgres',
	"SELECT sequence_name, count(*), count(*) FILTER (WHERE next_hi = window_start) FROM public.distseq_window_log GROUP BY 1 ORDER BY 1");
$node->stop;
done_testing();
