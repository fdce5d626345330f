# Ordinary operation loses no value: only a crash (or setval, which skips
# values on purpose) may count values lost.  Many short sessions drawing a
# few values each and disconnecting, more of them at once than a pool kept
# rests when backends had blocks of their own; the refill worker exiting when idle, also while a session still
# uses the sequence; entries written back and taken over by other sequences
# (distseq.max_sequences small); a clean restart.  After all that, with no
# session left and the server restarted cleanly, for every sequence:
#
#   values_lost = 0
#   values_issued = the values drawn (each one recorded in a table whose
#                   primary key also proves none was drawn twice)
#   values_reserved - values_released = values_issued + values_lost
#   the reserved part of its windows, sum(next_hi - window_start), is the
#   values drawn, and every value drawn lies in it: nothing is reserved
#   that was not handed out, so no value is skipped.
#
# Nothing here depends on how a server hands values to its backends.
# One known loss is marked TODO: the pool of a server that draws from
# another one, given up on every write-back.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use File::Temp qw(tempfile);
use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $node = PostgreSQL::Test::Cluster->new('no_loss');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'\n"
	  . "distseq.max_sequences = 3\n"
	  . "distseq.worker_idle_timeout = '1s'\n"
	  . "max_connections = 40\n");
$node->start;
$node->safe_psql('postgres',
	"CREATE EXTENSION distseq;
	 CREATE TABLE drawn (seq text, v bigint, PRIMARY KEY (seq, v));
	 SELECT distseq_create('storm', block_size => 100, window_size => 100000);
	 SELECT distseq_create('idle', block_size => 100, window_size => 10000);
	 SELECT distseq_create('p1', block_size => 10, window_size => 1000);
	 SELECT distseq_create('p2', block_size => 10, window_size => 40);");
my @seqs = qw(storm idle p1 p2);

my $draw_sql = sub {
	my ($seq, $n) = @_;
	return "INSERT INTO drawn SELECT '$seq', distseq_nextval('$seq')"
	  . " FROM generate_series(1, $n)";
};

sub worker_gone
{
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity"
		  . " WHERE backend_type = 'distseq worker'")
	  or die 'the worker did not exit when idle';
}

# A connect/disconnect storm: 16 clients at once, a new connection for
# every transaction, each drawing 3 values and leaving.
sub storm
{
	my ($seq, $clients, $xacts) = @_;
	my ($fh, $script) = tempfile(UNLINK => 1);
	print $fh $draw_sql->($seq, 3) . ";\n";
	close $fh;
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run(
		[
			'pgbench', '-n', '-C', '-c', $clients, '-j', '2',
			'-t', $xacts, '-f', $script, $node->connstr('postgres')
		],
		'<', '/dev/null', '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	ok($ok && $out !~ /aborted/, "storm on $seq: no client failed")
	  or diag("pgbench: $out $err");
}

storm('storm', 16, 40);

# The worker exits when idle, then comes back for the next storm.
worker_gone();
storm('storm', 16, 40);

# The worker goes idle while a session still draws from the sequence (it
# may exit, or stay while the session may hand values back); the session
# goes on drawing, then leaves, and the server restarts cleanly.
my $sa = $node->background_psql('postgres');
my $apid = $sa->query_safe('SELECT pg_backend_pid()');
$sa->query_safe($draw_sql->('idle', 5));
for (1 .. 100)
{
	last
	  if $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'distseq worker'"
	  ) == 0;
	usleep(100_000);
}
$sa->query_safe($draw_sql->('idle', 5));
$sa->quit;
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $apid")
  or die 'the session did not leave';
$node->restart;

# Four sequences through three entries: each short session's sequence
# takes over the entry of another one, which is written back first.
for my $round (1 .. 15)
{
	$node->safe_psql('postgres', $draw_sql->($_, 3)) for @seqs;
}

