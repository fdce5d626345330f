# A drop that forgets a sequence itself (an internal deletion, or any drop
# under session_replication_role = replica: distseq_ownedby_drop) racing a
# reservation that closes a window and merges the closed windows below it
# (issue 16).  Every reservation and write-back locks the sequence's row
# before its windows; the drop must too.  Deleting the windows first, it
# took the closed rows the merge widens or deletes and then waited for the
# window the reservation holds: a deadlock, one of the two failing.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('drop_merge');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
$node->safe_psql('postgres',
	"SELECT distseq_create('t', block_size => 5, window_size => 10, min_open_windows => 2)");
# a reservation for a server that draws from this one, as its libpq
# session makes it: three windows closed and merged into one row below
# the open one, which is written last
$node->safe_psql('postgres', "SELECT distseq.distseq_peer_reserve('t', 10)") for 1 .. 3;
$node->safe_psql('postgres', "SELECT distseq.distseq_peer_reserve('t', 1)");
is($node->safe_psql('postgres',
		"SELECT count(*) FILTER (WHERE next_hi = window_end) || '|' || count(*)
		 FROM distseq.distseq_windows WHERE sequence_name = 't'"),
	'1|3', 'one merged closed row below two open windows');

# The reservation takes from the open window, holds it, then closes it
my ($rout, $rerr) = ('', '');
my $r = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'),
	  '-c', "BEGIN; SELECT distseq.distseq_peer_reserve('t', 1); SELECT pg_sleep(3);"
	  . " SELECT distseq.distseq_peer_reserve('t', 100); COMMIT;" ],
	'<', '/dev/null', '>', \$rout, '2>', \$rerr,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
sleep 1;
my ($ret, $out, $err) = $node->psql('postgres',
	"SET session_replication_role = replica; SELECT distseq_drop('t');");
my $rok = eval { $r->finish; };
is($err, '', 'the drop went through');
ok($rok && $r->result == 0, 'the reservation went through')
  or diag($rerr);
is($node->safe_psql('postgres',
		"SELECT (SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 't')
			  + (SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 't')"),
	'0', 'the sequence is forgotten');
$node->stop;
done_testing();
