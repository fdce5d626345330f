# A backend has distseq.backend_marks slots of marks (src/shmem.c, inuse.c),
# not one per entry: a transaction that uses more distinct sequences than
# that takes AccessShareLock on the backing relations of the others, as on
# a first use, and never fails for it.  Either way a DROP or a
# distseq_setval() of any of them waits for the transaction.
#
# With two slots, backend A draws from s1, s2, s3 and s4 in one transaction:
# s1 and s2 through slots, s3 and s4 through the lock (pg_locks shows which).
# Backend B's distseq_setval() and drop-and-re-create of s1 wait for A's
# transaction id (a slot), those of s4 for its lock; each finishes once A
# commits, and no value comes twice (a UNIQUE column, and a re-created
# sequence starts above the highest value in the table, read after the
# drop waited).  A slot that marks the running transaction is never given
# to another sequence: if it were, s3 would take s1's slot and the drop of
# s1 would not wait for A.
#
# Then pgbench clients, each transaction drawing from four of eight
# sequences, while another session drops and re-creates them one after the
# other: no client fails, none says "too many distseq sequences", no value
# comes twice.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('marks');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.backend_marks = 2
distseq.max_sequences = 16
");
$node->start;

is($node->safe_psql('postgres', 'SHOW distseq.backend_marks'),
	'2', 'two slots of marks per backend');

$node->safe_psql('postgres',
	"CREATE EXTENSION distseq;
	 CREATE TABLE t (s text, v bigint, UNIQUE (s, v));
	 SELECT distseq_create('s' || g, block_size => 5, window_size => 1000)
	 FROM generate_series(1, 12) g;");

my $a = $node->background_psql('postgres');
my $b = $node->background_psql('postgres');
my $a_pid = $a->query_safe('SELECT pg_backend_pid()');
my $b_pid = $b->query_safe('SELECT pg_backend_pid()');

# three values of each of s1 .. s4, in this order
my $draw = join(";\n",
	map { "INSERT INTO t SELECT 's$_', distseq_nextval('s$_') FROM generate_series(1, 3)" }
	  (1 .. 4));

# the backing relations of s1 .. s4 that A holds a lock on
my $locked = q{SELECT string_agg(c.relname, ',' ORDER BY c.relname)
	FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
	WHERE l.pid = } . $a_pid . q{ AND l.locktype = 'relation'
	  AND c.relnamespace = 'distseq'::regnamespace
	  AND c.relname IN ('s1', 's2', 's3', 's4')};

my $round = 0;
for my $case (
	[ 's1', 'setval', 'virtualxid' ],
	[ 's4', 'setval', 'relation' ],
	[ 's1', 'drop', 'virtualxid' ],
	[ 's4', 'drop', 'relation' ])
{
	my ($seq, $op, $wait) = @$case;
	$round++;

	# a transaction of its own first, so that every sequence has its entry
	# (a first use locks) and the drawing transaction finds both slots
	# marking older transactions
	$a->query_safe($draw);
	$a->query_safe("BEGIN; $draw");
	is($node->safe_psql('postgres', $locked),
		's3,s4', "round $round: A locks only the sequences beyond its two slots");

	my $sql = $op eq 'setval'
	  ? "SELECT distseq_setval('$seq', 100000 * $round);"
	  : "BEGIN;
		 SELECT distseq_drop('$seq');
		 SELECT distseq_create('$seq', block_size => 5, window_size => 1000,
			start_value => (SELECT max(v) + 1 FROM t WHERE s = '$seq'));
		 COMMIT;";
	$b->query_until(qr/started/, "\\echo started\n$sql\n");
	ok( $node->poll_query_until(
			'postgres', qq{SELECT a.wait_event || '/' || l.locktype
			FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
			WHERE a.pid = $b_pid AND NOT l.granted},
			"$wait/$wait"),
		"round $round: $op of $seq waits for A ($wait)");

	# A goes on drawing meanwhile, then commits; B ends then
	$a->query_safe($draw);
	is($node->safe_psql('postgres',
			"SELECT state FROM pg_stat_activity WHERE pid = $b_pid"),
		'active', "round $round: $op of $seq still waits while A is open");
	$a->query_safe('COMMIT');
	$b->query_safe('SELECT 1');
	pass("round $round: $op of $seq done once A committed");

	if ($op eq 'setval')
	{
		is( $a->query_safe("SELECT distseq_nextval('$seq') >= 100000 * $round"),
			't', "round $round: A draws from $seq above the new floor");
	}
}
$a->query_safe($draw);
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	4 * 3 * (3 * 4 + 1), 'every value A drew is there, none twice');
$a->quit;
$b->quit;

# Many transactions, each with four of s5 .. s12: two through slots, two
# through the lock, slots given from sequence to sequence all the time.
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $script = "$tmp/draw.sql";
my $insert = sub {
	my ($off) = @_;
	my $i = "(5 + (:a + $off) % 8)";
	return "INSERT INTO t VALUES ('s' || $i, distseq_nextval('s' || $i));\n";
};
PostgreSQL::Test::Utils::append_to_file($script,
	"\\set a random(0, 7)\nBEGIN;\n"
	  . $insert->(0)
	  . $insert->(1)
	  . $insert->(3)
	  . $insert->(5)
	  . "COMMIT;\n");

my ($out, $err) = ('', '');
my $pgbench = IPC::Run::start(
	[
		'pgbench', '-n', '-c', '4', '-j', '2', '-T', '12',
		'-f', $script, $node->connstr('postgres')
	],
	'<', '/dev/null', '>', \$out, '2>', \$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));

$node->poll_query_until('postgres',
	"SELECT count(*) > 200 FROM t WHERE s NOT IN ('s1', 's2', 's3', 's4')")
  or die 'the clients did not start';
my $recreated = 0;
for my $i (1 .. 24)
{
	my $seq = 's' . (5 + $i % 8);
	$node->safe_psql('postgres',
		"BEGIN;
		 SELECT distseq_drop('$seq');
		 SELECT distseq_create('$seq', block_size => 5, window_size => 1000,
			start_value => (SELECT coalesce(max(v), 0) + 1 FROM t WHERE s = '$seq'));
		 COMMIT;");
	$recreated++;
	$node->safe_psql('postgres', 'SELECT pg_sleep(0.1)');
}
is($recreated, 24, 'sequences were dropped and re-created 24 times');

my $ok = eval { $pgbench->finish; };
ok($ok && $pgbench->result == 0, 'no client failed') or diag("pgbench: $err");
unlike($out . $err, qr/aborted|ERROR|too many distseq sequences/,
	'pgbench reports no error');
my ($xacts) = $out =~ /number of transactions actually processed: (\d+)/;
ok(defined $xacts && $xacts > 0, 'the clients committed transactions');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM t WHERE s NOT IN ('s1', 's2', 's3', 's4')"),
	4 * ($xacts // 0),
	'the table holds four values per committed transaction, none twice');

$node->stop;
done_testing();
