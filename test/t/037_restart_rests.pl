# A clean restart skips nothing, also when the rests sessions handed back do
# not lie at the top of what the pool reserved: session A holds 1..10, B
# takes 11..20 and exits, A exits; after a clean restart 3..10 come back
# first, then 13..20, and nothing is counted lost.  The write-back splits a
# window at such a rest; a worker terminated mid-run writes its pool back the
# same way, and a crash after that still repeats no value.
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

# no backend holds a block any more: every rest is back in the pool
sub blocks_returned
{
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM distseq_blocks WHERE sequence_name = 's'")
	  or die 'blocks not handed back';
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

# The case of issue 12: a rest below another session's block
my $sa = session();
is_deeply([ run_in($sa, "SELECT distseq_nextval('s') FROM generate_series(1, 2)") ],
	[ 1, 2 ], 'A draws 1 and 2, holding 1..10');
is_deeply([ draw(2) ], [ 11, 12 ], 'B draws 11 and 12 and exits');
quit($sa);
blocks_returned();
$node->restart;

my @after = draw(18);
is_deeply(\@after, [ 3 .. 10, 13 .. 22 ],
	'after a clean restart A\'s rest 3..10 comes first, then B\'s 13..20, then the pool')
  or diag("got @after");
is(lost(), 0, 'nothing counted lost');

# Many rests at once, in one window, given back in mixed order: every value
# below the last one drawn is drawn exactly once over the restart.
my %seen = map { $_ => 1 } (1 .. 2, 11 .. 12, @after);
my @sessions = map { session() } 1 .. 6;
for my $s (@sessions)
{
	$seen{$_}++ for run_in($s, "SELECT distseq_nextval('s')");
}
quit($_) for @sessions[ 3, 0, 5, 1, 4, 2 ];
blocks_returned();
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

# A terminated worker writes its pool back while the server runs, splitting
# the window; sessions draw from the pieces; then a crash.  The pieces are
# never handed out twice, before or after the crash.
my $sb = session();
$seen{$_}++ for run_in($sb, "SELECT distseq_nextval('s')");
my $sc = session();
$seen{$_}++ for run_in($sc, "SELECT distseq_nextval('s') FROM generate_series(1, 15)");
quit($sb);
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM distseq_blocks WHERE sequence_name = 's'")
  or die 'B\'s block not handed back';
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
