# Entries found by identity (the hash "distseq entries", shmem.c) while
# everything that changes an entry's identity happens at once, with four
# entries for many more sequences: draws in two databases that carry the
# same (relid, gen) (one copied from the other), distseq_setval and
# distseq_alter giving sequences new generations, a sequence dropped and
# created again, and databases copied from the same template, drawn from
# and dropped.  Every sequence has values of its own, a range no other
# sequence's touches, and the table the values go to checks the range and
# that no value comes twice: an entry found for the wrong identity would
# hand out another sequence's values (the CHECK fails) or the same value
# twice (the UNIQUE fails), and the client that got it stops.  (An attack
# on the entry hash that found nothing: kept to catch a regression.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('churn');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.max_sequences = 4
distseq.worker_idle_timeout = '1s'
distseq.refill_timeout = '30s'
max_connections = 40
");
$node->start;

# Sequence sN hands out values of [N * 10^9, (N + 1) * 10^9) only.  A
# transaction draws 1 to 5 values of a random sequence; the errors that
# churn may cause (an entry or the sequence busy or gone, all entries in
# use) are counted, anything else -- a value out of its range, a value
# twice -- stops the client.
my $nseq = 9;
$node->safe_psql('postgres', 'CREATE DATABASE d1');
$node->safe_psql(
	'd1', qq{
	CREATE EXTENSION distseq;
	CREATE TABLE t (s int, v bigint, UNIQUE (s, v),
		CHECK (v >= s * 1000000000::bigint AND v < (s + 1) * 1000000000::bigint));
	CREATE TABLE errs (code text);
	SELECT distseq_create('s' || g, block_size => 3, window_size => 60,
		start_value => g * 1000000000::bigint,
		max_value => g * 1000000000::bigint + 999999999)
	FROM generate_series(1, $nseq) g;
	CREATE PROCEDURE work(n int) LANGUAGE plpgsql AS \$\$
	DECLARE
		i int;
	BEGIN
		FOR k IN 1 .. n LOOP
			i := 1 + floor(random() * $nseq)::int;
			BEGIN
				INSERT INTO t
				SELECT i, distseq_nextval('s' || i)
				FROM generate_series(1, 1 + floor(random() * 5)::int);
			EXCEPTION
				WHEN undefined_object OR object_in_use OR lock_not_available
					OR configuration_limit_exceeded
					OR object_not_in_prerequisite_state THEN
					INSERT INTO errs VALUES (SQLSTATE || ' ' || SQLERRM);
			END;
			COMMIT;
		END LOOP;
	END \$\$;
	CALL work(40);});

# d2 and tmpl are copies: the same relids and generations, other databases
$node->safe_psql('postgres', 'CREATE DATABASE d2 TEMPLATE d1');
$node->safe_psql('postgres', 'CREATE DATABASE tmpl TEMPLATE d1');

my $tmp = PostgreSQL::Test::Utils::tempdir;
PostgreSQL::Test::Utils::append_to_file("$tmp/work.sql", "CALL work(20);\n");
my %bench;
for my $db ('d1', 'd2')
{
	my ($out, $err) = ('', '');
	$bench{$db} = {
		out => \$out,
		err => \$err,
		h => IPC::Run::start(
			[
				'pgbench', '-n', '-c', '2', '-j', '2', '-t', '15',
				'-f', "$tmp/work.sql", $node->connstr($db)
			],
			'<', '/dev/null', '>', \$out, '2>', \$err,
			IPC::Run::timeout(3 * $PostgreSQL::Test::Utils::timeout_default))
	};
}

