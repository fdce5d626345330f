# Refills that backends wait for are served first (refill.c): an attack on
# it that found nothing, kept to catch a regression.  Two databases (the
# count of waits is server-wide, each database's worker looks at it) draw
# at once from more sequences than there are entries, so entries are taken
# over all the time, with a flag of the sequence they carried before left
# to be cleared; small blocks and distseq.prefetch_threshold = 100 make
# refills asked ahead of need and refills waited for meet.  In each round
# the workers are terminated once, and the round ends in a crash
# (immediate stop).  No value any client received comes
# twice or out of its sequence's range, and no wait for a refill times out.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(sleep);

my $seed = $ENV{DISTSEQ_TEST_SEED} // (int(time()) ^ $$);
srand($seed);
note("random seed $seed (DISTSEQ_TEST_SEED=$seed replays it)");

my $rounds = 6;
my $nseq = 10;
my $nclients = 3;
my @dbs = ('d1', 'd2');

my $node = PostgreSQL::Test::Cluster->new('waited_stress');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.max_sequences = 8
distseq.prefetch_threshold = 100
distseq.refill_timeout = '60s'
max_connections = 30
");
$node->start;

# Sequence sN hands out values of [N * 10^9, (N + 1) * 10^9) only.
for my $db (@dbs)
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql(
		$db, qq{
	CREATE EXTENSION distseq;
	SELECT distseq_create('s' || g, block_size => 2 + g % 3, window_size => 97,
		start_value => g * 1000000000::bigint,
		max_value => g * 1000000000::bigint + 999999999)
	FROM generate_series(1, $nseq) g;});
}

# Each client draws, one statement each, from sequences chosen at random,
# a few values at a time.  An entry busy or all in use is an error it goes
# on after; the values it received are on its standard output.
my $tmp = PostgreSQL::Test::Utils::tempdir;
for my $c (1 .. $nclients)
{
	my $sql = '';
	for (1 .. 20000)
	{
		my $k = 1 + int(rand($nseq));
		my $n = 1 + int(rand(4));
		$sql .= "SELECT $k, distseq_nextval('s$k') FROM generate_series(1, $n);\n";
	}
	PostgreSQL::Test::Utils::append_to_file("$tmp/c$c.sql", $sql);
}

my %seen;
my ($dups, $out_of_range, $total, $timeouts, $waits) = (0, 0, 0, 0, 0);
for my $round (1 .. $rounds)
{
	my @clients;
	for my $db (@dbs)
	{
		for my $c (1 .. $nclients)
		{
			my ($out, $err) = ('', '');
			my $h = IPC::Run::start(
				[ 'psql', '-XAtq', '-d', $node->connstr($db), '-f', "$tmp/c$c.sql" ],
				'<', '/dev/null', '>', \$out, '2>', \$err,
				IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
			push @clients, { db => $db, h => $h, out => \$out, err => \$err };
		}
	}
	$node->poll_query_until('postgres',
		"SELECT count(*) >= " . (@dbs * $nclients) . " FROM pg_stat_activity"
		  . " WHERE query LIKE '%distseq_nextval%' AND pid <> pg_backend_pid()")
	  or die "clients of round $round did not start";
	# the workers are terminated once meanwhile: they start again, and
	# find the entries, and their flags, as they were left
	sleep(0.5 + rand(1.0));
	$node->safe_psql('postgres',
		"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		 WHERE application_name = 'distseq worker'");
	sleep(1.0 + rand(1.0));
	for my $db (@dbs)
	{
		$waits += $node->safe_psql($db,
			'SELECT coalesce(sum(waits), 0) FROM distseq_status');
	}
	$node->stop('immediate');

	my $round_total = 0;
	for my $c (@clients)
	{
		eval { $c->{h}->finish; };
		$timeouts++ while ${ $c->{err} } =~ /timed out waiting for a refill/g;
		# the last line may be cut by the crash
		my @lines = split /\n/, ${ $c->{out} };
		pop @lines if ${ $c->{out} } !~ /\n\z/;
		for my $line (@lines)
		{
			my ($k, $v) = split /\|/, $line;
			next unless defined $v && $v =~ /^\d+$/;
			$round_total++;
			$out_of_range++
			  if $v < $k * 1000000000 || $v >= ($k + 1) * 1000000000;
			my $key = "$c->{db}/$k/$v";
			if (exists $seen{$key})
			{
				$dups++;
				diag("value $key twice: round $round and $seen{$key}")
				  if $dups <= 5;
			}
			else
			{
				$seen{$key} = "round $round";
			}
		}
	}
	note("round $round: $round_total values");
	$total += $round_total;
	cmp_ok($round_total, '>', 100, "round $round: clients drew values");
	$node->start;
}

cmp_ok($waits, '>', 0, "clients waited for refills ($waits waits)");
is($dups, 0, "no value received twice ($total received)");
is($out_of_range, 0, 'every value in its sequence\'s range');
is($timeouts, 0, 'no wait for a refill timed out');
unlike(slurp_file($node->logfile),
	qr/TRAP|terminated by signal 11|out of shared memory/,
	'no crash but the immediate stops');

$node->stop;
done_testing();
