# Killing processes that take part in a refill:
#  (a) a backend terminated while it waits for a refill;
#  (b) the refill worker terminated under load;
#  (c) a refill that takes longer than distseq.refill_timeout.
# None of them may crash the server or make a value come out twice.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time sleep);

my $node = PostgreSQL::Test::Cluster->new('kill');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
$node->safe_psql('postgres', q{
	SELECT distseq_create('k', block_size => 1, window_size => 101);
	SELECT distseq_create('w', block_size => 7, window_size => 101);
	SELECT distseq_create('t', block_size => 5, window_size => 101);
});
my $start_time = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $timeout = $PostgreSQL::Test::Utils::timeout_default;

# An interactive session: psql reading statements from a pipe.
sub session_start
{
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err},
		IPC::Run::timeout($timeout));
	return \%s;
}

# Run statements in a session; returns what they printed.  Errors go to
# $s->{err}.
sub session_query
{
	my ($s, $sql) = @_;
	$s->{out} = '';
	$s->{in} .= "$sql\n\\echo __done__\n";
	$s->{h}->pump until $s->{out} =~ /^__done__$/m;
	my $out = $s->{out};
	$out =~ s/^__done__\n//m;
	chomp $out;
	return $out;
}

sub session_end
{
	my ($s) = @_;
	$s->{in} .= "\\q\n";
	$s->{h}->finish;
}

sub values_of
{
	my ($text) = @_;
	return grep { /^\d+$/ } split /\n/, $text;
}

sub count_dups
{
	my %n;
	return scalar grep { $n{$_}++ } @_;
}

sub strictly_increasing
{
	for my $k (1 .. $#_)
	{
		return 0 if $_[$k] <= $_[ $k - 1 ];
	}
	return 1;
}

sub worker_pid
{
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'distseq worker'");
}

sub server_not_restarted
{
	my ($what) = @_;
	is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
		$start_time, "$what: the server did not restart");
	my $log = slurp_file($node->logfile);
	unlike($log, qr/terminated by signal|server processes terminated/,
		"$what: no process crashed");
}

# Block the worker: lock a sequence's catalog row, which the worker locks
# FOR NO KEY UPDATE at the start of every refill of that sequence.
sub block_worker
{
	my ($seq) = @_;
	my $s = session_start();
	is(session_query($s,
			"BEGIN; SELECT sequence_name FROM distseq.distseq_sequences"
			  . " WHERE sequence_name = '$seq' FOR UPDATE;"),
		$seq, "catalog row of $seq locked");
	return $s;
}

sub unblock_worker
{
	my ($s) = @_;
	session_query($s, 'COMMIT;');
	session_end($s);
}

###
### (a) a backend terminated while it waits for a refill
###
{
	my $locker = block_worker('k');

	# nobody ever drew from k: the first value needs a refill
	my ($out, $err) = ('', '');
	my $client = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres'),
		  '-c', "SELECT distseq_nextval('k')" ],
		'<', '/dev/null', '>', \$out, '2>', \$err,
		IPC::Run::timeout($timeout));

	ok($node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity"
			  . " WHERE backend_type = 'distseq worker' AND wait_event_type = 'Lock'"),
		'(a) the worker waits for the locked catalog row');
	my $victim;
	ok($node->poll_query_until('postgres',
			"SELECT count(*) = 1 FROM pg_stat_activity"
			  . " WHERE query = 'SELECT distseq_nextval(''k'')'"
			  . " AND wait_event_type = 'Extension'"),
		'(a) the client waits for the refill');
	$victim = $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE query = 'SELECT distseq_nextval(''k'')'");
	is($node->safe_psql('postgres', "SELECT pg_terminate_backend($victim)"),
		't', '(a) waiting client terminated');
	eval { $client->finish; };
	isnt($client->result, 0, '(a) the terminated client failed');
	like($err, qr/terminating connection due to administrator command/,
		'(a) the client was terminated, not served');
	is($out, '', '(a) the terminated client received no value');

	unblock_worker($locker);

	# draws continue, in two sessions at once
	my ($o1, $o2, $e1, $e2) = ('', '', '', '');
	my @h = map {
		my ($o, $e) = $_ == 0 ? (\$o1, \$e1) : (\$o2, \$e2);
		IPC::Run::start(
			[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1',
			  '-d', $node->connstr('postgres'),
			  '-c', "SELECT distseq_nextval('k') FROM generate_series(1, 300)" ],
			'<', '/dev/null', '>', $o, '2>', $e,
			IPC::Run::timeout($timeout));
	} (0, 1);
	$_->finish for @h;
	is($e1 . $e2, '', '(a) draws after the kill raise no error');
	my @v1 = values_of($o1);
	my @v2 = values_of($o2);
	is(scalar(@v1) + scalar(@v2), 600, '(a) 600 values drawn after the kill');
	ok(strictly_increasing(@v1) && strictly_increasing(@v2),
		'(a) each session gets increasing values');
	is(count_dups(@v1, @v2), 0, '(a) no value repeated after the kill');
	server_not_restarted('(a)');
}

