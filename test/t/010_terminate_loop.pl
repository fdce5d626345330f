# Terminations in a loop: three clients draw values all the time from a
# sequence with tiny blocks and windows, while, eight times over, either a
# client that waits for a refill or the refill worker is terminated with
# pg_terminate_backend (the worker half the time while it is stuck in a
# refill).  A terminated client is replaced by a new one.  No value may come
# out twice, each session's values must grow, and the server must never
# restart.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time sleep);

# One seeded random source, printed in the log, so that a failure can be
# replayed: DISTSEQ_TEST_SEED=<seed> runs the same random moments again.
my $seed = $ENV{DISTSEQ_TEST_SEED} // (int(time()) ^ $$);
srand($seed);
note("random seed $seed (DISTSEQ_TEST_SEED=$seed replays it)");

my $iterations = 8;
my $nclients = 3;
my $timeout = $PostgreSQL::Test::Utils::timeout_default;

my $node = PostgreSQL::Test::Cluster->new('terminate_loop');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
$node->safe_psql('postgres',
	"SELECT distseq_create('tl', block_size => 3, window_size => 40)");
my $start_time = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');

my $tmp = PostgreSQL::Test::Utils::tempdir;
# (generate_series in the select list: in FROM it would be materialized
# before the first row; a pause per row keeps the output small)
my $client_query = "COPY (SELECT distseq_nextval('tl')"
  . " FROM (SELECT generate_series(1, 100000000)) g"
  . " WHERE pg_sleep(0.0002) IS NOT NULL) TO STDOUT";
my $client_like = "query LIKE 'COPY (SELECT distseq_nextval(''tl'')%'";

# A client prints its pid, then values for as long as it lives, into a file.
my @clients;
sub client_start
{
	my $n = scalar @clients;
	my $file = "$tmp/client$n.out";
	my $err = '';
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
		  '-c', "SELECT 'pid:' || pg_backend_pid()", '-c', $client_query ],
		'<', '/dev/null', '>', $file, '2>', \$err);
	my $c = { n => $n, h => $h, file => $file, err => \$err, live => 1 };
	push @clients, $c;
	return $c;
}

sub client_pid
{
	my ($c) = @_;
	return $c->{pid} if $c->{pid};
	my $deadline = time() + $timeout;
	while (time() < $deadline)
	{
		my $text = -e $c->{file} ? slurp_file($c->{file}) : '';
		if ($text =~ /^pid:(\d+)$/m)
		{
			$c->{pid} = $1;
			return $1;
		}
		sleep(0.05);
	}
	die "client $c->{n} never started";
}

# Values a client received: complete lines only
sub client_values
{
	my ($c) = @_;
	my $text = slurp_file($c->{file});
	$text =~ s/[^\n]*\z//;    # a last line without its newline does not count
	return grep { /^\d+$/ } split /\n/, $text;
}

sub poll
{
	my ($sql, $what) = @_;
	my $deadline = time() + $timeout;
	while (time() < $deadline)
	{
		return 1 if $node->safe_psql('postgres', $sql) eq 't';
		sleep(0.05);
	}
	diag("timed out waiting until $what");
	return 0;
}

sub worker_pid
{
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'distseq worker'");
}

# Hold the sequence's catalog row: the worker's next refill waits for it.
sub lock_catalog_row
{
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err},
		IPC::Run::timeout($timeout));
	$s{in} .= "BEGIN;\nSELECT 'locked' FROM distseq.distseq_sequences"
	  . " WHERE sequence_name = 'tl' FOR UPDATE;\n";
	$s{h}->pump until $s{out} =~ /locked/;
	return \%s;
}

sub unlock_catalog_row
{
	my ($s) = @_;
	$s->{in} .= "COMMIT;\n\\q\n";
	$s->{h}->finish;
}

sub wait_for_draws
{
	my ($what) = @_;
	my $before = $node->safe_psql('postgres',
		"SELECT values_issued FROM distseq_status WHERE sequence_name = 'tl'");
	ok(poll("SELECT values_issued > $before FROM distseq_status WHERE sequence_name = 'tl'",
			"values flow again ($what)"),
		"$what: clients draw again");
}

client_start() for 1 .. $nclients;
client_pid($_) for @clients;
ok(poll("SELECT count(*) = $nclients FROM pg_stat_activity WHERE $client_like",
		'the clients draw'),
	'all clients draw');
sleep(0.3);

