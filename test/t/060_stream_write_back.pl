# A write-back that keeps the entry's incarnation -- the worker exiting when
# idle, or a park request on an entry in use -- closes the stream and gives
# what was left of its chunk back to the catalog.  The next refill reserves
# those values again, first (they are the lowest), for the same incarnation:
# the stream must draw from them again, not skip them as lying below the
# last chunk it installed.  Skipped, they become fragments that go back at
# every write-back, one more each time, until the fragments overflow and
# values are counted lost, and every cycle splits a window.
#
# A session draws 3 values of a block of 10, then the worker exits idle and
# writes the pool back, twelve times over: no value may be lost, none come
# twice, and the values go on where the stream stopped.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $node = PostgreSQL::Test::Cluster->new('stream_write_back');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.worker_idle_timeout = '300ms'
");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
# closed windows are merged into rows of several windows: check that
# every row ever written starts and ends where windows do
window_log($node);
$node->safe_psql('postgres',
	"SELECT distseq_create('s', block_size => 10, window_size => 1000);");

my $worker = "SELECT count(*) FROM pg_stat_activity
	 WHERE backend_type = 'distseq worker' AND datname = 'postgres'";
my @values;
my $cycles = 12;
for my $cycle (1 .. $cycles)
{
	push @values,
	  split(/\n/,
		$node->safe_psql('postgres',
			"SELECT distseq_nextval('s') FROM generate_series(1, 3)"));
	# the worker exits when idle, and writes the pool back as it does
	$node->poll_query_until('postgres', "SELECT ($worker) = 0")
	  or die "cycle $cycle: the worker did not exit";
}

my %seen;
my @dups = grep { $seen{$_}++ } @values;
is(scalar(@dups), 0, 'no value came twice');
my $up = 1;
for my $i (1 .. $#values)
{
	$up = 0 if $values[$i] <= $values[ $i - 1 ];
}
ok($up, 'the values grow');
is($values[-1], 3 * $cycles,
	'the stream went on where it stopped: no value skipped')
  or diag(join(' ', @values));
is( $node->safe_psql('postgres',
		"SELECT values_lost FROM distseq_status WHERE sequence_name = 's'"),
	'0',
	'no value lost');
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM public.distseq_window_log
		 WHERE sequence_name = 's'
		 AND ((window_start - 1) % 1000 <> 0 OR (window_end - 1) % 1000 <> 0)"),
	'0',
	'no window was split');

done_testing();
