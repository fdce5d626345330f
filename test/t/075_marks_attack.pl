# An attack on the backends' slots of marks (src/shmem.c distseq_my_marks,
# the handshake of src/inuse.c) with one slot per backend, so that slots
# change hands all the time.  What it tried found nothing; it is kept to
# catch a regression.  In every case a DROP (distseq_drop and re-create in
# one transaction, the new sequence starting above the highest value stored)
# must wait for every transaction that still uses the sequence, through its
# slot or through AccessShareLock, and no value may come twice (every value
# goes into a UNIQUE column, read before the re-create):
#
#  1. one transaction moves through s1 .. s6 with one slot: s1 keeps the
#     slot to the end, the others are locked, and the drop of s1 waits; a
#     user of s1 that comes while it waits, with its slot free, waits for
#     the drop; the slot given to another sequence in the next transaction
#     does not make a drop of s1 wait for nothing;
#  2. SAVEPOINT, ROLLBACK TO, RELEASE and a failed subtransaction after the
#     lock was taken: the slot and the locks stay;
#  3. PREPARE TRANSACTION after more sequences than slots: the prepared
#     transaction holds the lock on each, the backend goes on with its slot
#     on other sequences, and drops wait for COMMIT / ROLLBACK PREPARED
#     (and then for the backend's own later transaction);
#  4. COPY FROM with DEFAULT distseq_nextval() of three sequences and a
#     PL/pgSQL loop over six;
#  5. a database copied from this one carries the same relids: a drop here
#     does not wait for a user there, a drop there does;
#  6. a backend terminated, and one killed (crash restart), while holding
#     its slot: drops go on afterwards;
#  7. pgbench clients (plain, savepoints, PL/pgSQL, PREPARE) while another
#     session drops and re-creates the sequences: no value twice.  (A
#     PREPARE may fail while a drop waits for its transaction, by design:
#     that client stops, the others go on.)
#
# Seen failing when the rules are broken on purpose: a slot that marks the
# running transaction given to another sequence (shmem.c) fails 1 and ends
# in a duplicate key; PREPARE without locking the sequences used through a
# slot (nextval.c) fails 3; a user that goes on unlocked past a drop that
# did not see it (inuse.c) fails 1 and 7 (a duplicate key).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('marks_attack');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.backend_marks = 1
distseq.max_sequences = 16
max_prepared_transactions = 10
max_connections = 30
restart_after_crash = on
distseq.worker_idle_timeout = '1s'
");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE d1');

is($node->safe_psql('postgres', 'SHOW distseq.backend_marks'),
	'1', 'one slot of marks per backend');

# t holds every value drawn; tm gets its values from column defaults
my $setup = q{
	CREATE EXTENSION distseq;
	CREATE TABLE t (s text, v bigint, UNIQUE (s, v));
	SELECT distseq_create('s' || g, block_size => 5, window_size => 1000)
	FROM generate_series(1, 8) g;
	CREATE TABLE tm (x int,
		a bigint DEFAULT distseq_nextval('s1'),
		b bigint DEFAULT distseq_nextval('s2'),
		c bigint DEFAULT distseq_nextval('s3'));
	CREATE VIEW allv AS
		SELECT s, v FROM t
		UNION ALL SELECT 's1', a FROM tm
		UNION ALL SELECT 's2', b FROM tm
		UNION ALL SELECT 's3', c FROM tm;
	CREATE PROCEDURE loop6(n int) LANGUAGE plpgsql AS $$
	BEGIN
		FOR i IN 1 .. n LOOP
			INSERT INTO t VALUES ('s' || (1 + i % 6),
				distseq_nextval('s' || (1 + i % 6)));
		END LOOP;
	END $$;
};
$node->safe_psql('d1', $setup);

# two values of each sequence named
sub draw
{
	return join(";\n",
		map { "INSERT INTO t SELECT 's$_', distseq_nextval('s$_') FROM generate_series(1, 2)" }
		  @_)
	  . ";\n";
}

# drop and re-create: the new sequence starts above every value stored
sub recreate
{
	my ($seq) = @_;
	return "BEGIN;
		SELECT distseq_drop('$seq');
		SELECT distseq_create('$seq', block_size => 5, window_size => 1000,
			start_value => (SELECT coalesce(max(v), 0) + 1 FROM allv
							WHERE s = '$seq'));
		COMMIT;";
}

my $a = $node->background_psql('d1', on_error_stop => 0);
my $b = $node->background_psql('d1');
my $a_pid = $a->query_safe('SELECT pg_backend_pid()');
my $b_pid = $b->query_safe('SELECT pg_backend_pid()');

