# Crash safety: twenty times, stop the server with an immediate shutdown (no
# write-back of the pools, crash recovery at the next start) while four
# sessions draw values.  No value any client ever received may be handed
# out again, in any later round.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(sleep);

# One seeded random source, printed in the log, so that a failure can be
# replayed: DISTSEQ_TEST_SEED=<seed> runs the same random moments again.
my $seed = $ENV{DISTSEQ_TEST_SEED} // (int(time()) ^ $$);
srand($seed);
note("random seed $seed (DISTSEQ_TEST_SEED=$seed replays it)");

my $rounds = 20;
my $nclients = 4;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
$node->safe_psql('postgres',
	"SELECT distseq_create('c', block_size => 7, window_size => 101)");

# Single-row clients run this script; it is far longer than a round lasts.
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $script = "$tmp/single.sql";
PostgreSQL::Test::Utils::append_to_file($script,
	"SELECT distseq_nextval('c');\n" x 200000);

my $connstr = $node->connstr('postgres');
my %seen;          # value => "round/client" that received it
my $dups = 0;
my $bad_order = 0;
my $grand_total = 0;
my $silent_total = 0;

for my $round (1 .. $rounds)
{
	my @clients;
	for my $i (0 .. $nclients - 1)
	{
		my @cmd = ('psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $connstr);
		if ($i % 2 == 0)
		{
			push @cmd, '-c',
			  "COPY (SELECT distseq_nextval('c') FROM (SELECT generate_series(1, 100000000)) g) TO STDOUT";
		}
		else
		{
			push @cmd, '-f', $script;
		}
		my ($out, $err) = ('', '');
		my $h = IPC::Run::start(\@cmd, '<', '/dev/null', '>', \$out,
			'2>', \$err,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
		push @clients, { h => $h, out => \$out, err => \$err, i => $i };
	}

	# all four drawing, then a random moment later, crash
	$node->poll_query_until('postgres',
		"SELECT count(*) = $nclients FROM pg_stat_activity"
		  . " WHERE query LIKE '%distseq_nextval(''c'')%'"
		  . " AND pid <> pg_backend_pid()")
	  or die "clients of round $round did not start";
	sleep(0.3 + rand(1.0));
	$node->stop('immediate');

	my $round_total = 0;
	my $cut_short = 0;
	my $silent = 0;
	for my $c (@clients)
	{
		eval { $c->{h}->finish; };
		$cut_short++ if $c->{h}->result != 0;

		# only complete lines count: what the client really received
		my $out = ${ $c->{out} };
		$out =~ s/[^\n]*\z//;
		my @vals = grep { /^\d+$/ } split /\n/, $out;
		$silent++ if !@vals;
		my $prev;
		for my $v (@vals)
		{
			if (defined $prev && $v <= $prev)
			{
				diag("round $round client $c->{i}: $v follows $prev")
				  if $bad_order++ < 5;
			}
			$prev = $v;
			if (exists $seen{$v})
			{
				diag("round $round client $c->{i}: value $v already received in $seen{$v}")
				  if $dups++ < 10;
			}
			else
			{
				$seen{$v} = "$round/$c->{i}";
			}
		}
		$round_total += @vals;
	}
	note("round $round: $round_total values received");
	# a client may still wait for its first refill when the crash comes
	cmp_ok($round_total, '>', 0, "round $round: values were received");
	$silent_total += $silent;
	is($cut_short, $nclients, "round $round: all clients were cut off by the crash");
	$grand_total += $round_total;

	$node->start;
}

cmp_ok($silent_total, '<=', $rounds * $nclients / 4,
	"clients received values in most rounds ($silent_total silent of " . $rounds * $nclients . ")");
is($dups, 0, "no value received twice in $rounds crash rounds ($grand_total values)");
is(scalar(keys %seen), $grand_total, 'all received values distinct');
is($bad_order, 0, 'each session received strictly increasing values');

# After the last crash: draws work and give new values
my @after = split /\n/, $node->safe_psql('postgres',
	"SELECT distseq_nextval('c') FROM generate_series(1, 50)");
is(scalar(@after), 50, 'draws work after the last crash');
is(scalar(grep { exists $seen{$_} } @after), 0,
	'values drawn after the last crash are new');

my $lost = $node->safe_psql('postgres',
	"SELECT values_lost FROM distseq_status WHERE sequence_name = 'c'");
cmp_ok($lost, '>', 0, "distseq_status counts values lost in crashes ($lost)");

# the crashes never left a duplicated window behind
is($node->safe_psql('postgres',
		"SELECT count(*) FROM distseq.distseq_windows a JOIN distseq.distseq_windows b"
		  . " ON a.sequence_name = b.sequence_name AND a.window_start < b.window_start"
		  . " AND b.window_start < a.window_end"),
	'0', 'windows do not overlap');

$node->stop;
done_testing();