###
### (b) the worker terminated while sessions draw
###
{
	my @all;                    # every value anybody received
	my $s = session_start();
	my @s_vals = values_of(session_query($s,
			"SELECT distseq_nextval('w') FROM generate_series(1, 50);"));
	is(scalar(@s_vals), 50, '(b) session drew 50 values before the kill');

	my $old_pid = worker_pid();
	like($old_pid, qr/^\d+$/, "(b) worker is running (pid $old_pid)");

	# load: three sessions drawing while the worker goes away
	my @clients;
	for my $i (0 .. 2)
	{
		my ($o, $e) = ('', '');
		my $h = IPC::Run::start(
			[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1',
			  '-d', $node->connstr('postgres'),
			  '-c', "COPY (SELECT distseq_nextval('w') FROM generate_series(1, 50000)) TO STDOUT" ],
			'<', '/dev/null', '>', \$o, '2>', \$e,
			IPC::Run::timeout($timeout));
		push @clients, { h => $h, out => \$o, err => \$e };
	}
	$node->poll_query_until('postgres',
		"SELECT count(*) = 3 FROM pg_stat_activity WHERE query LIKE 'COPY (SELECT distseq_nextval%'")
	  or die "load did not start";
	sleep(0.2);

	my ($killed, $busy) = split /\|/, $node->safe_psql('postgres',
		"SELECT pg_terminate_backend($old_pid), (SELECT count(*) FROM pg_stat_activity"
		  . " WHERE query LIKE 'COPY (SELECT distseq_nextval%' AND state = 'active')");
	is($killed, 't', '(b) worker terminated');
	cmp_ok($busy, '>', 0, "(b) the worker was terminated under load ($busy sessions drawing)");

	# the worker comes back; every probe draws a value, which counts too
	my $new_pid = '';
	my $deadline = time() + $timeout;
	while (time() < $deadline)
	{
		my ($v, $pid) = split /\|/, session_query($s,
			"SELECT distseq_nextval('w'), (SELECT pid FROM pg_stat_activity"
			  . " WHERE backend_type = 'distseq worker');");
		push @s_vals, $v if defined $v && $v =~ /^\d+$/;
		if (defined $pid && $pid =~ /^\d+$/ && $pid != $old_pid)
		{
			$new_pid = $pid;
			last;
		}
		sleep(0.1);
	}
	like($new_pid, qr/^\d+$/, "(b) a new worker runs (pid $new_pid)");
	isnt($new_pid, $old_pid, '(b) the worker is a new process');
	is($s->{err}, '', '(b) the session saw no error while the worker restarted');

	for my $c (@clients)
	{
		eval { $c->{h}->finish; };
		is(${ $c->{err} }, '', '(b) a loaded session saw no error');
		my @v = values_of(${ $c->{out} });
		is(scalar(@v), 50000, '(b) a loaded session got all its values');
		push @all, @v;
	}

	push @s_vals, values_of(session_query($s,
			"SELECT distseq_nextval('w') FROM generate_series(1, 500);"));
	session_end($s);
	push @all, @s_vals;
	push @all, values_of($node->safe_psql('postgres',
			"SELECT distseq_nextval('w') FROM generate_series(1, 500)"));

	my $dups = count_dups(@all);
	is($dups, 0, '(b) no value repeated before, during and after the worker kill')
	  or do {
		my %n;
		my @d = grep { $n{$_}++ == 1 } @all;
		diag("repeated values: @d[0 .. ($#d < 19 ? $#d : 19)]");
	  };
	server_not_restarted('(b)');
}

###
### (c) a refill that takes longer than distseq.refill_timeout
###
{
	my $locker = block_worker('t');

	my $t0 = time();
	my ($ret, $out, $err) = $node->psql('postgres',
		"SET distseq.refill_timeout = '500ms'; SELECT distseq_nextval('t')");
	my $elapsed = time() - $t0;
	isnt($ret, 0, '(c) nextval fails while the worker is blocked');
	like($err, qr/timed out waiting for a refill of distseq sequence "t"/,
		'(c) the error is the refill timeout');
	is($out, '', '(c) no value returned');
	cmp_ok($elapsed, '<', 8, "(c) the timeout is the session's 500ms, not the default 10s ($elapsed s)");

	unblock_worker($locker);

	my @v = values_of($node->safe_psql('postgres',
			"SET distseq.refill_timeout = '30s';"
			  . " SELECT distseq_nextval('t') FROM generate_series(1, 100)"));
	is(scalar(@v), 100, '(c) draws work once the block is lifted');
	is(count_dups(@v), 0, '(c) values after the timeout are distinct');
	ok(strictly_increasing(@v), '(c) and increasing');
	cmp_ok($node->safe_psql('postgres',
			"SELECT waits FROM distseq_status WHERE sequence_name = 't'"),
		'>', 0, '(c) distseq_status counts the wait');
	server_not_restarted('(c)');
}

$node->stop;
done_testing();
