# A session's values grow, and none is lost, when a terminated worker writes
# the stream's rest and its pool back while sessions stay connected: the
# rest goes back above every value handed out, and is handed out next.
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

# Window 1 is [1, 102), chunks are 7 values.  S1 draws 98 values, X the
# 99th: every session draws from the one stream, in order.
my $s1 = session();
my $x = session();
run_sql($s1, "SELECT distseq_nextval('m') FROM generate_series(1, 98);");
is(run_sql($x, "SELECT distseq_nextval('m');"), '99', 'X draws the next value of the stream');

# The terminated worker closes the stream and writes it back with the pool:
# window 1 reopens at 100 -- or, when later windows closed and merged it
# into one row meanwhile, that row is split there.
my $old = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'distseq worker'");
$node->safe_psql('postgres', "SELECT pg_terminate_backend($old)");
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM distseq.distseq_windows WHERE sequence_name = 'm'"
	  . " AND window_start <= 100 AND window_end > 100 AND next_hi = 100")
  or die "window 1 did not reopen";

my @xv = split /\n/, run_sql($x, "SELECT distseq_nextval('m') FROM generate_series(1, 30);");
is($xv[0], '100', 'the rest written back comes first');
my $grows = 1;
my $prev = 99;
for my $v (@xv)
{
	$grows = 0 if $v <= $prev;
	$prev = $v;
}
ok($grows, 'X keeps growing') or diag("X got @xv");

my $n = session();
ok(run_sql($n, "SELECT distseq_nextval('m');") > $prev, 'a new session draws above X');

my @s1v = split /\n/, run_sql($s1, "SELECT distseq_nextval('m') FROM generate_series(1, 30);");
ok($s1v[0] > $prev, 'S1 keeps growing too');

is($node->safe_psql('postgres',
		"SELECT values_lost FROM distseq_status WHERE sequence_name = 'm'"),
	'0', 'nothing was lost');

finish($_) for ($s1, $x, $n);
$node->stop;
done_testing();
