# CREATE DATABASE ... TEMPLATE copies a sequence with its relation OID and
# its generation: three databases then carry the same (relid, gen), and
# with distseq.max_sequences = 3 (a worker slot for each database) and two
# sequences each, they take the entries from each other all the time.  A
# session of the first database holds a block throughout and draws on
# after its entry was taken and taken back: within each database no value
# may come twice, a session's values only rise, and the totals stay sane,
# also after a clean restart.  (An attack that found nothing: kept to
# catch a regression.)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('copies');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.max_sequences = 3
distseq.worker_idle_timeout = '1s'
");
$node->start;

$node->safe_psql('postgres', 'CREATE DATABASE t1');
$node->safe_psql('t1',
	"CREATE EXTENSION distseq;
	 SELECT distseq_create('s', block_size => 10, window_size => 1000);
	 SELECT distseq_create('u', block_size => 10, window_size => 1000);");
$node->safe_psql('postgres', 'CREATE DATABASE t2 TEMPLATE t1');
$node->safe_psql('postgres', 'CREATE DATABASE t3 TEMPLATE t1');

my %values;
sub record
{
	my ($db, $out) = @_;
	push @{ $values{$db} }, split(/\n/, $out);
}

# t1's session holds a block of s (9 values left) the whole time
my $h = $node->background_psql('t1', on_error_stop => 0);
my @held = split /\n/, $h->query_safe("SELECT distseq_nextval('s')");

for my $round (1 .. 5)
{
	for my $db ('t2', 't3', 't1')
	{
		for my $s ('s', 'u')
		{
			my ($ret, $out, $err) = $node->psql($db,
				"SELECT distseq_nextval('$s') FROM generate_series(1, 15)");
			is($ret, 0, "round $round: $db drew from $s") or diag($err);
			record("$db.$s", $out);
		}
	}
	# the held session draws on: from its block, then from whatever entry
	push @held,
	  split(/\n/,
		$h->query_safe("SELECT distseq_nextval('s') FROM generate_series(1, 4)"));
}
$h->quit;
record('t1.s', join("\n", @held));

my @sorted = sort { $a <=> $b } @held;
is("@held", "@sorted", "the held session's values only rose");
for my $k (sort keys %values)
{
	my %seen;
	my @dup = grep { $seen{$_}++ } @{ $values{$k} };
	is(scalar(@dup), 0, "$k: no value came twice") or diag("@dup[0..9]");
}

# Written back at a clean restart: every value reserved is issued,
# released or counted lost, and none is counted twice
$node->restart;
for my $db ('t1', 't2', 't3')
{
	is( $node->safe_psql($db,
			"SELECT bool_and(values_issued >= 0 AND values_lost >= 0
				AND values_released >= 0
				AND values_issued + values_lost + values_released <= values_reserved)
			 FROM distseq.distseq_sequences"),
		't', "$db: the totals add up");
	my %seen;
	my @dup = grep { $seen{$_}++ } (@{ $values{"$db.s"} },
		split(/\n/, $node->safe_psql($db,
			"SELECT distseq_nextval('s') FROM generate_series(1, 50)")));
	is(scalar(@dup), 0, "$db: after the restart, no value of s came again");
}

$node->stop;
done_testing();
