# DROP DATABASE and distseq's shared state, with two tenant databases owned
# by two ordinary roles.  A drop that fails -- refused to a role that does
# not own the database, or failing after its permission check (a template,
# a database in use) -- must leave the database's worker, entries and
# blocks as they were; a drop that succeeds frees them.  No wait in one
# database may depend on a transaction in another.
#
# distseq.max_sequences = 2 keeps the entry table small, so that an entry
# freed too early is taken at once by another database.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('dropdb');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'\ndistseq.max_sequences = 2\n");
$node->start;

$node->safe_psql('postgres',
	"CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN;
	 CREATE DATABASE dba OWNER alice; CREATE DATABASE dbb OWNER bob;");
for my $db ('dba', 'dbb')
{
	my $seq = $db eq 'dba' ? 'a' : 'v';
	my $owner = $db eq 'dba' ? 'alice' : 'bob';
	$node->safe_psql($db,
		"CREATE EXTENSION distseq;
		 SELECT distseq_create('$seq', block_size => 10, window_size => 100);
		 GRANT USAGE ON SEQUENCE distseq.$seq TO $owner;");
}

# A session of a role in a database; errors do not end it.  A wait for a
# refill lasts as long as a drop runs (the default limit, 10 s, is twice
# that, but a slow machine may need more).
sub session
{
	my ($db, $role) = @_;
	my $s = $node->background_psql($db, on_error_stop => 0,
		extra_params => [ '-U', $role ]);
	$s->query_safe("SET distseq.refill_timeout = '60s'");
	return $s;
}

# n values drawn by a session in one statement; an error fails the test
sub draw
{
	my ($s, $seq, $n) = @_;
	my ($out, $failed) = $s->query(
		"SELECT distseq_nextval('$seq') FROM generate_series(1, $n)");
	if ($failed)
	{
		fail("drawing $n values from $seq: $s->{stderr}");
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

# A statement by a role; returns its error, or '' when it succeeded.
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
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity
		 WHERE backend_type = 'distseq worker' AND datname = '$db'");
}

# The shared state of a database's sequences, pools and blocks, as a
# session in it sees them (a new one could not connect during a drop)
sub state_of
{
	my ($s) = @_;
	return $s->query_safe(
		"SELECT seqrel, generation, pool_start, pool_end, prefetch_start,
				prefetch_end, returned_values, refill_pending, refills,
				values_issued, values_lost
		 FROM distseq_pool_status() ORDER BY seqrel;
		 SELECT pid, sequence_name, block_next, block_end
		 FROM distseq_blocks ORDER BY pid, sequence_name;");
}

# No refill pending in a database, so that its state holds still
sub settle
{
	my ($s) = @_;
	for (1 .. 1000)
	{
		return
		  if $s->query_safe(
			'SELECT count(*) FROM distseq_pool_status() WHERE refill_pending')
		  eq '0';
		select(undef, undef, undef, 0.1);
	}
	die 'a refill never ended';
}

# --- 19.3: a drop in one database does not wait for a transaction in
# another.  alice holds a transaction open that used her sequence without a
# lock (a backend's first use takes the lock, later ones do not); bob's
# drop of dba fails; then bob's sequence is used for the first time and
# dropped.  (A drop that freed dba's entries let v take alice's entry, and
# the drop of v waited for her transaction, found in her block slot.)
my $sd = session('dba', 'alice');
draw($sd, 'a', 1);
$sd->query_safe('BEGIN');
draw($sd, 'a', 1);
like(try_as('bob', 'postgres', 'DROP DATABASE dba'),
	qr/must be owner of database dba/, 'bob may not drop dba');
$node->safe_psql('dbb', "SELECT distseq_nextval('v')");
is( try_as(
		'postgres', 'dbb',
		"SET statement_timeout = '10s'; SELECT distseq_drop('v')"),
	'',
	"a drop in dbb does not wait for alice's transaction in dba");
my @d = draw($sd, 'a', 30);
$sd->query_safe('COMMIT');
ok(rising(@d), "alice's transaction went on with rising values");
$sd->quit;
# (if the drop above failed, v is still there)
$node->safe_psql('dbb',
	"SELECT distseq_drop(sequence_name) FROM distseq.distseq_sequences
	 WHERE sequence_name = 'v';
	 SELECT distseq_create('v', block_size => 10, window_size => 100);
	 GRANT USAGE ON SEQUENCE distseq.v TO bob;");

# --- 19.2: a drop refused to a role that does not own the database stops
# nothing and frees nothing.
my $mon = session('dba', 'postgres');
my $sa = session('dba', 'alice');
my @a = draw($sa, 'a', 5);
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE backend_type = 'distseq worker' AND datname = 'dba'")
  or die 'no worker for dba';
settle($mon);
my $wpid = worker_pid('dba');
my $before = state_of($mon);
like($before, qr/\|a\|/, "alice's session holds a block");
like(try_as('bob', 'postgres', 'DROP DATABASE dba'),
	qr/must be owner of database dba/, 'bob may not drop dba');
is(worker_pid('dba'), $wpid, "dba's worker still runs, the same process");
is(state_of($mon), $before, "dba's pools and blocks are as they were");
push @a, draw($sa, 'a', 30);
ok(rising(@a), "alice's session goes on with rising values");

# --- 17.3: transactions open across failed drops keep drawing: refused to
# bob, and failing for the owner after its permission check because the
# database is in use.  The owner's drop makes dba's worker leave (it is
# connected to dba, and PostgreSQL's own check would count it); the session
# draws while the drop runs, and waits for the worker to be back.
my $sc = session('dba', 'alice');
draw($sc, 'a', 1);
$sc->query_safe('BEGIN');
my @c = draw($sc, 'a', 3);
like(try_as('bob', 'postgres', 'DROP DATABASE dba'),
	qr/must be owner of database dba/, 'bob may not drop dba');
push @c, draw($sc, 'a', 30);

settle($mon);
$before = state_of($mon);
my $dropper = session('postgres', 'alice');
$dropper->query_until(qr/started/, "\\echo started\nDROP DATABASE dba;\n");
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE query LIKE 'DROP DATABASE dba%' AND state = 'active'")
  or die 'the drop did not start';
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity
	 WHERE backend_type = 'distseq worker' AND datname = 'dba'")
  or die "dba's worker did not leave for the drop";
is(state_of($mon), $before,
	"while the owner's drop runs, dba's pools and blocks are as they were");
my $waits = $mon->query_safe(
	"SELECT waits FROM distseq_status WHERE sequence_name = 'a'");
# More than the pool holds (two segments of at most a window each): this
# waits for a refill until the drop has failed.
push @c, draw($sc, 'a', 300);
push @a, draw($sa, 'a', 30);
my ($dout, $dfailed) = $dropper->query('SELECT 1');
like($dropper->{stderr}, qr/database "dba" is being accessed by other users/,
	"the owner's drop failed: dba is in use");
$dropper->quit;
push @c, draw($sc, 'a', 30);
$sc->query_safe('COMMIT');
ok(rising(@c), 'the open transaction drew rising values throughout');
cmp_ok(
	$mon->query_safe(
		"SELECT waits FROM distseq_status WHERE sequence_name = 'a'"),
	'>', $waits,
	'it waited for a refill across the drop');
push @a, draw($sa, 'a', 30);
ok(rising(@a), "alice's other session too");
my %seen;
my @dups = grep { $seen{$_}++ } (@a, @c);
is(scalar(@dups), 0, 'no value was handed out twice in dba');
$node->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE backend_type = 'distseq worker' AND datname = 'dba'")
  or die 'no worker for dba after the failed drop';
$sa->quit;
$sc->quit;
$mon->quit;

# --- A drop that succeeds frees the database's entries and worker: the
# owner's, and a forced one that ends a session inside a transaction.
my $sb = session('dbb', 'bob');
draw($sb, 'v', 1);
$sb->query_safe('BEGIN');
draw($sb, 'v', 1);
is(try_as('alice', 'postgres', 'DROP DATABASE dba'), '', 'alice drops dba');
is(try_as('postgres', 'postgres', 'DROP DATABASE dbb WITH (FORCE)'),
	'', 'dbb is dropped by force while in use');
$sb->quit;
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'distseq worker'")
  or die 'a worker of a dropped database is left';

# --- 17.2: a template copy shares relation and generation with its
# template.  A failed drop of the template must not hand the template's
# entry over to the copy, nor may a rest of the template's block land in
# the copy's pool: two sessions of the copy would get the same values.
$node->safe_psql('postgres', 'CREATE DATABASE tpl');
$node->safe_psql('tpl',
	"CREATE EXTENSION distseq;
	 SELECT distseq_create('s', block_size => 10, window_size => 20);");
$node->safe_psql('postgres',
	'CREATE DATABASE cp TEMPLATE tpl; ALTER DATABASE tpl IS_TEMPLATE true;');
# The copy rejoins (it finds its catalog in another database): it closes
# its windows and starts above them, at 81.  The template's session holds
# 86..90 then.
my $st = session('tpl', 'postgres');
draw($st, 's', 85);
like(try_as('postgres', 'postgres', 'DROP DATABASE tpl'),
	qr/cannot drop a template database/,
	'the drop of the template fails after its permission check');
my $c1 = session('cp', 'postgres');
my @cp = draw($c1, 's', 1);
$st->quit;
$node->poll_query_until('postgres',
	"SELECT count(*) = 0 FROM pg_stat_activity WHERE datname = 'tpl'
	 AND backend_type = 'client backend'")
  or die 'the session of tpl did not end';
my $c2 = session('cp', 'postgres');
push @cp, draw($c2, 's', 5);
push @cp, draw($c1, 's', 9);
%seen = ();
@dups = grep { $seen{$_}++ } @cp;
is(scalar(@dups), 0, 'no value of the copy was handed out twice')
  or diag("values handed out twice: @dups");
$c1->quit;
$c2->quit;

$node->safe_psql('postgres',
	'ALTER DATABASE tpl IS_TEMPLATE false; DROP DATABASE tpl; DROP DATABASE cp;');

# A drop that fails past its point of no return leaves the database invalid
# (PostgreSQL marks it so first): nobody can connect to it, nor can its
# worker, which the postmaster would start again every second for good.
# It gives up after three attempts in a row.
$node->safe_psql('postgres', 'CREATE DATABASE dbi');
$node->safe_psql('dbi',
	"CREATE EXTENSION distseq; SELECT distseq_create('i');
	 SELECT distseq_nextval('i');");
$node->safe_psql('postgres',
	"UPDATE pg_database SET datconnlimit = -2 WHERE datname = 'dbi';
	 SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	 WHERE backend_type = 'distseq worker';");
my $invalid = qr/cannot connect to invalid database "dbi"/;
sub attempts
{
	my @m = slurp_file($node->logfile) =~ /$invalid/g;
	return scalar(@m);
}
for (my $i = 0;
	$i < $PostgreSQL::Test::Utils::timeout_default && attempts() < 3; $i++)
{
	sleep(1);
}
is(attempts(), 3, "the worker of the invalid database tried three times");
# it is started a second after each failure
sleep(3);
is(attempts(), 3, 'and then gave up');
is(try_as('postgres', 'postgres', 'DROP DATABASE dbi'), '',
	'the invalid database is dropped');

# All databases but one are gone, and with them their entries.
$node->safe_psql('postgres', 'CREATE DATABASE dbc');
$node->safe_psql('dbc',
	"CREATE EXTENSION distseq;
	 SELECT distseq_create('x'); SELECT distseq_create('y');");
is( $node->safe_psql(
		'dbc', "SELECT distseq_nextval('x') + distseq_nextval('y')"),
	'2',
	'dropped databases left no entry behind');

$node->stop;
done_testing();
