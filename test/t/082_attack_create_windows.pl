# distseq_create() inserts the catalog row with every column in one
# statement and its first windows in one INSERT from two arrays.  What that
# must keep from the loop of one INSERT per window:
#
# - windows stop at max_value exactly, the last one cut short, also for
#   windows of size 1 at the top of bigint and for a striped sequence, and
#   no more than min_open_windows of them (up to 1,000);
# - every value from start_value to max_value is drawn once, then the
#   sequence reports its maximum;
# - the row carries stripes, stripe and the origin columns, and its
#   high-water mark is the top of its first windows from the start (in
#   slots), before any refill.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('create_windows');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION distseq');

my $top = '9223372036854775806';

# the windows of a sequence, as start:end, in order
sub windows
{
	my ($name) = @_;
	return "SELECT string_agg(window_start || ':' || window_end, ','
			ORDER BY window_start)
		 FROM distseq.distseq_windows WHERE sequence_name = '$name';";
}

# read in the creating transaction: the worker's first reservations would
# close and merge windows
my @out = grep { $_ ne '' } split(
	/\n/,
	$node->safe_psql(
		'postgres',
		"BEGIN;
		 SELECT distseq_create('edge', block_size => 1, window_size => 1,
			start_value => $top - 6, min_open_windows => 50);
		 SELECT distseq_create('few', window_size => 3, max_value => 10,
			min_open_windows => 50);
		 SELECT distseq_create('striped', block_size => 1, window_size => 2,
			max_value => 20, min_open_windows => 50, stripes => 3, stripe => 2);
		 SELECT distseq_create('many', window_size => 10,
			min_open_windows => 1000);"
		  . windows('edge')
		  . windows('few')
		  . windows('striped')
		  . "SELECT count(*), min(window_start), max(window_end),
			bool_and(next_hi = window_start),
			count(*) FILTER (WHERE window_end - window_start <> 10)
		 FROM distseq.distseq_windows WHERE sequence_name = 'many';
		 SELECT stripes, stripe, origin_system = (SELECT system_identifier
			FROM pg_control_system()),
			origin_database = (SELECT oid FROM pg_database
				WHERE datname = current_database()),
			origin_relation = seqrel::oid, origin_timeline
		 FROM distseq.distseq_sequences WHERE sequence_name = 'striped';
		 SELECT string_agg(sequence_name || ':' || hwm, ',' ORDER BY sequence_name)
		 FROM distseq.distseq_sequences;
		 COMMIT;"));

is( $out[0],
	join(',', map { ($top - $_) . ':' . ($top - $_ + 1) } reverse(0 .. 6)),
	'windows of size 1 stop at the top of bigint');
is($out[1], '1:4,4:7,7:10,10:11', 'the last window is cut at max_value');
is($out[2], '0:2,2:4,4:6,6:7',
	'a striped sequence has windows of slots up to max_value');
is($out[3], '1000|1|10001|t|0',
	'min_open_windows 1000 makes 1,000 contiguous windows');
is($out[4], '3|2|t|t|t|1',
	'the catalog row has the stripes and the origin columns');
is($out[5], 'edge:9223372036854775807,few:11,many:10001,striped:7',
	'the catalog row carries the top of the first windows as its mark');

# every value once, then the maximum
foreach my $case (['edge', 7, ($top - 6) . "|$top|7"], ['striped', 7, '2|20|7'])
{
	my ($name, $n, $expect) = @$case;
	is( $node->safe_psql(
			'postgres',
			"SELECT min(v), max(v), count(DISTINCT v)
			 FROM (SELECT distseq_nextval('$name') AS v
				   FROM generate_series(1, $n)) s"),
		$expect,
		"$name: every value from start_value to max_value, once");
	my ($ret, $out, $err) =
	  $node->psql('postgres', "SELECT distseq_nextval('$name')");
	like($err, qr/reached maximum value/,
		"$name: then the sequence reports its maximum");
}

done_testing();