# A storm again, on one sequence, while the three others take turns in the
# two entries left.
my ($fh, $script) = tempfile(UNLINK => 1);
print $fh $draw_sql->('p1', 3) . ";\n";
close $fh;
my ($out, $err) = ('', '');
my $bg = IPC::Run::start(
	[
		'pgbench', '-n', '-C', '-c', '12', '-j', '2',
		'-t', '30', '-f', $script, $node->connstr('postgres')
	],
	'<', '/dev/null', '>', \$out, '2>', \$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
for my $round (1 .. 10)
{
	$node->safe_psql('postgres', $draw_sql->($_, 3)) for qw(storm idle p2);
}
ok(eval { $bg->finish } && $out !~ /aborted/,
	'storm on p1 beside the others: no client failed')
  or diag("pgbench: $out $err");

# A clean restart while a session holds values of two sequences.
my $sb = $node->background_psql('postgres', on_error_stop => 0);
$sb->query_safe($draw_sql->('p2', 3));
$sb->query_safe($draw_sql->('idle', 3));
$node->restart;
eval { $sb->quit; };

for my $seq (@seqs)
{
	my ($lost, $issued, $drawn, $booked, $reserved, $outside) = split /\|/,
	  $node->safe_psql('postgres',
		"SELECT st.values_lost, st.values_issued,
				(SELECT count(*) FROM drawn d WHERE d.seq = '$seq'),
				s.values_reserved - s.values_released - s.values_issued - s.values_lost,
				(SELECT sum(w.next_hi - w.window_start) FROM distseq.distseq_windows w
				 WHERE w.sequence_name = '$seq'),
				(SELECT count(*) FROM drawn d WHERE d.seq = '$seq'
				 AND NOT EXISTS (SELECT FROM distseq.distseq_windows w
								 WHERE w.sequence_name = '$seq'
								 AND d.v >= w.window_start AND d.v < w.next_hi))
		 FROM distseq_status st
		 JOIN distseq.distseq_sequences s USING (sequence_name)
		 WHERE st.sequence_name = '$seq'");
	is($issued, $drawn, "$seq: values_issued is the $drawn values drawn");
	is($booked, 0,
		"$seq: reserved - released = issued + lost in the catalog");
	is($outside, 0, "$seq: every value drawn lies in a reserved window part");
	# with blocks of their own, backends handed rests back on exit, and a
	# pool kept at most 8: the storms lost thousands (issue 21)
	is($lost, 0, "$seq: no value counted lost");
	is($reserved, $drawn,
		"$seq: the windows hold reserved exactly the values drawn");
}

$node->stop;

# A server that draws from another one: values it reserved there and did
# not hand out cannot go back, so every write-back (the worker's idle exit,
# a clean restart, an entry taken over) gives its pool up.
my $src = peer_node('no_loss_src');
my $dst = peer_node('no_loss_dst', conf => "distseq.worker_idle_timeout = '1s'\n");
peer_server($dst, 'src', $src);
$src->safe_psql('postgres',
	"SELECT distseq_create('audit', block_size => 10, window_size => 1000)");
$dst->safe_psql('postgres',
	"SELECT distseq_create('audit', block_size => 10, servers => ARRAY['node_src'])");
$dst->safe_psql('postgres',
	"SELECT distseq_nextval('audit') FROM generate_series(1, 5)");
$dst->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'distseq worker'")
  or die 'the worker did not exit when idle';
$dst->safe_psql('postgres',
	"SELECT distseq_nextval('audit') FROM generate_series(1, 5)");
$dst->restart;
{
	local $TODO = 'no way to hand values back to the server they came from';
	is($dst->safe_psql('postgres',
			"SELECT values_lost FROM distseq_status WHERE sequence_name = 'audit'"),
		0, 'drawing from another server: no value counted lost');
	is($src->safe_psql('postgres',
			"SELECT s.values_reserved - s.values_released
			 FROM distseq.distseq_sequences s WHERE sequence_name = 'audit'"),
		10, 'the server drawn from holds reserved only the 10 values drawn');
}
$_->stop for $src, $dst;
done_testing();
