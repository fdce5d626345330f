# A clean restart skips nothing when sessions draw and disconnect: they hold
# no values of their own, and the worker writes the stream's rest and the
# pool back at shutdown.  Sessions that exit in mixed order, a worker
# terminated mid-run (it writes its pool back while sessions draw on) and a
# crash after that never repeat a value, and nothing is counted lost.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('rests');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
$node->safe_psql('postgres',
	"SELECT distseq_create('s', block_size => 10, window_size => 1000)");

# A session that stays connected until told to quit
sub session
{
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return { h => $h, in => \$in, out => \$out };
}

sub run_in
{
	my ($s, $sql) = @_;
	${ $s->{out} } = '';
	${ $s->{in} } .= "$sql;\nSELECT 'done';\n";
	$s->{h}->pump until ${ $s->{out} } =~ /^done$/m;
	return grep { /^-?\d+$/ } split /\n/, ${ $s->{out} };
}

sub quit
{
	my ($s) = @_;
	${ $s->{in} } .= "\\q\n";
	$s->{h}->finish;
}

sub draw
{
	my ($n) = @_;
	return split /\n/, $node->safe_psql('postgres',
		"SELECT distseq_nextval('s') FROM generate_series(1, $n)");
}

sub lost
{
	return $node->safe_psql('postgres',
		"SELECT values_lost FROM distseq_status WHERE sequence_name = 's'");
}

# Sessions that disconnect give nothing back: A draws 1 and 2, B 3 and 4
my $sa = session();
is_deeply([ run_in($sa, "SELECT distseq_nextval('s') FROM generate_series(1, 2)") ],
	[ 1, 2 ], 'A draws 1 and 2');
is_deeply([ draw(2) ], [ 3, 4 ], 'B draws 3 and 4 and exits');
quit($sa);
$node->restart;

my @after = draw(18);
is_deeply(\@after, [ 5 .. 22 ],
	'after a clean restart the stream goes on where it stopped')
  or diag("got @after");
is(lost(), 0, 'nothing counted lost');

# Many sessions exiting in mixed order: every value below the last one
# drawn is drawn exactly once over the restart.
my %seen = map { $_ => 1 } (1 .. 4, @after);
my @sessions = map { session() } 1 .. 6;
for my $s (@sessions)
{
	$seen{$_}++ for run_in($s, "SELECT distseq_nextval('s')");
}
quit($_) for @sessions[ 3, 0, 5, 1, 4, 2 ];
$node->restart;
my @all = draw(300);
$seen{$_}++ for @all;
my $top = (sort { $a <=> $b } keys %seen)[-1];
my @missing = grep { !$seen{$_} } 1 .. $top;
my @twice = grep { $seen{$_} > 1 } keys %seen;
is(scalar(@twice), 0, 'no value drawn twice over the restart') or diag("twice: @twice");
is(scalar(@missing), 0, 'no value skipped below the last one drawn')
  or diag("skipped: @missing");
is(lost(), 0, 'still nothing counted lost');

# A terminated worker writes its pool back while the server runs; sessions
# draw on; then a crash.  Nothing is handed out twice, before or after it.
my $sb = session();
$seen{$_}++ for run_in($sb, "SELECT distseq_nextval('s')");
my $sc = session();
$seen{$_}++ for run_in($sc, "SELECT distseq_nextval('s') FROM generate_series(1, 15)");
quit($sb);
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'distseq worker'");
$seen{$_}++ for run_in($sc, "SELECT distseq_nextval('s') FROM generate_series(1, 30)");
$seen{$_}++ for draw(40);
$node->stop('immediate');
eval { $sc->{h}->kill_kill; };
$node->start;
$seen{$_}++ for draw(300);
@twice = grep { $seen{$_} > 1 } keys %seen;
is(scalar(@twice), 0, 'no value drawn twice across a terminated worker and a crash')
  or diag("twice: @twice");

$node->stop;
done_testing();
