# Concurrent draws: 8 sessions, each drawing 20,000 values of one sequence
# with tiny blocks and windows, so that refills, prefetches and window
# changes interleave between the sessions.  Every value must be unique and
# every session must see its values strictly increasing.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $nclients = 8;
my $per_client = 20000;

my $node = PostgreSQL::Test::Cluster->new('concurrent');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
$node->safe_psql('postgres',
	"SELECT distseq_create('s', block_size => 7, window_size => 101)");

# A script of single-row statements: one round trip per value.
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $script = "$tmp/single.sql";
PostgreSQL::Test::Utils::append_to_file($script,
	"SELECT distseq_nextval('s');\n" x $per_client);

my $connstr = $node->connstr('postgres');
my @clients;
for my $i (0 .. $nclients - 1)
{
	my @cmd = ('psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $connstr);
	if ($i % 2 == 0)
	{
		push @cmd, '-c',
		  "COPY (SELECT distseq_nextval('s') FROM generate_series(1, $per_client)) TO STDOUT";
	}
	else
	{
		push @cmd, '-f', $script;
	}
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(\@cmd, '<', '/dev/null', '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	push @clients, { h => $h, out => \$out, err => \$err, i => $i };
}

my %seen;
my $total = 0;
my $dups = 0;
for my $c (@clients)
{
	my $ok = eval { $c->{h}->finish; };
	my $i = $c->{i};
	my $kind = $i % 2 == 0 ? 'COPY' : 'single-row';
	ok($ok && $c->{h}->result == 0, "client $i ($kind) exited cleanly")
	  or diag("stderr of client $i: ${$c->{err}}");

	my @vals = split /\n/, ${ $c->{out} };
	is(scalar(@vals), $per_client, "client $i received $per_client values");
	is(scalar(grep { !/^-?\d+$/ } @vals), 0, "client $i received only integers");

	my $bad_order = 0;
	for my $k (1 .. $#vals)
	{
		if ($vals[$k] <= $vals[ $k - 1 ])
		{
			diag("client $i: value $vals[$k] at position $k follows $vals[$k-1]")
			  if $bad_order++ < 5;
		}
	}
	is($bad_order, 0, "client $i received strictly increasing values");

	for my $v (@vals)
	{
		if ($seen{$v}++)
		{
			diag("value $v handed out twice") if $dups++ < 10;
		}
	}
	$total += @vals;
}

is($total, $nclients * $per_client, 'all values received');
is(scalar(keys %seen), $total, 'all values distinct');
is($dups, 0, 'no value handed out twice');

my ($refills, $issued) = split /\|/, $node->safe_psql('postgres',
	"SELECT refills, values_issued FROM distseq_status WHERE sequence_name = 's'");
cmp_ok($refills, '>', 0, "distseq_status shows refills ($refills)");
cmp_ok($issued, '>=', $total, "distseq_status counts issued values ($issued)");

# The values come from the windows: none above what the catalog reserved.
my $reserved_top = $node->safe_psql('postgres',
	"SELECT max(next_hi) FROM distseq.distseq_windows WHERE sequence_name = 's'");
my $max = (sort { $b <=> $a } keys %seen)[0];
cmp_ok($max, '<', $reserved_top, "highest value $max lies below the reserved top");

$node->stop;
done_testing();
