# A caller waiting for a refill can be cancelled, by statement_timeout or
# pg_cancel_backend, with a clear error; the refill in flight is not lost.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('cancel');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;
$node->safe_psql('postgres',
	"CREATE EXTENSION distseq; SELECT distseq_create('c', block_size => 4);");

# Hold the sequence's catalog row: the worker's refill waits behind it.
my ($lin, $lout, $lerr) = ('', '', '');
my $locker = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
	\$lin, \$lout, \$lerr);
$lin .= "BEGIN;\nSELECT 'locked' FROM distseq.distseq_sequences WHERE sequence_name = 'c' FOR UPDATE;\n";
$locker->pump until $lout =~ /locked/;

my ($ret, $out, $err) = $node->psql('postgres',
	"SET statement_timeout = '300ms'; SELECT distseq_nextval('c')");
isnt($ret, 0, 'statement_timeout ends the wait');
like($err, qr/canceling statement due to statement timeout/, 'with the usual error');

my ($win, $wout, $werr) = ('', '', '');
my $waiter = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-c', "SELECT distseq_nextval('c')" ],
	\$win, \$wout, \$werr);
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE wait_event_type = 'Extension' AND backend_type = 'client backend'")
  or die 'the caller never waited';
$node->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity
	 WHERE wait_event_type = 'Extension' AND backend_type = 'client backend'");
$waiter->finish;
like($werr, qr/canceling statement due to user request/, 'pg_cancel_backend ends the wait');
is($wout, '', 'and no value was returned');

# Let the refill through: its values are the first ones, nothing skipped.
$lin .= "COMMIT;\n\\q\n";
$locker->finish;
is($node->safe_psql('postgres', "SELECT distseq_nextval('c')"), '1',
	'the refill that was in flight serves the next caller');
is($node->safe_psql('postgres',
		"SELECT refills || ' ' || (waits >= 2)::text FROM distseq_status WHERE sequence_name = 'c'"),
	'1 true', 'one refill, both waits counted');
is($node->safe_psql('postgres', 'SELECT pg_postmaster_start_time() = pg_postmaster_start_time()'),
	't', 'the server is up');

$node->stop;
done_testing();
