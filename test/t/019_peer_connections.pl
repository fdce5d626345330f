# Connections to peers belong to a user mapping: a sequence drawing from
# another server reserves there as its own owner's mapped role, never on a
# connection another role made, and a changed or dropped user mapping, a
# changed server or a role that lost superuser is used from the next refill
# on.  A failed connection shows no password, in its error or in any log.
# A connection a dropped mapping left is closed, and one a cancel left busy
# is not used again.
# A role that is not a superuser connects only if the peer asked for its
# password; a role without a mapping of its own uses the PUBLIC one.
# A peer added by a role that may no longer use its server is not reached
# with that role's mapping.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

# a holds the windows; every reservation there is logged with the role
# that runs it and the sequence it is for.
my $a = peer_node('conn_a',
	conf => "log_line_prefix = '%m [%p] user=%u '\n",
	hba => "host all ua,ua2,ub 127.0.0.1/32 scram-sha-256\n");
# (a cancel below must come before a command's timeout)
my $c = peer_node('conn_c', conf => "distseq.remote_timeout = '60s'\n");
my $aport = $a->port;

$a->safe_psql('postgres', q{
	CREATE ROLE ua LOGIN PASSWORD 'pw-ua-1f3';
	CREATE ROLE ua2 LOGIN PASSWORD 'pw-ua2-7c9';
	CREATE ROLE ub LOGIN PASSWORD 'pw-ub-5e2';
	GRANT EXECUTE ON FUNCTION distseq.distseq_peer_reserve(text, bigint), distseq.distseq_peer_state()
		TO ua, ua2, ub;
	SELECT distseq_create('sa', block_size => 10);
	SELECT distseq_create('sb', block_size => 10);
	SELECT distseq_create('ss', block_size => 10);
	SELECT distseq_create('st', block_size => 10);
	SELECT distseq_create('su', block_size => 10);
	SELECT distseq_create('sq', block_size => 10);});

# On c, two roles each own a sequence drawing from a, each with a user
# mapping of its own to a different role there; rs is a superuser whose
# mapping has no password.
$c->safe_psql('postgres', qq{
	CREATE ROLE ra LOGIN;
	CREATE ROLE rb LOGIN;
	CREATE ROLE rs LOGIN SUPERUSER;
	GRANT EXECUTE ON FUNCTION distseq_create TO ra, rb;
	CREATE SERVER node_a FOREIGN DATA WRAPPER distseq
		OPTIONS (host '127.0.0.1', port '$aport', dbname 'postgres');
	GRANT USAGE ON FOREIGN SERVER node_a TO ra, rb, rs;
	CREATE USER MAPPING FOR ra SERVER node_a OPTIONS (user 'ua', password 'pw-ua-1f3');
	CREATE USER MAPPING FOR rb SERVER node_a OPTIONS (user 'ub', password 'pw-ub-5e2');
	CREATE USER MAPPING FOR rs SERVER node_a OPTIONS (user 'postgres');
	SET ROLE ra;
	SELECT distseq_create('sa', block_size => 10, servers => ARRAY['node_a']);
	SET ROLE rb;
	SELECT distseq_create('sb', block_size => 10, servers => ARRAY['node_a']);
	SET ROLE rs;
	SELECT distseq_create('ss', block_size => 10, servers => ARRAY['node_a']);
	RESET ROLE;});

# More values than the largest segment holds twice, so that at least one
# refill runs
sub draw
{
	my ($seq) = @_;
	return $c->psql('postgres',
		"SELECT count(DISTINCT distseq_nextval('$seq')) FROM generate_series(1, 25000)");
}

# The roles that reserved values of a sequence on a, in the log from $from
sub reserved_as
{
	my ($seq, $from) = @_;
	my %roles;
	my $log = substr(slurp_file($a->logfile), $from);
	$roles{$1}++ while $log =~ /user=(\w+) DETAIL:  [Pp]arameters: \$1 = '$seq'/g;
	return join(',', sort keys %roles);
}

my ($ret, $out, $err) = draw('sa');
is($out, '25000', 'sa draws from a');
($ret, $out, $err) = draw('sb');
is($out, '25000', 'sb draws from a');
($ret, $out, $err) = draw('ss');
is($out, '25000', 'ss draws from a');
is(reserved_as('sa', 0), 'ua', "sa's reservations ran as its owner's mapped role");
is(reserved_as('sb', 0), 'ub', "sb's reservations ran as its owner's mapped role, not on sa's connection");
is(reserved_as('ss', 0), 'postgres', "ss's reservations ran as its owner's mapped role");

# A new remote role in the mapping: used from the next refill on.
my $offset = -s $a->logfile;
$c->safe_psql('postgres',
	"ALTER USER MAPPING FOR ra SERVER node_a OPTIONS (SET user 'ua2', SET password 'pw-ua2-7c9')");
