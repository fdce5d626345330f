# On a hot standby of a member, every distseq function that writes, or that
# answers a peer in the member's name, fails at once with the read-only
# error PostgreSQL gives there (SQLSTATE 25006): a standby is a read-only
# copy, no member of any group, and never runs the refill worker.  Reading
# the status views keeps working.  A peer whose foreign server points at the
# standby gets the same error through its calls.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

# p and q form a group; p has a streaming hot standby.
my $p = peer_node('node_p');
my $q = peer_node('node_q');
peer_server($p, 'q', $q);
peer_server($q, 'p', $p);
$q->safe_psql('postgres', "SELECT distseq_add_peer('node_p')");
$p->safe_psql('postgres', "SELECT distseq_add_peer('node_q')");
$p->safe_psql('postgres', qq(
	SELECT distseq_create('s', block_size => 5, window_size => 100);
	SELECT count(*) FROM distseq_maintain();
	CREATE TABLE t (id integer);
	SELECT distseq_nextval('s');));

$p->backup('p_backup');
my $standby = PostgreSQL::Test::Cluster->new('node_p_standby');
$standby->init_from_backup($p, 'p_backup', has_streaming => 1);
$standby->start;
$p->wait_for_catchup($standby);
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 't',
	'the standby is in recovery');

sub on_standby
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $standby->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $err;
}

# Refused at once, naming the function.
for my $call (
	[ 'distseq_create()', "SELECT distseq_create('x')" ],
	[ 'distseq_create_for_column()', "SELECT distseq_create_for_column('t', 'id')" ],
	[ 'distseq_drop()', "SELECT distseq_drop('s')" ],
	[ 'distseq_maintain()', 'SELECT * FROM distseq_maintain()' ],
	[ 'distseq_add_peer()', "SELECT distseq_add_peer('node_q')" ],
	[ 'distseq_remove_peer()', "SELECT distseq_remove_peer('node_q')" ],
	[ 'distseq_accept_promotion()', 'SELECT distseq_accept_promotion()' ],
	[ 'distseq_peer_state()', 'SELECT * FROM distseq.distseq_peer_state()' ],
	[ 'distseq_peer_hwm()', "SELECT * FROM distseq.distseq_peer_hwm('s')" ],
	[ 'distseq_peer_cas()', "SELECT distseq.distseq_peer_cas('s', 1, 1, 1, 2)" ],
	[ 'distseq_peer_sequences()', 'SELECT * FROM distseq.distseq_peer_sequences()' ],
	[ 'distseq_peer_create()', "SELECT distseq.distseq_peer_create('x', 5, 100, 1, 1000, 2, 1)" ],
	[ 'distseq_peer_reserve()', "SELECT * FROM distseq.distseq_peer_reserve('s', 10)" ],
	[ 'distseq_peer_epoch_cas()', "SELECT distseq.distseq_peer_epoch_cas(1, 1, 2, 2, '{1}', 1, 1)" ],
	[ 'distseq_peer_join()', "SELECT distseq.distseq_peer_join(2, 2, '{1}', 1, 1)" ],
	[ 'distseq_peer_revert()', 'SELECT distseq.distseq_peer_revert(1, 1)' ],
	[ 'distseq_peer_decided()', 'SELECT distseq.distseq_peer_decided(1, 1, 1)' ],
	[ 'distseq_peer_marks()', 'SELECT * FROM distseq.distseq_peer_marks(1, 1)' ],
	[
		'distseq_peer_activate()',
		"SELECT distseq.distseq_peer_activate(1, 1, 0, 0, '{1}', '{}', '{}', 1)"
	])
{
	my ($fn, $sql) = @$call;
	like(on_standby($sql), qr/ERROR:  25006: cannot execute \Q$fn\E during recovery/,
		"$fn is refused on a standby");
}

# Refused by PostgreSQL itself, as in any read-only transaction.
like(on_standby("SELECT distseq_nextval('s')"),
	qr/ERROR:  25006: cannot execute distseq_nextval\(\) in a read-only transaction/,
	'distseq_nextval() is refused on a standby');
like(on_standby("SELECT distseq_rejoin('s')"),
	qr/ERROR:  25006: cannot execute SELECT in a read-only transaction\nCONTEXT:  SQL function "distseq_rejoin"/,
	'distseq_rejoin() is refused on a standby');

# What only reads works.
is($standby->safe_psql('postgres',
		"SELECT sequence_name, open_windows > 0, window_values_left > 0 FROM distseq_status"),
	's|t|t', 'distseq_status works on a standby');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM distseq_blocks'),
	'0', 'distseq_blocks works on a standby');
is($standby->safe_psql('postgres', 'SELECT server_name, reachable FROM distseq_peers'),
	'node_q|t', 'distseq_peers works on a standby, reaching the other member');
like(on_standby("SELECT distseq_currval('s')"),
	qr/ERROR:  55000: currval of distseq sequence "s" is not yet defined in this session/,
	'distseq_currval() answers as anywhere');
is($standby->safe_psql('postgres',
		"SELECT distseq.distseq_fdw_validator('{host=127.0.0.1}', 'pg_foreign_server'::regclass)"),
	'', 'the wrapper validator works on a standby');

# A peer reaching the standby: joining it, drawing from it, probing it.
peer_server($q, 's', $standby);
my ($ret, $out, $err) = $q->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT distseq_add_peer('node_s')");
like($err,
	qr/ERROR:  25006: distseq peer "node_s": cannot execute distseq_peer_\w+\(\) during recovery/,
	'a peer cannot add the standby');

$q->safe_psql('postgres', "SELECT distseq_create('drawn', servers => ARRAY['node_s'])");
($ret, $out, $err) = $q->psql('postgres',
	"SET distseq.refill_timeout = '60s'; SELECT distseq_nextval('drawn')");
like($err,
	qr/could not refill distseq sequence "drawn".*distseq peer "node_s": cannot execute distseq_peer_\w+\(\) during recovery/s,
	'a sequence cannot draw from the standby');

# The member's server pointed at its standby, as after a failover done
# before the promotion.
my $standby_port = $standby->port;
my $p_port = $p->port;
$q->safe_psql('postgres', "ALTER SERVER node_p OPTIONS (SET port '$standby_port')");
like($q->safe_psql('postgres',
		"SELECT reachable, error FROM distseq_peers WHERE server_name = 'node_p'"),
	qr/^f\|distseq peer "node_p": cannot execute distseq_peer_state\(\) during recovery$/,
	'distseq_peers shows the standby refusing, not the member it copies');
$q->safe_psql('postgres', "ALTER SERVER node_p OPTIONS (SET port '$p_port')");
is($q->safe_psql('postgres',
		"SELECT reachable FROM distseq_peers WHERE server_name = 'node_p'"),
	't', 'the member itself answers');

# The standby still follows its primary.
$p->safe_psql('postgres', "SELECT distseq_create('after')");
$p->wait_for_catchup($standby);
is($standby->safe_psql('postgres',
		"SELECT count(*) FROM distseq_status WHERE sequence_name = 'after'"),
	'1', 'the standby replays what its primary does');

$_->stop for ($standby, $p, $q);
done_testing();
