# Clean restarts: the pools are written back at shutdown, so a clean restart
# skips nothing (a session's next value after a restart is the last value
# before it plus one), for one sequence and for several at once.  With a
# session still connected at shutdown values may be skipped, but none is
# handed out twice.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('restart');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
$node->safe_psql('postgres', "SELECT distseq_create('a')");
$node->safe_psql('postgres', "SELECT distseq_create('b')");

sub draw
{
	my ($seq, $n) = @_;
	return split /\n/, $node->safe_psql('postgres',
		"SELECT distseq_nextval('$seq') FROM generate_series(1, $n)");
}

# One sequence: 5 values, disconnect, restart, next is last + 1.
my @before = draw('a', 5);
is_deeply(\@before, [ 1 .. 5 ], 'first session draws 1..5');
$node->restart;
my @after = draw('a', 1);
is($after[0], $before[-1] + 1, 'after a clean restart the next value is last + 1');

# Again, so that a restart after a restart writes back as well.
@before = draw('a', 3);
is_deeply(\@before, [ 7 .. 9 ], 'values continue after the restart');
$node->restart;
@after = draw('a', 1);
is($after[0], 10, 'second clean restart skips nothing');

# Two sequences in one session, one restart.
my ($a_last, $b_last) = split /\|/, (split /\n/, $node->safe_psql('postgres', q{
	SELECT max(distseq_nextval('a')) FROM generate_series(1, 5);
	SELECT max(distseq_nextval('b')) FROM generate_series(1, 7);
	SELECT distseq_currval('a'), distseq_currval('b');
}))[-1];
is($a_last, 15, "sequence a reached 15");
is($b_last, 7,  "sequence b reached 7");
$node->restart;
my ($a_next, $b_next) = split /\|/, $node->safe_psql('postgres',
	"SELECT distseq_nextval('a'), distseq_nextval('b')");
is($a_next, $a_last + 1, 'two sequences: a continues at last + 1');
is($b_next, $b_last + 1, 'two sequences: b continues at last + 1');

# The next refill after the restart must not hand out anything the write-back
# gave back twice: draw past the first segment and check uniqueness.
my %seen = map { $_ => 1 } (1 .. $a_next);
my @more = draw('a', 2500);
is(scalar(grep { $seen{$_}++ } @more), 0, 'no repeat across segments after restart');

# Sessions still connected at a fast shutdown: values may be skipped, never
# repeated.
my %prior;
$prior{$_} = 1 for (1 .. $a_next, @more);
my @sessions;
for my $i (0 .. 1)
{
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	$in .= "SELECT distseq_nextval('a') FROM generate_series(1, 3);\n"
	  . "SELECT distseq_nextval('b') FROM generate_series(1, 3);\n"
	  . "SELECT 'done';\n";
	$h->pump until $out =~ /^done$/m;
	push @sessions, { h => $h, out => \$out, in => \$in };
}
my (%held_a, %held_b);
for my $s (@sessions)
{
	my @v = grep { /^\d+$/ } split /\n/, ${ $s->{out} };
	is(scalar(@v), 6, 'connected session drew 6 values');
	$held_a{$_}++ for @v[0 .. 2];
	$held_b{$_}++ for @v[3 .. 5];
}
is(scalar(keys %held_a) + scalar(keys %held_b), 12,
	'connected sessions hold distinct values');
$node->stop('fast');
for my $s (@sessions)
{
	eval { $s->{h}->finish; };
}
$node->start;

my @a_new = draw('a', 300);
my @b_new = draw('b', 300);
my @a_rep = grep { $prior{$_} || $held_a{$_} } @a_new;
is(scalar(@a_rep), 0, 'a: no value repeated after a fast stop with sessions connected')
  or diag("repeated: @a_rep");
my %b_prior = map { $_ => 1 } (1 .. $b_next);
my @b_rep = grep { $b_prior{$_} || $held_b{$_} } @b_new;
is(scalar(@b_rep), 0, 'b: no value repeated after a fast stop with sessions connected')
  or diag("repeated: @b_rep");
my (%ua, %ub);
is(scalar(grep { $ua{$_}++ } @a_new), 0, 'a: values after the stop are distinct');
is(scalar(grep { $ub{$_}++ } @b_new), 0, 'b: values after the stop are distinct');

$node->stop;
done_testing();
