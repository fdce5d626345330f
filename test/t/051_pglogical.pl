# Three servers replicating one table to each other with pglogical, every
# direction (a full mesh, forward_origins '{}'), while each inserts rows
# whose ids come from one distseq sequence shared by the three: no
# replication conflict, and every server ends with the same rows.  A table
# keyed by a native bigserial, replicated the same way, conflicts (the
# check for conflicts is seen to catch them).
# pglogical is Debian's postgresql-15-pglogical: on another major the test
# is skipped.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;
use IPC::Run;

# the pg_config of the installation under test comes first in PATH
my $pkglibdir = `pg_config --pkglibdir`;
chomp $pkglibdir;
plan skip_all => "pglogical is not installed for this PostgreSQL ($pkglibdir)"
  unless -f "$pkglibdir/pglogical.so";

# PostgreSQL's minors of 2026 load only the output plugins listed in
# output_plugin_libraries (older ones have no such setting)
my $allowlist =
  (grep { /^output_plugin_libraries\t/ } `postgres --describe-config`)
  ? "output_plugin_libraries = 'pgoutput, pglogical_output'\n"
  : '';

my @names = qw(a b c);
my %node;
for my $n (@names)
{
	$node{$n} = peer_node("node_$n", conf => q(
shared_preload_libraries = 'pglogical,distseq'
wal_level = logical
track_commit_timestamp = on
max_worker_processes = 16
) . $allowlist);
}

# distseq first: the three form a group (every server has the extension,
# then each adds the other two)
for my $n (@names)
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } @names;
}
for my $n (@names)
{
	$node{$n}->safe_psql('postgres', "SELECT distseq_add_peer('node_$_')")
	  for grep { $_ ne $n } @names;
}
$node{a}->safe_psql('postgres',
	"SELECT distseq_create('orders', block_size => 10, window_size => 1000)");
$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()')
  for @names;

# the same tables on every server (pglogical copies no structure here)
for my $n (@names)
{
	$node{$n}->safe_psql('postgres', q(
		CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT distseq_nextval('orders'),
							 origin text NOT NULL, n int NOT NULL);
		CREATE TABLE native_orders (id bigserial PRIMARY KEY, origin text NOT NULL);
		CREATE EXTENSION pglogical;));
	my $port = $node{$n}->port;
	$node{$n}->safe_psql('postgres', qq(
		SELECT pglogical.create_node(node_name := 'n_$n',
			dsn := 'host=127.0.0.1 port=$port dbname=postgres');
		SELECT pglogical.replication_set_add_table('default', 'orders');
		SELECT pglogical.replication_set_add_table('default', 'native_orders');));
}

# every server subscribes to the other two, taking only their own changes
for my $n (@names)
{
	for my $from (grep { $_ ne $n } @names)
	{
		my $port = $node{$from}->port;
		$node{$n}->safe_psql('postgres', qq(
			SELECT pglogical.create_subscription(
				subscription_name := 'sub_${n}_$from',
				provider_dsn := 'host=127.0.0.1 port=$port dbname=postgres',
				replication_sets := '{default}',
				synchronize_data := false,
				forward_origins := '{}');));
	}
}
for my $n (@names)
{
	$node{$n}->safe_psql('postgres',
		"SELECT pglogical.wait_for_subscription_sync_complete('sub_${n}_$_')")
	  for grep { $_ ne $n } @names;
	is($node{$n}->safe_psql('postgres',
			"SELECT string_agg(status, ',') FROM pglogical.show_subscription_status()"),
		'replicating,replicating', "n_$n replicates from the other two");
}

# Until every server's changes so far reached the other two (their slots
# here confirmed what was written)
sub wait_replicated
{
	for my $n (@names)
	{
		my $lsn = $node{$n}->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
		$node{$n}->poll_query_until('postgres', qq(
			SELECT count(*) = 2 FROM pg_replication_slots
			WHERE slot_type = 'logical' AND confirmed_flush_lsn >= '$lsn'))
		  or die "n_$n: the others did not confirm $lsn";
	}
}

# The three insert at once, 40 transactions of 25 rows each, the ids from
# the shared sequence's default.
my $per_tx = 25;
my $txs = 40;
my @runs;
for my $n (@names)
{
	my $sql = qq(DO \$\$
BEGIN
	FOR t IN 1 .. $txs LOOP
		INSERT INTO orders (origin, n) SELECT '$n', t * 1000 + i FROM generate_series(1, $per_tx) i;
		COMMIT;
	END LOOP;
END \$\$;);
	my ($out, $err) = ('', '');
	push @runs, [ $n, \$err, IPC::Run::start(
		[ 'psql', '-XAtq', '-h', $node{$n}->host, '-p', $node{$n}->port,
			'-d', 'postgres', '-v', 'ON_ERROR_STOP=1', '-c', $sql ],
		'>', \$out, '2>', \$err) ];
}
for my $r (@runs)
{
	my ($n, $err, $h) = @$r;
	ok($h->finish, "n_$n inserted its rows") or diag($$err);
}

my $total = 3 * $per_tx * $txs;
for my $n (@names)
{
	ok($node{$n}->poll_query_until('postgres',
			"SELECT count(*) = $total FROM orders"),
		"n_$n has every server's $total rows");
}
my %contents;
for my $n (@names)
{
	$contents{ $node{$n}->safe_psql('postgres',
			"SELECT count(DISTINCT id), md5(string_agg(id || ':' || origin || ':' || n, ',' ORDER BY id)) FROM orders") }
	  .= $n;
}
is_deeply([ values %contents ], ['abc'], 'the three have the same rows')
  or diag(explain \%contents);
like((keys %contents)[0], qr/^$total\|/, "$total distinct ids");

# The control: rows keyed by a bigserial, inserted on a and b while they
# do not replicate to each other (as during a network cut), conflict once
# they do; the check for conflicts in the logs is seen to catch them.
$node{a}->safe_psql('postgres', "SELECT pglogical.alter_subscription_disable('sub_a_b', true)");
$node{b}->safe_psql('postgres', "SELECT pglogical.alter_subscription_disable('sub_b_a', true)");
for my $n (qw(a b))
{
	$node{$n}->safe_psql('postgres',
		"INSERT INTO native_orders (origin) SELECT '$n' FROM generate_series(1, 3)");
}
$node{a}->safe_psql('postgres', "SELECT pglogical.alter_subscription_enable('sub_a_b', true)");
$node{b}->safe_psql('postgres', "SELECT pglogical.alter_subscription_enable('sub_b_a', true)");
wait_replicated();

my $conflicts_native = 0;
my $conflicts_orders = 0;
for my $n (@names)
{
	my $log = slurp_file($node{$n}->logfile);
	$conflicts_native++ while $log =~ /CONFLICT: remote INSERT on relation public\.native_orders /g;
	$conflicts_orders++ while $log =~ /CONFLICT: [^\n]* on relation public\.orders /g;
	unlike($log, qr/duplicate key value violates unique constraint "orders_pkey"/,
		"n_$n: no duplicate key on orders");
}
is($conflicts_orders, 0, 'no replication conflict on the table keyed by distseq');
ok($conflicts_native > 0, "the bigserial table conflicted ($conflicts_native times)");

$node{$_}->stop for @names;
done_testing();