($ret, $out, $err) = draw('sa');
is($out, '25000', 'sa draws after its user mapping changed');
is(reserved_as('sa', $offset), 'ua2', 'as the role the changed mapping names');
is(reserved_as('sb', $offset), '', 'sb did not draw meanwhile');

# A wrong password: the next refill fails, and shows no password anywhere.
$c->safe_psql('postgres',
	"ALTER USER MAPPING FOR rb SERVER node_a OPTIONS (SET password 'pw-wrong-8d4')");
($ret, $out, $err) = draw('sb');
isnt($ret, 0, 'with a wrong password in the mapping, sb cannot draw');
like($err, qr/could not connect to distseq peer "node_a"/, 'the error names the server');
unlike($err, qr/pw-/, 'and shows no password');
# (the test's own statements that set passwords are logged as statements)
my @leaks = grep { /pw-/ && !/statement: / }
  split(/\n/, slurp_file($c->logfile)), split(/\n/, slurp_file($a->logfile));
is(scalar(@leaks), 0, 'no log line of either server shows a password') or diag(@leaks);
$c->safe_psql('postgres',
	"ALTER USER MAPPING FOR rb SERVER node_a OPTIONS (SET password 'pw-ub-5e2')");
($ret, $out, $err) = draw('sb');
is($out, '25000', 'with the password put right, sb draws again');

# A changed server: a port where nothing listens fails the next refill.
my $noport = PostgreSQL::Test::Cluster::get_free_port();
$c->safe_psql('postgres', "ALTER SERVER node_a OPTIONS (SET port '$noport')");
($ret, $out, $err) = draw('sb');
like($err, qr/could not connect to distseq peer "node_a"/,
	'a changed server is reached where it now says');
$c->safe_psql('postgres', "ALTER SERVER node_a OPTIONS (SET port '$aport')");
($ret, $out, $err) = draw('sb');
is($out, '25000', 'and again where it said before');

# A server of several hosts, each with its port, as libpq takes them: the
# first one is down, the second answers.
$c->safe_psql('postgres', qq(ALTER SERVER node_a
	OPTIONS (SET host '127.0.0.1,127.0.0.1', SET port '$noport,$aport')));
($ret, $out, $err) = draw('sb');
is($out, '25000', 'a server of two hosts is reached on the one that answers')
  or diag($err);
$c->safe_psql('postgres',
	"ALTER SERVER node_a OPTIONS (SET host '127.0.0.1', SET port '$aport')");

# A role that is no longer a superuser must use a password.
$c->safe_psql('postgres', 'ALTER ROLE rs NOSUPERUSER');
($ret, $out, $err) = draw('ss');
like($err, qr/password is required to reach distseq peer "node_a"/,
	'a role that lost superuser does not keep its connection without a password');

# A dropped user mapping is not used any longer.
$c->safe_psql('postgres', 'DROP USER MAPPING FOR ra SERVER node_a');
($ret, $out, $err) = draw('sa');
like($err, qr/user mapping not found for (?:user )?"ra"/, 'a dropped user mapping is not used');
# and the connection made with it, as ua2, is closed: not kept open on a
# (where it would keep, say, DROP DATABASE from running) until c restarts
ok($a->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE usename = 'ua2'"),
	"the dropped mapping's connection is closed");

# A role without a mapping of its own uses the PUBLIC one, until it has one.
$c->safe_psql('postgres', q{
	CREATE ROLE rq LOGIN;
	GRANT EXECUTE ON FUNCTION distseq_create TO rq;
	GRANT USAGE ON FOREIGN SERVER node_a TO rq;
	CREATE USER MAPPING FOR PUBLIC SERVER node_a OPTIONS (user 'ua', password 'pw-ua-1f3');
	SET ROLE rq;
	SELECT distseq_create('sq', block_size => 10, servers => ARRAY['node_a']);
	RESET ROLE;});
$offset = -s $a->logfile;
($ret, $out, $err) = draw('sq');
is($out, '25000', 'a role without a mapping of its own draws');
is(reserved_as('sq', $offset), 'ua', 'as the PUBLIC mapping says');
$c->safe_psql('postgres',
	"CREATE USER MAPPING FOR rq SERVER node_a OPTIONS (user 'ub', password 'pw-ub-5e2')");
$offset = -s $a->logfile;
($ret, $out, $err) = draw('sq');
is(reserved_as('sq', $offset), 'ub', 'and as its own mapping says once it has one');

