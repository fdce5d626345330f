# Eight sessions draw from a sequence's stream until its max_value, with
# block sizes of 1 and 3 and small windows, so that chunks, refills and
# window changes interleave with the end: every value from 1 to max_value
# comes out exactly once, each session's values grow, every draw past the
# end fails with the limit error, and no value is lost.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $nclients = 8;
my $max = 1500;
my $per_client = 250;

my $node = PostgreSQL::Test::Cluster->new('stream_exhaustion');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION distseq');

my $tmp = PostgreSQL::Test::Utils::tempdir;
for my $bs (1, 3)
{
	my $s = "m$bs";
	$node->safe_psql('postgres',
		"SELECT distseq_create('$s', block_size => $bs, window_size => 50,
			max_value => $max)");
	my $script = "$tmp/$s.sql";
	PostgreSQL::Test::Utils::append_to_file($script,
		"SELECT distseq_nextval('$s');\n" x $per_client);

	my @clients;
	for my $i (1 .. $nclients)
	{
		my ($out, $err) = ('', '');
		my $h = IPC::Run::start(
			[
				'psql', '-XAtq', '-v', 'ON_ERROR_STOP=0', '-d',
				$node->connstr('postgres'), '-f', $script
			],
			'<', '/dev/null', '>', \$out, '2>', \$err,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
		push @clients, { h => $h, out => \$out, err => \$err };
	}

	my %seen;
	my ($dups, $bad_order, $other_errors, $limit_errors) = (0, 0, 0, 0);
	for my $c (@clients)
	{
		$c->{h}->finish;
		my @vals = split /\n/, ${ $c->{out} };
		for my $k (0 .. $#vals)
		{
			$dups++ if $seen{ $vals[$k] }++;
			$bad_order++ if $k > 0 && $vals[$k] <= $vals[ $k - 1 ];
		}
		for my $line (split /\n/, ${ $c->{err} })
		{
			next unless $line =~ /ERROR/;
			if ($line =~ /reached maximum value of sequence "$s" \($max\)/)
			{
				$limit_errors++;
			}
			else
			{
				$other_errors++;
				diag($line);
			}
		}
	}
	is($dups, 0, "block size $bs: no value came twice");
	is($bad_order, 0, "block size $bs: each session's values grow");
	is(scalar(keys %seen), $max,
		"block size $bs: every value up to max_value came out");
	is((grep { $_ < 1 || $_ > $max } keys %seen), 0,
		"block size $bs: and no other");
	is($limit_errors, $nclients * $per_client - $max,
		"block size $bs: every other draw reached the limit");
	is($other_errors, 0, "block size $bs: no other error");
	is( $node->safe_psql(
			'postgres',
			"SELECT values_lost FROM distseq_status WHERE sequence_name = '$s'"),
		'0',
		"block size $bs: no value lost");
}

done_testing();
