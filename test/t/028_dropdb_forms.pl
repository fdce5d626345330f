# Every form of DROP DATABASE that fails before or after its permission
# check, and those that succeed, must leave the other databases alone: their
# worker keeps running (the same process), their sessions keep drawing
# rising values with no error, and their blocks stay as they were.  The
# forms: IF EXISTS of a database that does not exist, inside a transaction
# block, WITH (FORCE) by a role that does not own the database, the dropdb
# program, WITH (FORCE) by the owner when another role's session is
# connected (fails after the check, while the database's worker has left),
# ALTER DATABASE ... RENAME (refused while the worker is connected), and a
# successful drop of another database of the same owner.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dropdb_forms');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'\ndistseq.max_sequences = 3\n");
$node->start;

$node->safe_psql('postgres',
	"CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN;
	 CREATE DATABASE dba OWNER alice; CREATE DATABASE dba2 OWNER alice;
	 CREATE DATABASE dbb OWNER bob;");
for my $db ('dba', 'dba2', 'dbb')
{
	my $owner = $db eq 'dbb' ? 'bob' : 'alice';
	$node->safe_psql($db,
		"CREATE EXTENSION distseq;
		 SELECT distseq_create('s', block_size => 10, window_size => 100);
		 GRANT USAGE ON SEQUENCE distseq.s TO $owner;");
}

sub session
{
	my ($db, $role) = @_;
	my $s = $node->background_psql($db, on_error_stop => 0,
		extra_params => [ '-U', $role ]);
	$s->query_safe("SET distseq.refill_timeout = '60s'");
	return $s;
}

sub draw
{
	my ($s, $n) = @_;
	my ($out, $failed) = $s->query(
		"SELECT distseq_nextval('s') FROM generate_series(1, $n)");
	if ($failed)
	{
		fail("drawing $n values: $s->{stderr}");
		$s->{stderr} = '';
		return ();
	}
	return split /\n/, $out;
}

sub rising
{
	my @v = @_;
	for my $i (1 .. $#v)
	{
		return 0 if $v[$i] <= $v[ $i - 1 ];
	}
	return 1;
}

sub try_as
{
	my ($role, $db, $sql) = @_;
	my ($ret, $out, $err) =
	  $node->psql($db, $sql, extra_params => [ '-U', $role ]);
	return $ret == 0 ? '' : $err;
}

sub worker_pid
{
	my ($db) = @_;
	my $pid;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity
		 WHERE backend_type = 'distseq worker' AND datname = '$db'")
	  or die "no worker for $db";
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity
		 WHERE backend_type = 'distseq worker' AND datname = '$db'");
}

sub blocks_of
{
	my ($s) = @_;
	return $s->query_safe(
		'SELECT pid, block_next, block_end FROM distseq_blocks ORDER BY pid');
}

# bob's session in dbb, inside a transaction, is the victim throughout
my $sb = session('dbb', 'bob');
my @b = draw($sb, 1);
$sb->query_safe('BEGIN');
push @b, draw($sb, 3);
my $wb = worker_pid('dbb');
my $blocks = blocks_of($sb);

# a session of alice in dba, and another role's session there
my $sa = session('dba', 'alice');
my @a = draw($sa, 5);
my $wa = worker_pid('dba');
my $other = session('dba', 'bob');

# forms that fail before the permission check, or are refused there
like(try_as('alice', 'postgres', 'DROP DATABASE IF EXISTS nosuchdb'),
	qr/^$|does not exist/, 'IF EXISTS of a database that does not exist');
like(try_as('alice', 'postgres', 'BEGIN; DROP DATABASE dba; COMMIT'),
	qr/cannot run inside a transaction block/,
	'DROP DATABASE refused in a transaction block');
like(try_as('alice', 'postgres', 'DROP DATABASE dbb WITH (FORCE)'),
	qr/must be owner of database dbb/,
	'WITH (FORCE) by a role that does not own the database');
my ($ret, $out, $err) = ('', '', '');
my @cmd = ('dropdb', '-U', 'alice', '-h', $node->host, '-p', $node->port, 'dbb');
$ret = IPC::Run::run(\@cmd, '>', \$out, '2>', \$err);
ok(!$ret, 'the dropdb program of a role that does not own the database fails');
like($err, qr/must be owner of database dbb/, '... as not the owner');
like(try_as('postgres', 'dba2', 'ALTER DATABASE dba RENAME TO dbx'),
	qr/is being accessed by other users/,
	'ALTER DATABASE RENAME is refused while dba is in use');
is(worker_pid('dba'), $wa, "dba's worker was not disturbed by them");

# WITH (FORCE) by the owner while bob's session is connected to dba: the
# permission to end it fails after the drop's own check, so dba's worker
# has left and comes back.  alice's transaction open across it draws on
# from the same entries (a new transaction would find new ones).
$sa->query_safe('BEGIN');
push @a, draw($sa, 3);
like(try_as('alice', 'postgres', 'DROP DATABASE dba WITH (FORCE)'),
	qr/permission denied to terminate process|must be a member of the role/,
	"the owner's forced drop cannot end another role's session");
push @a, draw($sa, 30);
$sa->query_safe('COMMIT');
ok(rising(@a), "dba's session draws on with rising values");
$other->quit;

# alice drops her other database, which has a worker too
my $sa2 = session('dba2', 'alice');
draw($sa2, 3);
worker_pid('dba2');
$sa2->quit;
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity
	 WHERE datname = 'dba2' AND backend_type = 'client backend'")
  or die 'the session of dba2 did not end';
is(try_as('alice', 'postgres', 'DROP DATABASE dba2'), '',
	'alice drops dba2');

is(worker_pid('dbb'), $wb, "dbb's worker is the same process throughout");
is(blocks_of($sb), $blocks, "bob's block is as it was");
push @b, draw($sb, 300);
$sb->query_safe('COMMIT');
ok(rising(@b), "bob's transaction drew rising values throughout");
push @a, draw($sa, 30);
my %seen;
my @dups = grep { $seen{$_}++ } @a;
is(scalar(@dups), 0, 'no value of dba was handed out twice');
ok(rising(@a), "dba's session too");

$sa->quit;
$sb->quit;
$node->stop;
done_testing();
