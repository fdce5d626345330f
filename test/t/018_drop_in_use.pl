# A sequence dropped and re-created while it is in use.  Six pgbench
# clients insert ids drawn from it into a table, two per transaction a few
# milliseconds apart, while another session drops it and re-creates it above
# the highest id in the table, over and over, each time in one transaction.
# After the first transaction of each backend, the clients use the sequence
# without a lock (src/inuse.c): the drop must still wait for every
# transaction that drew from the old sequence, else the new one starts below
# an id that is still to be committed and hands it out again, a unique
# violation that aborts a client (it does when the drop does not wait).  No
# client may fail, and the table holds every id once.  Every other cycle
# drops the sequence as a column's: with the table whose column owns it,
# re-created along with it.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $cycles = 30;
my $duration = 15;

my $node = PostgreSQL::Test::Cluster->new('drop_in_use');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
$node->safe_psql('postgres',
	"CREATE TABLE t (id bigint PRIMARY KEY);
	 CREATE TABLE owner_t (id bigint);
	 SELECT distseq_create('s', block_size => 5, window_size => 1000,
		owned_by => 'owner_t.id')");

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $script = "$tmp/insert.sql";
PostgreSQL::Test::Utils::append_to_file($script,
	"BEGIN;\n"
	  . "INSERT INTO t VALUES (distseq_nextval('s'));\n"
	  . "SELECT pg_sleep(0.005);\n"
	  . "INSERT INTO t VALUES (distseq_nextval('s'));\n"
	  . "COMMIT;\n");

my ($out, $err) = ('', '');
my $pgbench = IPC::Run::start(
	[
		'pgbench', '-n', '-M', 'prepared', '-c', '6', '-j', '2',
		'-T', $duration, '-f', $script, $node->connstr('postgres')
	],
	'<', '/dev/null', '>', \$out, '2>', \$err,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));

# Let the clients get going, so that they use the sequence without a lock.
$node->poll_query_until('postgres', 'SELECT count(*) > 200 FROM t')
  or die 'the clients did not start';

# Each statement takes a new snapshot: the maximum is read once the drop has
# waited for the transactions that used the old sequence.
my $recreated = 0;
for my $i (1 .. $cycles)
{
	my $drop = $i % 2
	  ? "SELECT distseq_drop('s')"
	  : 'DROP TABLE owner_t; CREATE TABLE owner_t (id bigint)';
	$node->safe_psql('postgres',
		"BEGIN;
		 $drop;
		 SELECT distseq_create('s', block_size => 5, window_size => 1000,
			start_value => (SELECT max(id) + 1 FROM t), owned_by => 'owner_t.id');
		 COMMIT;");
	$recreated++;
	$node->safe_psql('postgres', 'SELECT pg_sleep(0.1)');
}
is($recreated, $cycles, "the sequence was dropped and re-created $cycles times");

my $ok = eval { $pgbench->finish; };
ok($ok && $pgbench->result == 0, 'no client failed') or diag("pgbench: $err");
unlike($out . $err, qr/aborted|ERROR/, 'pgbench reports no error');

my ($xacts) = $out =~ /number of transactions actually processed: (\d+)/;
ok(defined $xacts && $xacts > 0, 'the clients committed transactions');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	2 * ($xacts // 0), 'the table holds two ids per committed transaction');

$node->stop;
done_testing();