# which of the sequences the session with pid $pid (or prepared
# transactions, for undef) holds a relation lock on
sub locked
{
	my ($pid) = @_;
	my $who = defined $pid ? "l.pid = $pid" : 'l.pid IS NULL';
	return $node->safe_psql(
		'd1', qq{SELECT coalesce(string_agg(c.relname, ',' ORDER BY c.relname), '')
		FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
		WHERE $who AND l.locktype = 'relation' AND l.granted
		  AND c.relnamespace = 'distseq'::regnamespace
		  AND c.relname ~ '^s[0-9]+\$'});
}

# Does $sql return $expect within 15 s?  Locks show up at once: waiting
# longer only slows down a failing run.
sub soon
{
	my ($sql, $expect) = @_;
	for (1 .. 150)
	{
		return 1 if $node->safe_psql('d1', $sql) eq $expect;
		usleep(100_000);
	}
	return 0;
}

# Does backend $pid wait for a lock of kind $kind within 15 s?
sub waiting_for
{
	my ($pid, $kind) = @_;
	return soon(
		qq{SELECT l.locktype FROM pg_locks l
		WHERE l.pid = $pid AND NOT l.granted}, $kind);
}

# B starts $sql, which must wait for a lock of kind $kind
sub b_waits
{
	my ($sql, $kind, $what) = @_;
	$b->query_until(qr/started/, "\\echo started\n$sql\n");
	ok(waiting_for($b_pid, $kind), "$what: waits ($kind)");
}

# B is still waiting
sub b_still_waits
{
	my ($what) = @_;
	is( $node->safe_psql(
			'postgres', qq{SELECT count(*) FROM pg_locks
			WHERE pid = $b_pid AND NOT granted}),
		'1', "$what: still waits");
}

# B's statement has ended without error
sub b_done
{
	my ($what) = @_;
	$b->query_safe('SELECT 1');
	pass("$what: done");
}

sub no_duplicates
{
	my ($what) = @_;
	is( $node->safe_psql(
			'd1', 'SELECT count(*) - count(DISTINCT (s, v)) FROM allv'),
		'0', "$what: no value twice");
}

my $e = $node->background_psql('d1');
my $e_pid = $e->query_safe('SELECT pg_backend_pid()');
$e->query_safe(draw(1 .. 8));

# every sequence has its entry (a first use locks), and the slot marks an
# ended transaction
sub warm
{
	$a->query_safe(draw(1 .. 8));
}
warm();

# 1. one transaction through s1 .. s6: s1 holds the slot to the end
$a->query_safe('BEGIN;' . draw(1 .. 6));
is(locked($a_pid), 's2,s3,s4,s5,s6', '1: A locks every sequence but s1');
b_waits(recreate('s1'), 'virtualxid', '1: drop of s1 used through the slot');
$a->query_safe(draw(6, 5, 4, 3, 2, 1, 7, 8));
b_still_waits('1: drop of s1 while A draws on');

# a user that comes while the drop waits, with its slot free, waits for it
$e->query_until(qr/started/,
	"\\echo started\nBEGIN;\n" . draw(1) . "COMMIT;\n");
ok(waiting_for($e_pid, 'relation'),
	'1: a new user of s1 waits for the drop');
$a->query_safe('COMMIT');
b_done('1: drop of s1');
$e->query_safe('SELECT 1');
pass('1: the new user of s1 done');

# the next transaction's slot is s2's: a drop of s3 waits for the lock
warm();
$a->query_safe('BEGIN;' . draw(2, 3));
is(locked($a_pid), 's3', '1: the next transaction locks s3 only');
b_waits(recreate('s3'), 'relation', '1: drop of s3 used through the lock');
$a->query_safe('COMMIT');
b_done('1: drop of s3');

# the slot goes from s1 to s4: a drop of s1 waits for nothing
$a->query_safe(draw(1));
$a->query_safe('BEGIN;' . draw(4));
$b->query_safe(recreate('s1'));
pass('1: drop of s1, whose slot moved on, does not wait');
$a->query_safe('COMMIT');
no_duplicates('1');

# 2. savepoints: the slot and the locks survive ROLLBACK TO
warm();
$a->query_safe('BEGIN; SAVEPOINT a;' . draw(1, 2) . 'ROLLBACK TO a;' . draw(3));
is(locked($a_pid), 's2,s3', '2: after ROLLBACK TO, A still locks s2 and s3');
b_waits(recreate('s1'), 'virtualxid', '2: drop of s1 used in a rolled back savepoint');
$a->query_safe('SAVEPOINT b;' . draw(4) . 'RELEASE b;' . draw(5));
b_still_waits('2: drop of s1');
$a->query_safe('COMMIT');
b_done('2: drop of s1');

warm();
$a->query_safe('BEGIN;' . draw(5) . 'SAVEPOINT c;');
$a->query("SELECT distseq_nextval('s6'), 1 / (random() * 0)::int");
like($a->{stderr}, qr/division by zero/,
	'2: a subtransaction fails after drawing from s6');
