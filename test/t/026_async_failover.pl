# Failover to an asynchronous standby that lacks the primary's last
# reservations.  A primary draws a burst while its WAL sender is stopped
# (SIGSTOP), dies (immediate stop), and its standby is promoted:
# - with distseq.standby_ack = all, the burst ends in the bounded wait's
#   error, and the promoted standby repeats no value the old primary handed
#   out, to its own sessions or to a server drawing from it;
# - with off, the promoted standby repeats values of the burst: the rejoin
#   skip (the rest of the open windows plus min_open_windows x window_size,
#   2,000 values here at most) is smaller than the burst.  This documents the
#   limitation distseq.standby_ack = all removes.
# Before the burst, the primary draws through 20 windows, which closes them
# and merges them into one row (windows.c): the standby replays the merges,
# and its rejoin skip is what it would be with every window kept.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $burst = 5000;

# Small windows: the rejoin skip is at most 2 x 1,000 values.
sub make_pair
{
	my ($name, $ack) = @_;
	my $primary = peer_node("${name}_primary",
		conf => "distseq.standby_ack = $ack\ndistseq.standby_ack_timeout = '1s'\n");
	$primary->safe_psql('postgres',
		"SELECT distseq_create('s', block_size => 10, window_size => 1000, min_open_windows => 1);
		 SELECT distseq_create('r', block_size => 10, window_size => 1000, min_open_windows => 1);");
	$primary->backup('bkp');
	my $standby = PostgreSQL::Test::Cluster->new("${name}_standby");
	$standby->init_from_backup($primary, 'bkp', has_streaming => 1);
	$standby->start;
	$primary->wait_for_catchup($standby);
	return ($primary, $standby);
}

sub draw
{
	my ($node, $seq, $n) = @_;
	return split /\n/, $node->safe_psql('postgres',
		"SELECT distseq_nextval('$seq') FROM generate_series(1, $n)");
}

# The standby's WAL sender on the primary, stopped: nothing reaches the
# standby any more, and the WAL sender still shows as streaming.
sub stop_wal_sender
{
	my ($primary, $standby) = @_;
	my $pid = $primary->safe_psql('postgres',
		"SELECT pid FROM pg_stat_replication WHERE application_name = '" . $standby->name . "'");
	die "no WAL sender for " . $standby->name unless $pid;
	kill 'STOP', $pid or die "could not stop WAL sender $pid";
	return $pid;
}

# One statement per value, stopping at the first error: every value the
# burst printed was handed out.
sub draw_burst
{
	my ($node, $seq) = @_;
	my ($out, $err) = ('', '');
	my $ret = $node->psql('postgres',
		"SELECT format('SELECT distseq_nextval(%L)', '$seq') FROM generate_series(1, $burst) \\gexec",
		stdout => \$out, stderr => \$err, on_error_stop => 1);
	return ($ret, [ split /\n/, $out ], $err);
}

# The primary dies with the standby cut off: stop the standby first, so
# that the WAL sender, let go, has no one to send the burst to.
sub fail_over
{
	my ($primary, $standby, $walsender) = @_;
	$standby->stop;
	kill 'CONT', $walsender;
	$primary->stop('immediate');
	$standby->start;
	$standby->promote;
	$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die "standby never left recovery";
}

sub repeats
{
	my ($old, $new) = @_;
	my %old = map { $_ => 1 } @$old;
	return scalar(grep { $old{$_} } @$new);
}

# ---- standby_ack = all
{
	my ($primary, $standby) = make_pair('ack', "all\nwal_level = logical");

	# c draws 'r' from the primary through distseq_peer_reserve, as a role
	# that would not see a WARNING unless c asked for them
	$primary->safe_psql('postgres', 'ALTER ROLE postgres SET client_min_messages = error');
	my $c = peer_node('ack_client');
	peer_server($c, 'p', $primary);
	$c->safe_psql('postgres',
		"SELECT distseq_create('r', block_size => 10, servers => ARRAY['node_p'])");

	my @old = draw($primary, 's', 20000);
	$primary->wait_for_catchup($standby);
	my $rows = "SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 's'";
	cmp_ok($standby->safe_psql('postgres', $rows), '<=', 1 + 2 + 16,
		'after 20 windows the standby holds the open ones, one merged row, and what pools gave back');
	my @c_old = draw($c, 'r', 20);
	is(scalar(@c_old), 20, 'a peer reservation is answered while the standby acknowledges');

	# a reservation for a peer is acknowledged when it commits, which a
	# prepared transaction does not
	my ($p_ret, $p_out, $p_err) = $primary->psql('postgres',
		"BEGIN; SELECT * FROM distseq.distseq_peer_reserve('r', 10); PREPARE TRANSACTION 'r';");
	like($p_err, qr/cannot prepare a transaction that reserved distseq values for a peer/,
		'a reservation for a peer cannot be prepared');

	# a logical subscriber is no standby: c subscribes to a table of the
	# primary, and its WAL sender, stopped, holds no refill up
	$primary->safe_psql('postgres',
		'CREATE TABLE t (id bigint PRIMARY KEY); CREATE PUBLICATION pub FOR TABLE t');
	$c->safe_psql('postgres', 'CREATE TABLE t (id bigint PRIMARY KEY)');
	$c->safe_psql('postgres',
		"CREATE SUBSCRIPTION sub CONNECTION 'host=127.0.0.1 port=" . $primary->port
		  . " dbname=postgres' PUBLICATION pub");
	$primary->safe_psql('postgres',
		"INSERT INTO t SELECT distseq_nextval('s') FROM generate_series(1, 10)");
	$primary->wait_for_catchup('sub');
	my $logical = $primary->safe_psql('postgres',
		"SELECT pid FROM pg_stat_replication WHERE application_name = 'sub' AND flush_lsn IS NOT NULL");
	die "no WAL sender for the subscription" unless $logical;
	kill 'STOP', $logical or die "could not stop WAL sender $logical";
	my ($l_ret, $l_out, $l_err) = $primary->psql('postgres',
		"SELECT distseq_nextval('s') FROM generate_series(1, 3000)");
	kill 'CONT', $logical;
	is($l_ret, 0, 'a stopped logical WAL sender is not waited for')
	  or diag($l_err);
	my @drawn = split /\n/, $l_out;
	push @old, @drawn, split /\n/, $primary->safe_psql('postgres', 'SELECT id FROM t');
	$c->safe_psql('postgres', 'ALTER SUBSCRIPTION sub DISABLE');
	$primary->wait_for_catchup($standby);

	my $walsender = stop_wal_sender($primary, $standby);
	my ($ret, $burst_values, $err) = draw_burst($primary, 's');
	isnt($ret, 0, 'the burst fails once the pool is used up');
	like($err,
		qr/could not refill distseq sequence "s".*The refill worker failed: a standby did not acknowledge the reservation within distseq\.standby_ack_timeout \(1000 ms\)/s,
		'with the bounded wait\'s error');
	ok(scalar(@$burst_values) < $burst, 'not every value of the burst was handed out');
	push @old, @$burst_values;
	ok($primary->log_contains('flushed up to'), 'the server log says where the standby was');
	cmp_ok($primary->safe_psql('postgres',
			"SELECT values_lost FROM distseq_status WHERE sequence_name = 's'"),
		'>', 0, 'the values of the unacknowledged reservation count as lost');

	# the peer's reservation is made and committed, but the standby does not
	# acknowledge it: the primary warns, and c uses none of its values
	my ($c_ret, $c_values, $c_err) = draw_burst($c, 'r');
	isnt($c_ret, 0, 'a peer draws nothing the standby did not acknowledge');
	like($c_err, qr/warned: a standby did not acknowledge the reservation/,
		'the peer is told why');
	push @c_old, @$c_values;

	# the worker's wait shows in pg_stat_activity, and a cancel ends it at
	# once: with a long timeout, a draw waits until the worker is cancelled
	$primary->append_conf('postgresql.conf', "distseq.standby_ack_timeout = '60s'");
	$primary->reload;
	my ($in, $out, $w_err) = ('', '', '');
	my $h = IPC::Run::start(
		[
			'psql', '-XAtq', '-d', $primary->connstr('postgres'), '-c',
			"SET distseq.refill_timeout = '60s'; SELECT distseq_nextval('s')"
		],
		\$in, \$out, \$w_err);
	$primary->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE backend_type = 'distseq worker' AND wait_event = 'Extension'
		   AND query = 'distseq refill: waiting for the standbys'")
	  or die "the worker never waited for the standbys";
	$primary->safe_psql('postgres',
		"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE backend_type = 'distseq worker'");
	$h->finish;
	like($w_err, qr/canceled the wait for the standbys to acknowledge the reservation/,
		'a cancelled wait fails the refill at once');
	is($out, '', 'and hands nothing out');

	fail_over($primary, $standby, $walsender);
	my @new = draw($standby, 's', 3 * $burst);
	is(scalar(@new), 3 * $burst, 'the promoted standby draws');
	cmp_ok($standby->safe_psql('postgres', $rows), '<=', 1 + 2 + 16,
		'its windows stay bounded');
	is(repeats(\@old, \@new), 0,
		'and repeats no value the old primary handed out');
	my @r_new = draw($standby, 'r', 3 * $burst);
	is(repeats(\@c_old, \@r_new), 0,
		'nor a value it handed out to a peer');

	# what a new timeline skips: the rest of the open window and one more
	my ($skipped) = slurp_file($standby->logfile) =~
	  /distseq sequence "s" was restored or moved: skipped (\d+) values/;
	ok(defined $skipped && $skipped > 1000 && $skipped <= 2000,
		'the new timeline skipped at most 2 x min_open_windows x window_size')
	  or diag('skipped: ' . ($skipped // 'nothing'));

	$standby->stop;
	$c->stop;
}

# ---- standby_ack = off: the documented repeat
{
	my ($primary, $standby) = make_pair('noack', 'off');
	my @old = draw($primary, 's', 200);
	$primary->wait_for_catchup($standby);

	my $walsender = stop_wal_sender($primary, $standby);
	my ($ret, $burst_values, $err) = draw_burst($primary, 's');
	is($ret, 0, 'without acknowledgements the burst goes through')
	  or diag($err);
	is(scalar(@$burst_values), $burst, 'every value of it');
	push @old, @$burst_values;

	fail_over($primary, $standby, $walsender);
	my @new = draw($standby, 's', 3 * $burst);
	my $repeated = repeats(\@old, \@new);
	ok($repeated > 0,
		"the promoted standby repeats values of the burst ($repeated of them)");
	$standby->stop;
}

done_testing();
