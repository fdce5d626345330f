# The README's *Several servers, step by step*, run as a user would with
# psql: the order of the set-up steps, the statements distseq_add_peer
# cannot share a psql -c with, and why a group of two wants a third member
# (a witness) before one of them goes down.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;
use IPC::Run;

my %node;
$node{$_} = peer_node("node_$_", conf => "distseq.refill_timeout = '5s'\n")
  for qw(a b c);
# c is a server where the extension is not created yet
$node{c}->safe_psql('postgres', 'DROP EXTENSION distseq');

# psql with the given arguments on $n, as a user runs it
sub run_psql
{
	my ($n, @args) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ 'psql', '-XAtq', '-h', $node{$n}->host, '-p', $node{$n}->port,
			'-d', 'postgres', '-v', 'ON_ERROR_STOP=1', @args ],
		'>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

sub server_sql
{
	my ($to) = @_;
	my $port = $node{$to}->port;
	return "CREATE SERVER node_$to FOREIGN DATA WRAPPER distseq"
	  . " OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres');"
	  . " CREATE USER MAPPING FOR CURRENT_USER SERVER node_$to OPTIONS (user 'postgres');";
}

sub members
{
	my ($n) = @_;
	return $node{$n}->safe_psql('postgres',
		'SELECT cardinality(members) FROM distseq.distseq_node');
}

# One psql -c of several statements is one transaction (an implicit
# transaction block): distseq_add_peer refuses to run in it, and the
# statements before it are rolled back with it.
my ($ret, $out, $err) =
  run_psql('a', '-c', server_sql('b') . " SELECT distseq_add_peer('node_b');");
isnt($ret, 0, 'psql -c "CREATE SERVER ...; SELECT distseq_add_peer(...)" fails');
like($err, qr/distseq_add_peer\(\) cannot run inside a transaction block/,
	'distseq_add_peer cannot run inside a transaction block');
is($node{a}->safe_psql('postgres',
		"SELECT count(*) FROM pg_foreign_server WHERE srvname = 'node_b'"),
	'0', 'and the CREATE SERVER before it was rolled back');

# each -c is a transaction of its own: this works
($ret, $out, $err) =
  run_psql('a', '-c', server_sql('b'), '-c', "SELECT distseq_add_peer('node_b')");
is($ret, 0, 'psql -c "CREATE SERVER ..." -c "SELECT distseq_add_peer(...)" works')
  or diag($err);
# so does a file for psql -f (each statement its own transaction)
my $file = $node{b}->basedir . '/add_a.sql';
open my $fh, '>', $file or die;
print $fh server_sql('a') . "\nSELECT distseq_add_peer('node_a');\n";
close $fh;
($ret, $out, $err) = run_psql('b', '-f', $file);
is($ret, 0, 'psql -f of the same statements works') or diag($err);
is(members('a') . members('b'), '22', 'a and b are a group of two');

# A server without the extension cannot be added (nor name its peers: the
# foreign-data wrapper is the extension's).
($ret, $out, $err) =
  run_psql('a', '-c', server_sql('c'), '-c', "SELECT distseq_add_peer('node_c')");
isnt($ret, 0, 'adding a server where CREATE EXTENSION distseq was not run fails');
note($err);
is(members('a') . members('b'), '22', 'the group is as it was');
($ret, $out, $err) = run_psql('c', '-c', server_sql('a'));
like($err, qr/foreign-data wrapper "distseq" does not exist/,
	'nor can that server name its peers yet');

# The two-server trap: with b down, a is no majority of two.  It serves the
# windows it has open, and then cannot open any more.
$node{a}->safe_psql('postgres',
	"SELECT distseq_create('orders', block_size => 10, window_size => 100, min_open_windows => 2)");
$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()') for qw(a b);
$node{b}->stop;
($ret, $out, $err) = $node{a}->psql('postgres',
	"SELECT count(distseq_nextval('orders')) FROM generate_series(1, 1000)");
isnt($ret, 0, 'a group of two with one down: the survivor runs out of windows');
like($err, qr/could not reach a majority of the 2 members/,
	'because it cannot reach a majority of the two');
$node{b}->start;

# The same with a third member, which does nothing else (a witness): any
# one may be down.
$node{c}->safe_psql('postgres', 'CREATE EXTENSION distseq');
($ret, $out, $err) = run_psql('c', '-c', server_sql('a') . server_sql('b'));
is($ret, 0, 'after CREATE EXTENSION, c names its peers') or diag($err);
# a has a server for c from above; b names c in the same call, by two -c
for my $step ([ 'a', 'c', '' ], [ 'b', 'c', server_sql('c') ],
	[ 'c', 'a', '' ], [ 'c', 'b', '' ])
{
	my ($on, $to, $create) = @$step;
	($ret, $out, $err) = run_psql($on, ($create ? ('-c', $create) : ()),
		'-c', "SELECT distseq_add_peer('node_$to')");
	is($ret, 0, "$on adds $to") or diag($err);
}
is(members('a') . members('b') . members('c'), '333', 'a group of three');
$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()') for qw(a b c);
$node{b}->stop;
is($node{a}->safe_psql('postgres',
		"SELECT count(DISTINCT distseq_nextval('orders')) FROM generate_series(1, 1000)"),
	'1000', 'with b down, a opens windows with the witness c');

$node{$_}->stop for qw(a c);
done_testing();