$a->{stderr} = '';
$a->query_safe('ROLLBACK TO c;');
is(locked($a_pid), 's6', '2: the lock on s6 outlives the failed subtransaction');
b_waits(recreate('s6'), 'relation', '2: drop of s6');
$a->query_safe(draw(6, 1));
$a->query_safe('COMMIT');
b_done('2: drop of s6');
no_duplicates('2');

# 3. PREPARE after more sequences than slots
warm();
$a->query_safe('BEGIN;' . draw(1, 2, 3) . "PREPARE TRANSACTION 'p1';");
is(locked(undef), 's1,s2,s3', '3: the prepared transaction locks s1, s2, s3');
$a->query_safe(draw(4));
$a->query_safe(draw(5, 1));
b_waits(recreate('s1'), 'relation', '3: drop of s1 used by a prepared transaction');
$a->query_safe(draw(6));
b_still_waits('3: drop of s1 after A moved on');
$node->safe_psql('d1', "COMMIT PREPARED 'p1'");
b_done('3: drop of s1');
warm();

$a->query_safe('BEGIN;' . draw(2, 1) . "PREPARE TRANSACTION 'p2';");
$a->query_safe('BEGIN;' . draw(2));
b_waits(recreate('s2'), 'relation', '3: drop of s2, prepared and in use again');
$node->safe_psql('d1', "ROLLBACK PREPARED 'p2'");
ok(waiting_for($b_pid, 'virtualxid'),
	'3: then it waits for A\'s own transaction');
$a->query_safe(draw(1));
b_still_waits('3: drop of s2');
$a->query_safe('COMMIT');
b_done('3: drop of s2');
no_duplicates('3');

# 4. COPY FROM with defaults of three sequences, a loop over six
warm();
$a->query_safe("BEGIN; COPY tm (x) FROM PROGRAM 'seq 1 40';");
is(locked($a_pid), 's2,s3', '4: COPY locks two of its three sequences');
b_waits(recreate('s3'), 'relation', '4: drop of s3 used by COPY');
$a->query_safe("COPY tm (x) FROM PROGRAM 'seq 1 40';");
$a->query_safe('COMMIT');
b_done('4: drop of s3');
$a->query_safe('BEGIN; CALL loop6(60);');
b_waits(recreate('s2'), 'virtualxid', '4: drop of s2, the first of the loop');
$a->query_safe('CALL loop6(60);');
$a->query_safe('COMMIT');
b_done('4: drop of s2');
$a->query_safe('BEGIN; CALL loop6(60);');
b_waits(recreate('s5'), 'relation', '4: drop of s5, later in the loop');
$a->query_safe('COMMIT');
b_done('4: drop of s5');
no_duplicates('4');

# 5. a copy of this database: the same relids, slots of other backends
$e->quit;
$a->quit;
$b->quit;
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = 'd1'")
  or die 'd1 still in use';
$node->safe_psql('postgres', 'CREATE DATABASE d2 TEMPLATE d1');
my $c = $node->background_psql('d2');
my $d = $node->background_psql('d2');
$a = $node->background_psql('d1', on_error_stop => 0);
$b = $node->background_psql('d1');
$a_pid = $a->query_safe('SELECT pg_backend_pid()');
$b_pid = $b->query_safe('SELECT pg_backend_pid()');
my $d_pid = $d->query_safe('SELECT pg_backend_pid()');
$c->query_safe(draw(7));
$c->query_safe('BEGIN;' . draw(7));
is( $node->safe_psql('d1',
		"SELECT count(*) FROM pg_locks WHERE locktype = 'relation' AND pid = "
		  . $c->query_safe('SELECT pg_backend_pid()')
		  . " AND database = (SELECT oid FROM pg_database WHERE datname = 'd2')"
		  . " AND relation = (SELECT oid FROM pg_class WHERE relname = 's7')"),
	'0', '5: the user in the copy holds its slot, not the lock');
$a->query_safe(draw(7));
$b->query_safe("SET lock_timeout = '10s';" . recreate('s7'));
pass('5: a drop here does not wait for a user of the copy');
$d->query_until(qr/started/, "\\echo started\n" . recreate('s7') . "\n");
ok(waiting_for($d_pid, 'virtualxid'),
	'5: a drop in the copy waits for its user');
$c->query_safe('COMMIT');
$d->query_safe('SELECT 1');
pass('5: the drop in the copy done');
is( $node->safe_psql(
		'd2', 'SELECT count(*) - count(DISTINCT (s, v)) FROM allv'),
	'0', '5: no value twice in the copy');
$c->quit;
$d->quit;
$node->safe_psql('postgres', 'DROP DATABASE d2 WITH (FORCE)');

