# Attack on bounded windows in a group of three: chunks as large as the
# windows, so that pools give whole windows and rests of merged windows
# back at clean restarts; then distseq_alter lowering max_value to the
# least value it accepts and raising it again, and distseq_setval to the
# least value it accepts.  No value may come twice on any node.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my %node;
my @names = qw(a b c);
$node{$_} = peer_node("atk_$_") for @names;
peer_group(\%node, @names);
$node{a}->safe_psql('postgres',
	"SELECT distseq_create('g', block_size => 20, window_size => 20, min_open_windows => 2)");
$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()') for @names;

my (%seen, @dups);
sub draw
{
	my ($n, $k, $rollback) = @_;
	my $sql = "SELECT distseq_nextval('g') FROM generate_series(1, $k)";
	$sql = "BEGIN; $sql; ROLLBACK" if $rollback;
	for my $v (split /\n/, $node{$n}->safe_psql('postgres', $sql))
	{
		push @dups, "$n:$v" if $seen{$v}++;
	}
}

for my $round (1 .. 12)
{
	for my $n (@names)
	{
		draw($n, 1 + ($round * 7) % 45, 0);
		draw($n, 1 + $round % 3, 1);
		$node{$n}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
	}
	next if $round % 3;
	$node{$_}->restart for @names;
	$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()') for @names;
	# lower max_value as far as the group lets it (each refusal names
	# one member's reserved top)
	my $try = 1;
	my $least;
	for (1 .. 5)
	{
		my ($ret, $out, $err) = $node{a}->psql('postgres',
			"SELECT distseq_alter('g', max_value => $try)");
		if ($ret == 0)
		{
			$least = $try;
			last;
		}
		($try) = $err =~ /max_value of at least (\d+)/;
		last unless defined $try;
	}
	ok(defined $least, "round $round: alter lowered max_value");
	if (defined $least)
	{
		my $max = (sort { $b <=> $a } keys %seen)[0];
		cmp_ok($least, '>=', $max, "round $round: least max_value $least >= $max drawn");
		$node{a}->safe_psql('postgres',
			"SELECT distseq_alter('g', max_value => 9000000000000000000)");
	}
	$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()') for @names;
	draw($_, 25, 0) for @names;
}
is(scalar(@dups), 0, 'no value twice') or diag "@dups[0 .. 9]";
$node{$_}->stop for @names;
done_testing();
