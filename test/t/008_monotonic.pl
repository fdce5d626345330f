# A session's values grow even when a terminated worker wrote its pool back
# and so reopened a lower window while sessions stayed connected.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('mono');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;
$node->safe_psql('postgres',
	"CREATE EXTENSION distseq;
	 SELECT distseq_create('m', block_size => 7, window_size => 101);");

# An interactive psql session: run SQL, wait for its output.
sub session
{
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err});
	return \%s;
}

sub run_sql
{
	my ($s, $sql) = @_;
	$s->{out} = '';
	$s->{in} .= "$sql\n\\echo __done__\n";
	$s->{h}->pump until $s->{out} =~ /^__done__$/m;
	(my $out = $s->{out}) =~ s/^__done__\n//m;
	chomp $out;
	return $out;
}

sub finish
{
	my $s = shift;
	$s->{in} .= "\\q\n";
	$s->{h}->finish;
}

# Window 1 is [1, 102).  S1 uses most of it, Q takes its last block, X the
# first value of window 2; then Q leaves, and its rest [100, 102) becomes
# the top of window 1.
my $s1 = session();
my $q = session();
my $x = session();
run_sql($s1, "SELECT distseq_nextval('m') FROM generate_series(1, 98);");
is(run_sql($q, "SELECT distseq_nextval('m');"), '99', 'Q starts the last block of window 1');
is(run_sql($x, "SELECT distseq_nextval('m');"), '102', 'X starts in window 2');
finish($q);
$node->poll_query_until('postgres',
	"SELECT returned_values = 2 FROM distseq_pool_status()")
  or die "Q's block never came back";

# The terminated worker writes the pool back: window 1 reopens at 100.
my $old = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'distseq worker'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($old)");
$node->poll_query_until('postgres',
	"SELECT next_hi = 100 FROM distseq.distseq_windows WHERE sequence_name = 'm' AND window_start = 1")
  or die "window 1 did not reopen";

my @xv = split /\n/, run_sql($x, "SELECT distseq_nextval('m') FROM generate_series(1, 30);");
my $grows = 1;
my $prev = 102;
for my $v (@xv)
{
	$grows = 0 if $v <= $prev;
	$prev = $v;
}
ok($grows, 'X keeps growing') or diag("X got @xv");

# The reopened values are not lost: a new session gets them.
my $n = session();
is(run_sql($n, "SELECT distseq_nextval('m');"), '100', 'a new session takes the reopened rest');

my @s1v = split /\n/, run_sql($s1, "SELECT distseq_nextval('m') FROM generate_series(1, 30);");
ok($s1v[0] > 98, 'S1 keeps growing too');

finish($_) for ($s1, $x, $n);
$node->stop;
done_testing();