# 6. a backend terminated, one killed, while holding the slot
$a->query_safe('BEGIN;' . draw(1, 2));
$node->safe_psql('postgres', "SELECT pg_terminate_backend($a_pid)");
$b->query_safe(recreate('s1'));
pass('6: drop of s1 after its user was terminated');
$a->{run}->kill_kill;
$b->quit;
$a = $node->background_psql('d1', on_error_stop => 0);
$a_pid = $a->query_safe('SELECT pg_backend_pid()');
$a->query_safe('BEGIN;' . draw(1, 2, 3));
kill 'KILL', $a_pid;
$a->{run}->kill_kill;
# the crash restart: a psql refused while the server recovers may exit
# before poll_query_until() writes the query to its stdin, and the broken
# pipe kills this script, so wait first for pg_isready, which sends none
my $ready = 0;
for (1 .. 600)
{
	$ready = IPC::Run::run([ 'pg_isready', '-q', '-d', $node->connstr('d1') ]);
	last if $ready;
	usleep(100_000);
}
$ready or die 'no restart';
$node->poll_query_until('d1', 'SELECT true') or die 'no restart';
my $log_offset = -s $node->logfile;
$node->safe_psql('d1', draw(1 .. 8) . recreate('s1') . draw(1));
pass('6: drop and draws after a crash restart');
no_duplicates('6');

# 7. pgbench: plain, savepoints, PL/pgSQL and PREPARE, while sequences are
# dropped and re-created; only the errors a drop may cause are allowed
my $tmp = PostgreSQL::Test::Utils::tempdir;
my $ins = sub {
	my ($off) = @_;
	my $i = "(1 + (:a + $off) % 6)";
	return "INSERT INTO t VALUES ('s' || $i, distseq_nextval('s' || $i));\n";
};
PostgreSQL::Test::Utils::append_to_file("$tmp/plain.sql",
	"\\set a random(0, 5)\nBEGIN;\n"
	  . $ins->(0) . $ins->(1) . $ins->(3) . $ins->(0) . "COMMIT;\n");
PostgreSQL::Test::Utils::append_to_file("$tmp/savepoint.sql",
	"\\set a random(0, 5)\nBEGIN;\nSAVEPOINT x;\n"
	  . $ins->(0) . $ins->(1) . "ROLLBACK TO x;\n"
	  . $ins->(2) . "SAVEPOINT y;\n" . $ins->(0) . "RELEASE y;\n"
	  . $ins->(4) . "COMMIT;\n");
PostgreSQL::Test::Utils::append_to_file("$tmp/loop.sql",
	"BEGIN;\nCALL loop6(12);\nCOMMIT;\n");
PostgreSQL::Test::Utils::append_to_file("$tmp/prepare.sql",
	"\\set a random(0, 5)\nBEGIN;\n"
	  . $ins->(0) . $ins->(2) . $ins->(4)
	  . "PREPARE TRANSACTION 'p:client_id';\n"
	  . "COMMIT PREPARED 'p:client_id';\n");

my %bench;
for my $f ('plain', 'savepoint', 'loop', 'prepare')
{
	my ($o, $e) = ('', '');
	$bench{$f} = {
		out => \$o,
		err => \$e,
		h => IPC::Run::start(
			[
				'pgbench', '-n', '-c', '2', '-j', '1', '-T', '10',
				'-f', "$tmp/$f.sql", $node->connstr('d1')
			],
			'<', '/dev/null', '>', \$o, '2>', \$e,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default))
	};
}
my $recreated = 0;
for my $i (1 .. 30)
{
	$node->safe_psql('d1', recreate('s' . (1 + $i % 6)));
	$recreated++;
	$node->safe_psql('d1', 'SELECT pg_sleep(0.15)');
}
is($recreated, 30, '7: sequences dropped and re-created 30 times');
my $all = '';
for my $f (sort keys %bench)
{
	my $h = $bench{$f}{h};
	my $ok = eval { $h->finish; 1 };
	ok($ok, "7: pgbench $f ended") or diag($@);
	my $txt = ${ $bench{$f}{out} } . ${ $bench{$f}{err} };
	my ($n) = $txt =~ /number of transactions actually processed: (\d+)/;
	ok(defined $n && ($n > 0 || $f eq 'prepare'),
		"7: pgbench $f committed transactions")
	  or diag($txt);
	$all .= $txt;
}
unlike($all, qr/duplicate key|server closed|terminated abnormally/,
	'7: no value twice, no backend lost');
is($node->safe_psql('d1', 'SELECT count(*) FROM pg_prepared_xacts'),
	'0', '7: no prepared transaction left');
no_duplicates('7');
ok(!$node->log_contains('TRAP:|terminated by signal', $log_offset),
	'no assertion failed, no backend crashed after the kill')
  or diag('see the server log');

$node->stop;
done_testing();
