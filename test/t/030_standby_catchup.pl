# A standby that is connected but still catching up is a standby too: with
# distseq.standby_ack = all, a reservation is not used before it has it.
#
# The standby streams from its primary through a TCP proxy that passes only
# its first megabyte of WAL, with tens of megabytes waiting (WAL switches
# made while the standby was not there): its WAL sender stays in state
# "catchup" for good, the standby having reported a flush position.  A
# burst on the primary must then end in the bounded wait's error, and once
# the primary dies and the standby is promoted, the standby must repeat no
# value the primary handed out.  (Synchronous replication does not count a
# standby in catchup as synchronous, but then makes commits wait for one
# that is; a reservation must wait for it as well, or a standby that
# Patroni may promote lacks it.)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;
use Time::HiRes qw(time);

my $burst = 5000;

sub draw
{
	my ($node, $seq, $n) = @_;
	return split /\n/, $node->safe_psql('postgres',
		"SELECT distseq_nextval('$seq') FROM generate_series(1, $n)");
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

# Small windows: the rejoin skip is at most 2 x 1,000 values.
my $primary = peer_node('catchup_primary',
	hba => "host replication all 127.0.0.1/32 trust\n",
	conf => "distseq.standby_ack = all\ndistseq.standby_ack_timeout = '1s'\n"
	  . "wal_keep_size = '256MB'\n");
$primary->safe_psql('postgres',
	"SELECT distseq_create('s', block_size => 10, window_size => 1000, min_open_windows => 1)");
my @old = draw($primary, 's', 200);
$primary->backup('bkp');

# WAL the standby has yet to receive: two switches, 32 MB to send
for my $i (1 .. 2)
{
	$primary->safe_psql('postgres', "CREATE TABLE pad_$i (); SELECT pg_switch_wal()");
}

my $limit = $primary->basedir . '/limit';
open my $fh, '>', $limit or die;
print $fh 1024 * 1024;
close $fh;
my ($proxy, $proxy_port) = tcp_proxy($primary->port, limit => $limit);

my $standby = PostgreSQL::Test::Cluster->new('catchup_standby');
$standby->init_from_backup($primary, 'bkp', has_streaming => 1);
$standby->append_conf('postgresql.conf',
	"primary_conninfo = 'host=127.0.0.1 port=$proxy_port application_name=catchup_standby'\n");
$standby->start;

ok($primary->poll_query_until('postgres', q(
	SELECT state = 'catchup' AND flush_lsn IS NOT NULL FROM pg_stat_replication
	WHERE application_name = 'catchup_standby')),
	'the standby is connected, reported where it is, and is catching up');

my ($ret, $burst_values, $err) = draw_burst($primary, 's');
isnt($ret, 0, 'a burst fails once the pool is used up');
like($err,
	qr/a standby did not acknowledge the reservation within distseq\.standby_ack_timeout/,
	'with the bounded wait\'s error: the standby in catchup is waited for');
push @old, @$burst_values;
is($primary->safe_psql('postgres',
		"SELECT state FROM pg_stat_replication WHERE application_name = 'catchup_standby'"),
	'catchup', 'the standby was in catchup all along');

# a standby that disconnects while the worker waits for it fails the wait
# at once, whatever the timeout
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
	 WHERE backend_type = 'distseq worker'
	   AND query = 'distseq refill: waiting for the standbys'")
  or die "the worker never waited for the standbys";
# the standby's WAL receiver leaves (terminating the WAL sender would not
# do: blocked on its full socket, it cannot send its FATAL message)
my $receiver = $standby->safe_psql('postgres', 'SELECT pid FROM pg_stat_wal_receiver');
die 'no WAL receiver' unless $receiver;
my $start = time;
kill 'TERM', $receiver or die "could not terminate WAL receiver $receiver";
$h->finish;
like($w_err, qr/a standby disconnected before it acknowledged the reservation/,
	'a standby that disconnects mid-wait fails the refill');
cmp_ok(time - $start, '<', 30, 'at once, not at the timeout');
is($out, '', 'and hands nothing out');

# the primary dies; the standby, promoted, lacks the burst's reservations
$primary->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die "standby never left recovery";
my @new = draw($standby, 's', 3 * $burst);
is(scalar(@new), 3 * $burst, 'the promoted standby draws');
my %old = map { $_ => 1 } @old;
is(scalar(grep { $old{$_} } @new), 0,
	'and repeats no value the old primary handed out');

kill 'TERM', $proxy;
waitpid($proxy, 0);
$standby->stop;
done_testing();
