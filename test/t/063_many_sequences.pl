# Many sequences, few entries: a server uses more sequences over time than
# distseq.max_sequences holds, in one backend and across backends, and
# entries are taken over all the time.  While fewer sequences than
# max_sequences are in use at once, no draw may fail ("too many distseq
# sequences in use") and no value may come twice (a UNIQUE column).
#
# Worker slots are one per database whose worker runs, as many as
# max_worker_processes, whatever max_sequences is: three databases draw in
# turn with two entries, their three workers running at once.
#
# Last, shared memory follows README's formula: each term is measured on its
# own by restarting with more entries, then more worker processes, then more
# slots of marks per backend.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $nseq = 12;
my $node = PostgreSQL::Test::Cluster->new('many');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.max_sequences = 4
");
$node->start;

$node->safe_psql('postgres',
	"CREATE EXTENSION distseq;
	 CREATE TABLE t (s int, v bigint, UNIQUE (s, v));
	 SELECT distseq_create('s' || g, block_size => 5, window_size => 1000)
	 FROM generate_series(1, $nseq) g;");

# One backend: each statement draws 7 values of one sequence (more than a
# block), one sequence after the other, three times over: every entry is
# taken over again and again.
my $sql = join(";\n",
	map {
		my $i = $_ % $nseq + 1;
		"INSERT INTO t SELECT $i, distseq_nextval('s$i') FROM generate_series(1, 7)"
	} (0 .. 3 * $nseq - 1));
my ($ret, $out, $err) = $node->psql('postgres', $sql);
is($ret, 0, "one backend used $nseq sequences in turn with 4 entries")
  or diag($err);
unlike($err, qr/too many distseq sequences/, 'no "too many" error in one backend');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	3 * $nseq * 7, 'every value of one backend is there, none twice');

# Across backends: three clients, each transaction drawing from a random
# sequence, so that at most three are in use at once.
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $script = "$tmp/draw.sql";
PostgreSQL::Test::Utils::append_to_file($script,
	"\\set i random(1, $nseq)\n"
	  . "INSERT INTO t VALUES (:i, distseq_nextval('s' || :i));\n");
my ($bout, $berr) = ('', '');
my $ok = IPC::Run::run(
	[
		'pgbench', '-n', '-c', '3', '-j', '3', '-t', '400',
		'-f', $script, $node->connstr('postgres')
	],
	'<', '/dev/null', '>', \$bout, '2>', \$berr,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
ok($ok, 'three clients drew from random sequences') or diag($berr);
unlike($bout . $berr, qr/too many distseq sequences|ERROR|aborted/,
	'no client failed, none said "too many"');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	3 * $nseq * 7 + 3 * 400, 'every value is there, none twice');
cmp_ok($node->safe_psql('postgres', 'SELECT count(DISTINCT s) FROM t'),
	'>', 4, 'more sequences were used than there are entries');

# Three databases, two entries: each database's worker takes a worker slot
# and keeps running (distseq.worker_idle_timeout), more workers than entries.
$node->append_conf('postgresql.conf', "distseq.max_sequences = 2\n");
$node->restart;
for my $db ('d1', 'd2', 'd3')
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db,
		"CREATE EXTENSION distseq;
		 SELECT distseq_create('s', block_size => 5, window_size => 1000);");
}
for my $round (1 .. 2)
{
	for my $db ('d1', 'd2', 'd3')
	{
		($ret, $out, $err) = $node->psql($db,
			"SELECT count(DISTINCT distseq_nextval('s')) FROM generate_series(1, 12)");
		is($out, '12', "round $round: $db draws with two entries") or diag($err);
	}
}
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'distseq worker'"),
	'3',
	'three workers run at once with two entries');

# Shared memory, the allocation named "distseq": README's formula
#   50,264 + 512 E + 2,024 W + 8 B + 16 K B
# E entries (distseq.max_sequences), W worker slots (max_worker_processes),
# B backend slots (MaxBackends, as sql/distseq_memory.sql computes it), K
# slots of marks per backend (distseq.backend_marks).
sub shmem
{
	return $node->safe_psql(
		'postgres', q{
		SELECT a.size,
			   current_setting('distseq.max_sequences'),
			   current_setting('max_worker_processes'),
			   current_setting('distseq.backend_marks'),
			   current_setting('max_connections')::bigint
			   + coalesce(current_setting('autovacuum_worker_slots', true)::bigint + 2,
						  current_setting('autovacuum_max_workers')::bigint + 1)
			   + current_setting('max_worker_processes')::bigint
			   + current_setting('max_wal_senders')::bigint
		FROM pg_shmem_allocations a WHERE a.name = 'distseq'});
}
sub marks_bytes
{
	my ($k, $b) = @_;
	return 16 * $k * $b;
}
my @sizes;
for my $conf (
	"distseq.max_sequences = 10\n", "distseq.max_sequences = 30\n",
	"max_worker_processes = 20\n", "distseq.backend_marks = 40\n",
	"distseq.backend_marks = 5\nmax_worker_processes = 21\n")
{
	$node->append_conf('postgresql.conf', $conf);
	$node->restart;
	my ($size, $e, $w, $k, $b) = split(/\|/, shmem());
	is($size,
		50264 + 512 * $e + 2024 * $w + 8 * $b + marks_bytes($k, $b),
		"E = $e, W = $w, K = $k, B = $b: shared memory as README states");
	push @sizes, [ $size, $e, $w, $k, $b ];
}

# each term on its own: an entry, a worker slot, a slot of marks
my ($s1, $s2, $s3, $s4) = @sizes;
is(($s2->[0] - $s1->[0]) / ($s2->[1] - $s1->[1]),
	512, 'an entry costs 512 bytes, whatever the number of backends');
is( ($s3->[0] - $s2->[0] - (8 + 16 * $s2->[3]) * ($s3->[4] - $s2->[4])) /
	  ($s3->[2] - $s2->[2]),
	2024,
	'a worker slot costs 2,024 bytes, whatever max_sequences is');
is( ($s4->[0] - $s3->[0]) / (($s4->[3] - $s3->[3]) * $s4->[4]),
	16, 'a slot of marks costs 16 bytes per backend');

# entries are found through a hash table by identity, sized by max_sequences
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_shmem_allocations WHERE name = 'distseq entries'"),
	'1',
	'the hash table of entries is in shared memory');

$node->stop;
done_testing();
