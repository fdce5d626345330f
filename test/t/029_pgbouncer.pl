# Through PgBouncer (Debian's package), as applications run behind it:
# - session pooling with its default reset (server_reset_query =
#   DISCARD ALL): the next client on the same server backend gets no
#   distseq_currval of the one before, as with a native sequence's currval;
# - transaction pooling: ids from a DEFAULT distseq_nextval() are distinct
#   across clients that share backends, and currval holds within a
#   transaction.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $pgbouncer = '/usr/sbin/pgbouncer';
# scripts/test.sh installs it; a machine without it is no pass
ok(-x $pgbouncer, 'PgBouncer is installed') or BAIL_OUT('no pgbouncer');

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'\n");
$node->start;
$node->safe_psql('postgres', q(
	CREATE EXTENSION distseq;
	SELECT distseq_create('orders', block_size => 10);
	CREATE SEQUENCE native;
	CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT distseq_nextval('orders'),
						 client int);));

# One PgBouncer in the given pool mode, one server connection per pool,
# so that clients take turns on the same backend.
sub start_bouncer
{
	my ($mode) = @_;
	my $dir = $node->basedir . "/bouncer_$mode";
	mkdir $dir;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $user = $ENV{USER} || getpwuid($<);
	open my $fh, '>', "$dir/pgbouncer.ini" or die;
	print $fh <<"INI";
[databases]
postgres = host=@{[ $node->host ]} port=@{[ $node->port ]} dbname=postgres user=$user

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = any
pool_mode = $mode
default_pool_size = 1
max_client_conn = 20
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
	close $fh;
	my $h = IPC::Run::start([ $pgbouncer, "$dir/pgbouncer.ini" ],
		'>', "$dir/stdout", '2>', "$dir/stderr");
	# ready once it answers
	my $ok = 0;
	for (1 .. 100)
	{
		my ($ret) = run_bouncer($port, 'SELECT 1');
		if ($ret == 0) { $ok = 1; last; }
		select(undef, undef, undef, 0.1);
	}
	ok($ok, "PgBouncer in $mode pooling answers");
	return ($h, $port);
}

sub run_bouncer
{
	my ($port, $sql) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', '-XAtq', '-h', '127.0.0.1', '-p', $port,
			'-d', 'postgres', '-v', 'ON_ERROR_STOP=1', '-c', $sql ],
		'>', \$out, '2>', \$err);
	chomp $out;
	return ($? >> 8, $out, $err);
}

# Session pooling: a client draws and leaves; the next one is on the same
# backend, after PgBouncer's DISCARD ALL.
my ($h, $port) = start_bouncer('session');
my ($ret, $out, $err) = run_bouncer($port,
	"SELECT pg_backend_pid(), distseq_nextval('orders') = distseq_currval('orders'),"
	  . " nextval('native') = currval('native')");
my ($pid1, $same, $native_same) = split /\|/, $out;
is("$same|$native_same", 't|t', 'the first client has its currval');
($ret, $out, $err) = run_bouncer($port, 'SELECT pg_backend_pid()');
is($out, $pid1, 'the next client is on the same backend');
($ret, $out, $err) = run_bouncer($port, "SELECT distseq_currval('orders')");
isnt($ret, 0, 'and has no distseq_currval of the client before');
like($err, qr/currval of distseq sequence "orders" is not yet defined in this session/,
	'it is not defined in its session');
($ret, $out, $err) = run_bouncer($port, "SELECT currval('native')");
like($err, qr/currval of sequence "native" is not yet defined in this session/,
	'as the native currval is not');
$h->kill_kill;

# Transaction pooling: several clients at once share one backend.
($h, $port) = start_bouncer('transaction');
my @clients;
for my $c (1 .. 4)
{
	my $sql = join('', map {
		"BEGIN; INSERT INTO orders (client) VALUES ($c);"
		  . " SELECT distseq_currval('orders') = max(id) FROM orders WHERE client = $c"
		  . " AND id = distseq_currval('orders'); COMMIT;\n" } 1 .. 50);
	my ($o, $e) = ('', '');
	push @clients, [ IPC::Run::start(
		[ 'psql', '-XAtq', '-h', '127.0.0.1', '-p', $port, '-d', 'postgres',
		  '-v', 'ON_ERROR_STOP=1' ], '<', \$sql, '>', \$o, '2>', \$e), \$o, \$e ];
}
my $all_true = 1;
for my $c (@clients)
{
	$c->[0]->finish;
	is(${ $c->[2] }, '', 'a client through transaction pooling had no error');
	$all_true &&= (join(',', split /\n/, ${ $c->[1] }) eq join(',', ('t') x 50));
}
ok($all_true, 'each transaction saw its own insert as its currval');
is($node->safe_psql('postgres',
		'SELECT count(*), count(DISTINCT id) FROM orders'),
	'200|200', '200 rows, 200 distinct ids');
$h->kill_kill;

$node->stop;
done_testing();
