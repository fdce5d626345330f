# Many sessions draw from one sequence's stream at once while its entry is
# written back and taken over again and again: with two entries, another
# session draws from three other sequences in turn, each in a transaction of
# its own, so that the worker is asked to write back and park the entry of
# the busy sequence whenever no transaction marks it, and its stream is
# closed while clients draw from it.  For block sizes 1, 3 and 100:
# every value is unique (a UNIQUE index), each session's values grow, every
# value lies below the top of a window the catalog holds reserved, every
# value drawn is counted issued, and none is lost.  No draw fails, on
# either side: an entry whose refill is under way while no transaction
# uses it is waited for, not counted as in use ("too many distseq
# sequences in use" came from that, at random).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $duration = 5;
my $clients = 16;

my $node = PostgreSQL::Test::Cluster->new('stream_stress');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.max_sequences = 2
max_connections = 40
");
$node->start;
$node->safe_psql('postgres',
	"CREATE EXTENSION distseq;
	 SELECT distseq_create('o' || g, block_size => 5, window_size => 1000)
	 FROM generate_series(1, 3) g;
	 CREATE PROCEDURE churn(secs float8) LANGUAGE plpgsql AS \$\$
	 DECLARE
		stop timestamptz := clock_timestamp() + secs * interval '1 second';
		i int := 0;
		failed int := 0;
	 BEGIN
		WHILE clock_timestamp() < stop LOOP
			i := i + 1;
			BEGIN
				PERFORM distseq_nextval('o' || (i % 3 + 1));
			EXCEPTION WHEN OTHERS THEN
				failed := failed + 1;
			END;
			COMMIT;
		END LOOP;
		RAISE NOTICE 'churn: % draws, % failed', i, failed;
	 END \$\$;");

my $tmp = PostgreSQL::Test::Utils::tempdir;
for my $bs (1, 3, 100)
{
	my $s = "s$bs";
	$node->safe_psql('postgres',
		"SELECT distseq_create('$s', block_size => $bs, window_size => 5000);
		 CREATE SEQUENCE ord_$bs;
		 CREATE TABLE t_$bs (v bigint UNIQUE, pid int, ord bigint);");
	my $script = "$tmp/insert_$bs.sql";
	PostgreSQL::Test::Utils::append_to_file($script,
		"INSERT INTO t_$bs VALUES (distseq_nextval('$s'), pg_backend_pid(), nextval('ord_$bs'));\n"
		  . "\\sleep 1 ms\n");

	my ($out, $err) = ('', '');
	my $pgbench = IPC::Run::start(
		[
			'pgbench', '-n', '-M', 'prepared', '-c', $clients, '-j', '2',
			'-T', $duration, '-f', $script, $node->connstr('postgres')
		],
		'<', '/dev/null', '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	$node->poll_query_until('postgres', "SELECT count(*) > 100 FROM t_$bs")
	  or die 'the clients did not start';
	my ($ret, $cout, $cerr) =
	  $node->psql('postgres', "CALL churn($duration - 1)");
	is($ret, 0, "block size $bs: the other sequences were drawn meanwhile")
	  or diag($cerr);
	note($cerr);
	# an entry being refilled that no transaction uses is waited for, not
	# counted in use: no draw fails with "too many distseq sequences"
	like($cerr, qr/churn: \d+ draws, 0 failed/,
		"block size $bs: no draw of the other sequences failed");

	my $ok = eval { $pgbench->finish; };
	ok($ok && $pgbench->result == 0, "block size $bs: no client failed")
	  or diag("pgbench: $err");
	unlike($out . $err, qr/aborted|ERROR/,
		"block size $bs: pgbench reports no error");

	note($node->safe_psql('postgres', "SELECT count(*) FROM t_$bs"),
		" rows with block size $bs");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM (SELECT v, lag(v) OVER (PARTITION BY pid ORDER BY ord) AS prev
			 FROM t_$bs) x WHERE prev >= v"),
		'0',
		"block size $bs: each session's values grow");
	is( $node->safe_psql(
			'postgres',
			"SELECT count(*) FROM t_$bs WHERE NOT EXISTS
			 (SELECT 1 FROM distseq.distseq_windows w
			  WHERE w.sequence_name = '$s' AND w.window_start <= v AND v < w.next_hi)"
		),
		'0',
		"block size $bs: every value was reserved");
	is( $node->safe_psql(
			'postgres',
			"SELECT values_lost FROM distseq_status WHERE sequence_name = '$s'"),
		'0',
		"block size $bs: no value lost");
	cmp_ok(
		$node->safe_psql(
			'postgres',
			"SELECT values_released FROM distseq.distseq_sequences
			 WHERE sequence_name = '$s'"),
		'>', 0,
		"block size $bs: the pool was written back while in use");
	# the stream's current chunk counts issued as a whole when installed
	my $drawn = "SELECT values_issued - COALESCE((SELECT sum(values_left)
		 FROM distseq_blocks WHERE sequence_name = '$s'), 0)
		 FROM distseq_status WHERE sequence_name = '$s'";
	is( $node->safe_psql('postgres', $drawn),
		$node->safe_psql('postgres', "SELECT count(*) FROM t_$bs"),
		"block size $bs: every value drawn counted issued, and no other");
}

done_testing();
