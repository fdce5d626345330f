# Three servers share a sequence by striping: each issues its own residue,
# with no peer and no coordination, and keeps issuing while the others are
# down.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my @nodes;
for my $k (0 .. 2)
{
	my $node = PostgreSQL::Test::Cluster->new("stripe$k");
	$node->init;
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
	$node->start;
	$node->safe_psql('postgres',
		"CREATE EXTENSION distseq;
		 SELECT distseq_create('orders', block_size => 5, window_size => 50,
							   stripes => 3, stripe => $k);");
	push @nodes, $node;
}

# Four clients on each node, in parallel.
my @clients;
for my $k (0 .. 2)
{
	for my $c (1 .. 4)
	{
		my $out = $nodes[$k]->basedir . "/client$c.out";
		my $h = IPC::Run::start(
			[
				'psql', '-XAtq', '-d', $nodes[$k]->connstr('postgres'), '-c',
				"SELECT distseq_nextval('orders') FROM generate_series(1, 2000)"
			],
			'>', $out, '2>', "$out.err");
		push @clients, [ $k, $h, $out ];
	}
}

my %seen;
my $repeats = 0;
my %residues;
for my $c (@clients)
{
	my ($k, $h, $out) = @$c;
	$h->finish;
	my @v = split /\n/, slurp_file($out);
	is(scalar(@v), 2000, "node $k client drew 2000 values");
	for my $v (@v)
	{
		$repeats++ if $seen{$v}++;
		$residues{$k}{ $v % 3 }++;
	}
}
is($repeats, 0, 'no value twice over 3 nodes x 4 clients');
for my $k (0 .. 2)
{
	is_deeply([ keys %{ $residues{$k} } ], [$k], "node $k issues only residue $k");
}

# Two nodes down: the third carries on alone.
$nodes[0]->stop('immediate');
$nodes[1]->stop;
my @alone = split /\n/, $nodes[2]->safe_psql('postgres',
	"SELECT distseq_nextval('orders') FROM generate_series(1, 500)");
is(scalar(grep { $seen{$_} } @alone), 0, 'node 2 alone: nothing repeated');
is(scalar(grep { $_ % 3 != 2 } @alone), 0, 'node 2 alone: still its residue');

$nodes[2]->stop;
done_testing();
