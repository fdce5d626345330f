# Why a refill failed is kept in a ring of the last 64 failures, tagged
# with the entry's index, incarnation and count of failures (pool.c).
# Here 80 sequences each draw from a server of their own that does not
# answer, with 5 entries for all of them: every draw fails, entries are
# taken over all the time (the same index carries sequence after
# sequence), and far more than 64 failures come in while clients wait.
# Each failure a session reports must name its own sequence's server and
# no other, or say that its reason gave way to later ones: a record found
# for the wrong entry or incarnation would show another sequence's reason.
#
# Then the ring wraps for sure under a waiter: its refill fails (its server
# hangs until distseq.remote_timeout) while its backend is stopped, 70
# other sequences fail before it runs again, and it must say that its
# reason gave way, not show one of theirs (nor its own, overwritten).
# (An attack on the ring that found nothing: kept to catch a regression.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $nseq = 80;
my $node = PostgreSQL::Test::Cluster->new('ring');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.max_sequences = 5
distseq.remote_timeout = '3s'
listen_addresses = '127.0.0.1'
distseq.refill_timeout = '30s'
");
$node->start;

# a port nobody listens on: each server refuses at once
my $dead = PostgreSQL::Test::Cluster::get_free_port();
$node->safe_psql(
	'postgres', qq{
	CREATE EXTENSION distseq;
	CREATE TABLE reasons (k int, code text, message text, detail text);
	DO \$\$
	BEGIN
		FOR k IN 1 .. $nseq LOOP
			EXECUTE format('CREATE SERVER srv%s FOREIGN DATA WRAPPER distseq
				OPTIONS (host %L, port %L, dbname %L)', k, '127.0.0.1', '$dead', 'postgres');
			EXECUTE format('CREATE USER MAPPING FOR CURRENT_USER SERVER srv%s
				OPTIONS (user %L)', k, 'postgres');
			PERFORM distseq_create('s' || k, block_size => 5,
				servers => ARRAY['srv' || k]);
		END LOOP;
	END \$\$;
	CREATE PROCEDURE work(n int) LANGUAGE plpgsql AS \$\$
	DECLARE
		k int;
		c text;
		m text;
		d text;
	BEGIN
		FOR i IN 1 .. n LOOP
			k := 1 + floor(random() * $nseq)::int;
			BEGIN
				PERFORM distseq_nextval('s' || k);
				INSERT INTO reasons VALUES (k, 'drawn', NULL, NULL);
			EXCEPTION WHEN OTHERS THEN
				GET STACKED DIAGNOSTICS c = RETURNED_SQLSTATE, m = MESSAGE_TEXT,
					d = PG_EXCEPTION_DETAIL;
				INSERT INTO reasons VALUES (k, c, m, d);
			END;
			COMMIT;
		END LOOP;
	END \$\$;});

my $tmp = PostgreSQL::Test::Utils::tempdir;
PostgreSQL::Test::Utils::append_to_file("$tmp/work.sql", "CALL work(20);\n");
my ($out, $err) = ('', '');
my $ok = IPC::Run::run(
	[
		'pgbench', '-n', '-c', '6', '-j', '6', '-t', '6',
		'-f', "$tmp/work.sql", $node->connstr('postgres')
	],
	'<', '/dev/null', '>', \$out, '2>', \$err,
	IPC::Run::timeout(3 * $PostgreSQL::Test::Utils::timeout_default));
ok($ok, 'six clients drew from failing sequences') or diag($err);

is($node->safe_psql('postgres', "SELECT count(*) FROM reasons WHERE code = 'drawn'"),
	'0', 'no sequence drew a value from nowhere');
diag($node->safe_psql('postgres',
	'SELECT code, count(*) FROM reasons GROUP BY 1 ORDER BY 2 DESC'));

# the refill failures: each names its own server, or gave way
my $failed = "code = '55000' AND message LIKE 'could not refill%'";
cmp_ok($node->safe_psql('postgres', "SELECT count(*) FROM reasons WHERE $failed"),
	'>', 100, 'many refills failed');
is( $node->safe_psql(
		'postgres', qq{
		SELECT count(*) FROM reasons
		WHERE $failed AND message <> format('could not refill distseq sequence "s%s"', k)}),
	'0',
	'every failure names the sequence drawn from');
my $wrong = $node->safe_psql(
	'postgres', qq{
	SELECT k || ': ' || detail FROM reasons
	WHERE $failed
	  AND detail NOT LIKE 'The refill worker failed; its reason gave way%'
	  AND (detail !~ ('"srv' || k || '"')
		   OR regexp_replace(detail, '"srv' || k || '"', '', 'g') ~ '"srv[0-9]+"')
	LIMIT 5});
is($wrong, '', "every reason is its own sequence's: its server's, no other's");
diag($node->safe_psql('postgres',
	"SELECT count(*) || ' reasons gave way' FROM reasons
	 WHERE $failed AND detail LIKE 'The refill worker failed; its reason gave way%'"));
is( $node->safe_psql(
		'postgres',
		"SELECT count(*) FROM reasons WHERE code NOT IN ('55000', '53400', '55P03')"),
	'0',
	'nothing failed but refills, busy entries and waits');

# The wrap under a waiter, of a sequence that draws from a server that
# accepts the connection and never answers (a proxy to this node that
# passes nothing back).  An entry for every sequence now: the waiter's is
# not taken over while it is stopped (it would attach again and ask
# again, and fail afresh).
$node->append_conf('postgresql.conf', "distseq.max_sequences = 100\n");
$node->restart;
my $hang = $node->basedir . '/hang';
PostgreSQL::Test::Utils::append_to_file($hang, '');
my ($proxy, $hung_port) = tcp_proxy($node->port, hang => $hang);
$node->safe_psql(
	'postgres', qq{
	CREATE SERVER hung FOREIGN DATA WRAPPER distseq
		OPTIONS (host '127.0.0.1', port '$hung_port', dbname 'postgres');
	CREATE USER MAPPING FOR CURRENT_USER SERVER hung OPTIONS (user 'postgres');
	SELECT distseq_create('w', block_size => 5, servers => ARRAY['hung']);});

my ($win, $wout, $werr) = ('', '', '');
my $w = IPC::Run::start([ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
	'<', \$win, '>', \$wout, '2>', \$werr,
	IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
$win .= "SELECT pg_backend_pid();\n";
$w->pump until $wout =~ /^(\d+)\n/;
my $pid = $1;
$win .= "SELECT distseq_nextval('w');\n";
$w->pump_nb;

# Stop the waiter while it sleeps on its entry (wait event "Extension"),
# never inside a lock, with its refill pending.
sub state_of
{
	my $stat = slurp_file("/proc/$pid/stat");
	return (split / /, ($stat =~ /\) (.*)/)[0])[0];
}
my $stopped = 0;
for (my $i = 0; $i < 100 && !$stopped; $i++)
{
	usleep(100_000);
	next
	  unless $node->safe_psql('postgres',
		"SELECT refill_pending FROM distseq_pool_status() WHERE seqrel = 'distseq.w'::regclass"
	  ) eq 't';
	kill 'STOP', $pid;
	for (my $j = 0; $j < 500 && state_of() ne 'T'; $j++)
	{
		usleep(10_000);
	}
	$stopped = $node->safe_psql('postgres',
		"SELECT wait_event = 'Extension' FROM pg_stat_activity WHERE pid = $pid") eq 't';
	kill 'CONT', $pid unless $stopped;
}
ok($stopped, 'the waiter is stopped in its sleep, its refill pending');

# its refill fails; then 70 others do
$node->poll_query_until('postgres',
	"SELECT NOT refill_pending FROM distseq_pool_status() WHERE seqrel = 'distseq.w'::regclass")
  or die 'the refill of w did not end';
my ($ret, $o, $e) = $node->psql('postgres',
	join(";\n", map { "SELECT distseq_nextval('s$_')" } (2 .. 71)),
	on_error_stop => 0);
my $others = () = $e =~ /could not refill/g;
is($others, 70, '70 other refills failed meanwhile');
kill 'CONT', $pid;
$win .= "\\q\n";
$w->finish;
like($werr, qr/ERROR:  could not refill distseq sequence "w"\n/,
	'the waiter learns that its refill failed');
like($werr,
	qr/DETAIL:  The refill worker failed; its reason gave way to later failures, see the server log\./,
	'and that its reason gave way, 70 failures later');
unlike($werr, qr/srv\d+/, "and shows no other sequence's reason");

unlike(slurp_file($node->logfile), qr/TRAP|terminated by signal/, 'no crash');
kill 'TERM', $proxy;
waitpid($proxy, 0);
$node->stop;
done_testing();