# Meanwhile: new generations (setval above anything drawn so far, alter),
# s9 dropped and created again above its earlier values, and databases
# copied from tmpl, drawn from and dropped.  Round r of a database owns
# the millionth r of each range: fewer values than that are drawn in one.
my %round = map { $_ => 0 } ('d1', 'd2');
my ($changes, $refused, $copies) = (0, 0, 0);
my $deadline = time + 60;
my $n = 0;
while ($n < 300
	&& time < $deadline
	&& grep { $bench{$_}{h}->pumpable } keys %bench)
{
	$n++;
	my $db = $n % 2 ? 'd1' : 'd2';
	my $i = 1 + $n % ($nseq - 1);
	my $r = ++$round{$db};
	my $sql =
	    $n % 3 == 0
	  ? "SELECT distseq_alter('s$i', block_size => " . (2 + $n % 4) . ')'
	  : "SELECT distseq_setval('s$i', $i * 1000000000::bigint + $r * 1000000::bigint)";
	my ($ret, $out, $err) = $node->psql($db, $sql);
	if ($ret == 0) { $changes++ }
	elsif ($err =~ /refused|below|in use|timeout|could not obtain/) { $refused++ }
	else { fail("$db: $sql: $err") }

	($ret, $out, $err) = $node->psql(
		$db, "SELECT distseq_drop('s9');
		SELECT distseq_create('s9', block_size => 3, window_size => 60,
			start_value => 9000000000 + $r * 1000000::bigint,
			max_value => 9000000000 + $r * 1000000::bigint + 999999)");
	is($ret, 0, "$db: s9 dropped and created again") or diag($err);

	if ($n % 4 == 0)
	{
		my $copy = "c$n";
		$node->safe_psql('postgres', "CREATE DATABASE $copy TEMPLATE tmpl");
		($ret, $out, $err) = $node->psql($copy, 'CALL work(15)');
		is($ret, 0, "$copy: drew while the others churn") or diag($err);
		is( $node->safe_psql(
				$copy, 'SELECT count(*) = count(DISTINCT (s, v)) FROM t'),
			't', "$copy: no value twice");
		$node->safe_psql('postgres', "DROP DATABASE $copy");
		$copies++;
	}
}
for my $db ('d1', 'd2')
{
	my $b = $bench{$db};
	ok($b->{h}->finish, "$db: every client finished") or diag(${ $b->{err} });
	unlike(${ $b->{out} } . ${ $b->{err} },
		qr/ERROR|aborted|violat/, "$db: no client failed");
	diag("$db: "
		  . $node->safe_psql($db,
			"SELECT count(*) || ' values, errors caught: ' || (SELECT count(*) FROM errs) FROM t"
		  ));
	diag($node->safe_psql($db,
		"SELECT code, count(*) FROM errs GROUP BY 1 ORDER BY 2 DESC LIMIT 5"));
	# a refill or an entry asked for and never served would time out
	is($node->safe_psql($db, "SELECT count(*) FROM errs WHERE code LIKE '55P03%'"),
		'0', "$db: no wait for a refill or an entry timed out");
}
diag("$changes new generations, $refused refused, $copies copies dropped");
cmp_ok($changes, '>', 5, 'sequences took new generations while drawn from');
cmp_ok($copies, '>', 0, 'databases were copied and dropped meanwhile');

# After a clean restart, every sequence draws on in both databases, in
# range, none twice.
$node->restart;
for my $db ('d1', 'd2')
{
	my ($ret, $out, $err) = $node->psql($db,
		join(";\n",
			map { "INSERT INTO t SELECT $_, distseq_nextval('s$_') FROM generate_series(1, 7)" }
			  (1 .. $nseq)));
	is($ret, 0, "$db: every sequence draws after a restart") or diag($err);
	is( $node->safe_psql(
			$db,
			'SELECT count(*) FROM t
			 WHERE v < s * 1000000000::bigint OR v >= (s + 1) * 1000000000::bigint'),
		'0',
		"$db: every value in its sequence's range");
}
unlike(slurp_file($node->logfile),
	qr/TRAP|terminated by signal|out of shared memory/,
	'no crash, no shared hash full');

$node->stop;
done_testing();
