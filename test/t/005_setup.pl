# distseq without shared_preload_libraries, and on a hot standby: clear
# errors, nothing else.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# Not preloaded: CREATE EXTENSION works, every function says what is missing.
my $plain = PostgreSQL::Test::Cluster->new('plain');
$plain->init;
$plain->start;
$plain->safe_psql('postgres', 'CREATE EXTENSION distseq');
foreach my $call ("distseq_create('s')", "distseq_nextval('s')",
	"distseq_currval('s')", "distseq_drop('s')",
	"count(*) FROM distseq_pool_status()",
	"count(*) FROM distseq_block_status()")
{
	my ($ret, $stdout, $stderr) = $plain->psql('postgres', "SELECT $call");
	isnt($ret, 0, "$call fails without shared_preload_libraries");
	like($stderr,
		qr/distseq must be loaded via shared_preload_libraries.*HINT:  Add distseq to shared_preload_libraries/s,
		"$call says how to fix it");
}
$plain->stop;

# A primary with a streaming standby: the standby refuses, as native nextval.
my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$primary->start;
$primary->safe_psql('postgres',
	"CREATE EXTENSION distseq; SELECT distseq_create('s');");
is($primary->safe_psql('postgres', "SELECT distseq_nextval('s')"),
	'1', 'primary draws');
$primary->backup('bkp');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bkp', has_streaming => 1);
$standby->start;
$primary->wait_for_catchup($standby);

my ($ret, $stdout, $stderr) =
  $standby->psql('postgres', "SELECT distseq_nextval('s')");
isnt($ret, 0, 'nextval fails on a standby');
like($stderr,
	qr/cannot execute distseq_nextval\(\) in a read-only transaction/,
	'with the error native nextval gives');
($ret, $stdout, $stderr) = $standby->psql('postgres', "SELECT nextval('distseq.s')");
like($stderr, qr/cannot execute nextval\(\) in a read-only transaction/,
	'native nextval fails the same way');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM distseq_status'),
	'1', 'the status view works on a standby');
is($standby->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'distseq worker'"),
	'0', 'no worker was started on the standby');

is($primary->safe_psql('postgres', "SELECT distseq_nextval('s')"),
	'2', 'primary goes on');

$standby->stop;
$primary->stop;
done_testing();