# A role that is not a superuser, with a password in its mapping, to a peer
# that does not ask for it (a trusts postgres over TCP, and everyone over
# its Unix socket): the connection would run on this server's own identity,
# and is refused.
my $asock = $a->host;
$c->safe_psql('postgres', qq{
	CREATE ROLE rt LOGIN;
	GRANT EXECUTE ON FUNCTION distseq_create TO rt;
	CREATE SERVER node_a_sock FOREIGN DATA WRAPPER distseq
		OPTIONS (host '$asock', port '$aport', dbname 'postgres');
	GRANT USAGE ON FOREIGN SERVER node_a, node_a_sock TO rt;
	CREATE USER MAPPING FOR rt SERVER node_a OPTIONS (user 'postgres', password 'pw-unasked-2d7');
	CREATE USER MAPPING FOR rt SERVER node_a_sock OPTIONS (user 'postgres', password 'pw-unasked-2d7');
	SET ROLE rt;
	SELECT distseq_create('st', block_size => 10, servers => ARRAY['node_a']);
	SELECT distseq_create('su', block_size => 10, servers => ARRAY['node_a_sock']);
	RESET ROLE;});
($ret, $out, $err) = draw('st');
like($err, qr/password is required to reach distseq peer "node_a"/,
	'a peer that does not ask for the password is refused (TCP, trust)');
($ret, $out, $err) = draw('su');
like($err, qr/password is required to reach distseq peer "node_a_sock"/,
	'a peer that does not ask for the password is refused (Unix socket)');
ok($a->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity
		 WHERE usename = 'postgres' AND application_name = 'distseq'"),
	'and no such connection stays open');

# A refill cancelled while a waits for a lock leaves its command running
# there; the connection is not used again for the next refill.
my ($lin, $lout, $lerr) = ('', '', '');
my $locker = IPC::Run::start([ 'psql', '-XAtq', '-d', $a->connstr('postgres') ],
	\$lin, \$lout, \$lerr);
$lin .= "BEGIN;\nSELECT 'locked' FROM distseq.distseq_sequences WHERE sequence_name = 'sb' FOR UPDATE;\n";
$locker->pump until $lout =~ /locked/;
my ($din, $dout, $derr) = ('', '', '');
my $drawer = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $c->connstr('postgres'), '-c',
	  "SELECT count(DISTINCT distseq_nextval('sb')) FROM generate_series(1, 25000)" ],
	\$din, \$dout, \$derr);
# the caller waits for the refill, and the refill for the lock on a
$c->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity
	 WHERE wait_event_type = 'Extension' AND backend_type = 'client backend'")
  or die 'the caller never waited';
$a->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_stat_activity WHERE usename = 'ub' AND wait_event_type = 'Lock'")
  or die 'the reservation never waited';
$c->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE backend_type = 'distseq worker'");
$drawer->finish;
like($derr, qr/canceling statement due to user request/, 'the cancelled refill fails');
$lin .= "COMMIT;\n\\q\n";
$locker->finish;
# a source whose call ended in a cancel rests; distseq_maintain() ends that
$c->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
($ret, $out, $err) = draw('sb');
is($out, '25000', 'the next refill does not use the connection the cancel left busy')
  or diag($err);

# A peer added by a role that is not a superuser is reached as that role's
# mapping says, only while the role may use the server.
my $d = peer_node('conn_d', hba => "host all ud 127.0.0.1/32 scram-sha-256\n");
my $dport = $d->port;
$d->safe_psql('postgres', "CREATE ROLE ud LOGIN SUPERUSER PASSWORD 'pw-ud-4b8'");
$c->safe_psql('postgres', qq{
	CREATE ROLE rp LOGIN;
	GRANT EXECUTE ON FUNCTION distseq_add_peer(name) TO rp;
	CREATE SERVER node_d FOREIGN DATA WRAPPER distseq
		OPTIONS (host '127.0.0.1', port '$dport', dbname 'postgres');
	GRANT USAGE ON FOREIGN SERVER node_d TO rp;
	CREATE USER MAPPING FOR rp SERVER node_d OPTIONS (user 'ud', password 'pw-ud-4b8');});
($ret, $out, $err) = $c->psql('postgres', "SET ROLE rp; SELECT distseq_add_peer('node_d')");
is($ret, 0, 'a role that may use the server adds a peer') or diag($err);
is($c->safe_psql('postgres', 'SELECT reachable FROM distseq_peers'), 't',
	'the peer is reached with its mapping');
$c->safe_psql('postgres', "SELECT distseq_create('sm', block_size => 10, window_size => 100)");
$c->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
$c->safe_psql('postgres', 'REVOKE USAGE ON FOREIGN SERVER node_d FROM rp');
is($c->safe_psql('postgres', 'SELECT reachable FROM distseq_peers'), 'f',
	'once that role may no longer use the server, its mapping is not used');
like($c->safe_psql('postgres', 'SELECT error FROM distseq_peers'),
	qr/role "rp", which added distseq peer "node_d", may no longer use its server/,
	'and the error says why');
($ret, $out, $err) = $c->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/node_d: role "rp", which added distseq peer "node_d", may no longer use its server/,
	'nor does the agent use it');

$c->stop;
$d->stop;
$a->stop;
done_testing();
