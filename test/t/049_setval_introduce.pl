# distseq_setval() while the members other than the caller do not have the
# sequence yet: the agent of the caller, which read the marks before the
# call, introduces the sequence to them after it with the mark it read.
# Those members then make a majority without the caller (down) and must
# not open a window at or below the floor.
#
# The introduction is held back by an EXCLUSIVE lock on the members'
# catalog table (it inserts; distseq_peer_setval only reads there), taken
# before the sequence exists anywhere.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;
use IPC::Run;

my @names = qw(a b c);
my %node;
for my $n (@names)
{
	$node{$n} = peer_node("node_$n", conf => "distseq.remote_timeout = '60s'\n");
}
for my $n (@names)
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } @names;
}
for my $n (@names)
{
	$node{$n}->safe_psql('postgres', "SELECT distseq_add_peer('node_$_')")
	  for grep { $_ ne $n } @names;
}

sub bg
{
	my ($n, $sql) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node{$n}->connstr('postgres'), '-c', $sql ],
		'<', '/dev/null', '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return { h => $h, out => \$out, err => \$err };
}

# b and c hold their catalog table: no sequence can be introduced there
my @locks = map {
	bg($_, "BEGIN; LOCK distseq.distseq_sequences IN EXCLUSIVE MODE; SELECT pg_sleep(6); COMMIT;")
} qw(b c);
$node{$_}->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
	  . " WHERE c.relname = 'distseq_sequences' AND l.mode = 'ExclusiveLock' AND l.granted")
  or die "no lock on $_"
  for qw(b c);

$node{a}->safe_psql('postgres',
	"SELECT distseq_create('ids', block_size => 10, window_size => 100, min_open_windows => 1)");
# a's agent reads the marks, then waits to introduce the sequence
my $maint = bg('a', 'SELECT count(*) FROM distseq_maintain()');
$node{b}->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
	  . " AND query LIKE '%distseq_peer_create%'")
  or die 'the agent does not introduce the sequence';

my $floor = 1000000;
is($node{a}->safe_psql('postgres', "SELECT distseq_setval('ids', $floor)"),
	$floor, 'distseq_setval returns while the introduction waits');

# a goes down while its introduction waits on b: b takes it once the lock
# goes, with the mark a read before the call; c still lacks the sequence
$node{a}->stop('immediate');
$_->{h}->finish for @locks;
eval { $maint->{h}->finish; };

# b and c are a majority of their own
$node{b}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
my ($rc, $v, $err) = $node{b}->psql('postgres', "SELECT distseq_nextval('ids')");
if ($rc == 0)
{
	cmp_ok($v, '>', $floor, 'b, with a down, hands out nothing at or below the floor');
}
else
{
	pass("b, with a down, hands out nothing: $err");
}
is($node{b}->safe_psql('postgres',
		"SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'ids'"
		  . " AND window_start < $floor AND next_hi < window_end"),
	'0', 'no window below the floor is open on b');

$node{$_}->stop for qw(b c);
done_testing();