my $client_kills = 0;
my $worker_kills = 0;
for my $it (1 .. $iterations)
{
	if ($it % 2 == 1)
	{
		# a client waiting for a refill: the worker is held up behind the lock
		my $lock = lock_catalog_row();
		ok(poll("SELECT count(*) > 0 FROM pg_stat_activity WHERE $client_like"
				  . " AND wait_event_type = 'Extension'", 'a client waits'),
			"iteration $it: a client waits for a refill");
		my $victim = $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE $client_like"
			  . " AND wait_event_type = 'Extension' ORDER BY pid LIMIT 1");
		is($node->safe_psql('postgres', "SELECT pg_terminate_backend($victim)"),
			't', "iteration $it: waiting client $victim terminated");
		unlock_catalog_row($lock);

		my ($c) = grep { $_->{live} && client_pid($_) == $victim } @clients;
		ok(defined $c, "iteration $it: the terminated backend was one of the clients");
		if ($c)
		{
			eval { $c->{h}->finish; };
			$c->{live} = 0;
			like(${ $c->{err} }, qr/terminating connection due to administrator command/,
				"iteration $it: the client was terminated, not served");
		}
		$client_kills++;
		client_pid(client_start());
		wait_for_draws("iteration $it");
	}
	else
	{
		# the worker: stuck in a refill behind the lock, or under load
		my $stuck = $it % 4 == 2;
		my $lock;
		if ($stuck)
		{
			$lock = lock_catalog_row();
			ok(poll("SELECT count(*) = 1 FROM pg_stat_activity"
					  . " WHERE backend_type = 'distseq worker' AND wait_event_type = 'Lock'",
					'the worker waits for the lock'),
				"iteration $it: the worker is stuck in a refill");
		}
		my $old = worker_pid();
		like($old, qr/^\d+$/, "iteration $it: a worker runs");
		is($node->safe_psql('postgres', "SELECT pg_terminate_backend($old)"),
			't', "iteration $it: worker $old terminated" . ($stuck ? ' in a refill' : ' under load'));
		unlock_catalog_row($lock) if $stuck;
		ok(poll("SELECT count(*) = 1 FROM pg_stat_activity"
				  . " WHERE backend_type = 'distseq worker' AND pid <> $old",
				'a new worker runs'),
			"iteration $it: a new worker runs");
		$worker_kills++;
		wait_for_draws("iteration $it");
	}
	sleep(0.2 + rand(0.3));
}

# stop the clients that are left
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE $client_like");
for my $c (grep { $_->{live} } @clients)
{
	eval { $c->{h}->finish; };
	$c->{live} = 0;
}

my %seen;
my $dups = 0;
my $not_increasing = 0;
my $total = 0;
my $bad_errors = 0;
for my $c (@clients)
{
	my @v = client_values($c);
	note("client $c->{n}: " . scalar(@v) . ' values');
	cmp_ok(scalar(@v), '>', 0, "client $c->{n} received values");
	for my $k (0 .. $#v)
	{
		if ($k > 0 && $v[$k] <= $v[ $k - 1 ])
		{
			diag("client $c->{n}: $v[$k] follows $v[$k - 1]") if $not_increasing++ < 5;
		}
		if (exists $seen{ $v[$k] })
		{
			diag("value $v[$k] received by client $seen{$v[$k]} and client $c->{n}")
			  if $dups++ < 10;
		}
		$seen{ $v[$k] } = $c->{n};
	}
	$total += @v;
	# the only error a client may see is its termination
	for my $line (split /\n/, ${ $c->{err} })
	{
		next if $line =~ /terminating connection due to administrator command/
		  || $line =~ /server closed the connection unexpectedly/
		  || $line =~ /This probably means the server terminated abnormally/
		  || $line =~ /before or while processing the request/
		  || $line =~ /connection to server was lost/;
		diag("client $c->{n}: $line") if $bad_errors++ < 10;
	}
}
is($client_kills, $iterations / 2, 'waiting clients were terminated');
is($worker_kills, $iterations / 2, 'the worker was terminated');
is(scalar(@clients), $nclients + $client_kills, 'every terminated client was replaced');
is($bad_errors, 0, 'no client saw an error other than its termination');
is($dups, 0, "no value received twice ($total values)");
is(scalar(keys %seen), $total, 'all values received are distinct');
is($not_increasing, 0, "each client's values increase");

# the server never restarted, no process crashed, draws go on
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
	$start_time, 'the server did not restart');
unlike(slurp_file($node->logfile), qr/terminated by signal|server processes terminated/,
	'no process crashed');
my @after = split /\n/, $node->safe_psql('postgres',
	"SELECT distseq_nextval('tl') FROM generate_series(1, 100)");
is(scalar(@after), 100, 'draws work at the end');
is(scalar(grep { exists $seen{$_} } @after), 0, 'and give values nobody received');
is($node->safe_psql('postgres',
		"SELECT count(*) FROM distseq.distseq_windows a JOIN distseq.distseq_windows b"
		  . " ON a.sequence_name = b.sequence_name AND a.window_start < b.window_start"
		  . " AND b.window_start < a.window_end"),
	'0', 'windows do not overlap');

$node->stop;
done_testing();
