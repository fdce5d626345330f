# The ORM examples of test/orm run against a server, as a role that is no
# superuser (the README's *Install on an existing server* grants): Django
# (migration with distseq_create_for_column, bulk_create, loaddata of a
# fixture with explicit ids, distseq_setval, inserts again), SQLAlchemy
# (server_default and RETURNING) and psycopg2 (execute_values, COPY,
# threads).  Also the grants the README gives for sequences another role
# created, and what a server short of max_worker_processes says.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use IPC::Run;

# Debian's python3 and its packages (scripts/test.sh installs them)
my $python = '/usr/bin/python3';
my $dir = "$FindBin::RealBin/../orm";

my $node = PostgreSQL::Test::Cluster->new('orm');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'\n");
$node->start;

# as the README's install guide: an application role owning its database,
# allowed to create and drop its own distseq sequences
$node->safe_psql('postgres', q(
	CREATE ROLE app LOGIN;
	CREATE DATABASE shop OWNER app;));
$node->safe_psql('shop', q(
	CREATE EXTENSION distseq;
	GRANT EXECUTE ON FUNCTION distseq_create, distseq_create_for_column,
		distseq_drop TO app;));

for my $script (qw(django_shop.py sqlalchemy_orders.py psycopg2_orders.py))
{
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	local $ENV{PGDATABASE} = 'shop';
	local $ENV{PGUSER} = 'app';
	my ($out, $err) = ('', '');
	my $ok = IPC::Run::run([ $python, "$dir/$script" ], '>', \$out, '2>', \$err);
	ok($ok, "$script runs through") or diag("stdout:\n$out\nstderr:\n$err");
	note($out);
}

# A sequence another role (here the superuser) created: the application
# role draws from it once granted USAGE on its backing sequence.
sub as_app
{
	my ($sql) = @_;
	my ($ret, $out, $err) =
	  $node->psql('shop', "SET ROLE app; $sql");
	return ($ret, $err);
}
$node->safe_psql('shop', "SELECT distseq_create('invoices')");
my ($ret, $err) = as_app("SELECT distseq_nextval('invoices')");
like($err, qr/permission denied for distseq sequence "invoices"/,
	'no USAGE, no value');
$node->safe_psql('shop', 'GRANT USAGE ON SEQUENCE distseq.invoices TO app');
($ret, $err) = as_app("SELECT distseq_nextval('invoices')");
is($ret, 0, 'with USAGE on distseq.invoices, a value');

# default privileges of the creating role reach the backing sequences
$node->safe_psql('shop',
	'ALTER DEFAULT PRIVILEGES IN SCHEMA distseq GRANT USAGE ON SEQUENCES TO app');
$node->safe_psql('shop', "SELECT distseq_create('receipts')");
($ret, $err) = as_app("SELECT distseq_nextval('receipts')");
is($ret, 0, 'ALTER DEFAULT PRIVILEGES ... IN SCHEMA distseq grants USAGE on new ones');

$node->stop;

# max_worker_processes counts distseq's workers (one per database in use):
# with no slot left (the logical replication launcher holds the only one),
# a draw says what to raise.
my $tight = PostgreSQL::Test::Cluster->new('tight');
$tight->init;
$tight->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'distseq'
max_worker_processes = 1
));
$tight->start;
$tight->safe_psql('postgres', "CREATE EXTENSION distseq; SELECT distseq_create('s')");
($ret, my $out, $err) = $tight->psql('postgres', "SELECT distseq_nextval('s')");
like($err, qr/could not start the distseq worker for database "postgres".*HINT:  Increase max_worker_processes/s,
	'no worker slot: the error says to raise max_worker_processes');
$tight->stop;

done_testing();
