# Answers from peers are checked before use.  A hostile or broken peer
# whose distseq_peer_* functions (same names and argument types, in
# distseq's schema there) answer with no row, NULLs, other columns,
# text that is no number or numbers out of range, must not crash the node
# that draws from it or has it as a member, must be named in a clear
# error, and must not have any value of a bad answer handed out.  And a
# role on the peer that may create in distseq's schema there cannot get its
# own function called in place of distseq's.  What a peer says reaches
# errors and views as valid text, with any format characters as they are.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $evil = peer_node('hostile_evil');
my $c = peer_node('hostile_c');
peer_server($c, 'evil', $evil);

# evil2, a second database there, is the member of c's group (below)
$evil->safe_psql('postgres', 'CREATE DATABASE evil2');
$evil->safe_psql('evil2', 'CREATE EXTENSION distseq');
my $port = $evil->port;
$c->safe_psql('postgres', qq{
	CREATE SERVER node_evil2 FOREIGN DATA WRAPPER distseq
		OPTIONS (host '127.0.0.1', port '$port', dbname 'evil2');
	CREATE USER MAPPING FOR CURRENT_USER SERVER node_evil2 OPTIONS (user 'postgres');});

my $c_fn = q{LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp};
my %sig = (
	reserve => 'distseq_peer_reserve(text, bigint)',
	state => 'distseq_peer_state()',
	hwm => 'distseq_peer_hwm(text)',
	cas => 'distseq_peer_cas(text, bigint, bigint, bigint, bigint)');
my %real = (
	reserve => q{CREATE FUNCTION distseq_peer_reserve(sequence_name text, count bigint,
		OUT lo bigint, OUT hi bigint)
		AS '$libdir/distseq', 'distseq_peer_reserve'},
	state => q{CREATE FUNCTION distseq_peer_state(OUT node_id bigint, OUT epoch bigint,
		OUT epoch_id bigint, OUT members bigint[], OUT pending boolean)
		AS '$libdir/distseq', 'distseq_peer_state'},
	hwm => q{CREATE FUNCTION distseq_peer_hwm(sequence_name text, OUT hwm bigint,
		OUT epoch bigint, OUT epoch_id bigint)
		AS '$libdir/distseq', 'distseq_peer_hwm'},
	cas => q{CREATE FUNCTION distseq_peer_cas(sequence_name text, epoch bigint,
		epoch_id bigint, expected bigint, new_hwm bigint) RETURNS boolean
		AS '$libdir/distseq', 'distseq_peer_cas'});

# Replace a peer function of database $db on evil by $def (SQL, "real" for
# the extension's own).  The replacement is made a member of the extension,
# in schema distseq where the functions peers call live from 1.5 on, as a
# peer of another build would have it.
sub replace
{
	my ($db, $fn, $def) = @_;
	my $in_distseq = 'SET search_path = distseq, pg_catalog;';

	$def = "$real{$fn} $c_fn" if $def eq 'real';
	$evil->safe_psql($db, "$in_distseq
		ALTER EXTENSION distseq DROP FUNCTION $sig{$fn};
		DROP FUNCTION $sig{$fn};
		$def;
		ALTER EXTENSION distseq ADD FUNCTION $sig{$fn};");
}

# $sql on c fails with an error that matches $pattern, and c is still up
sub refused
{
	my ($sql, $what, $pattern) = @_;
	my ($ret, $out, $err) = $c->psql('postgres', $sql);
	isnt($ret, 0, "$what: refused") or diag("returned: $out");
	like($err, $pattern, "$what: the error names the peer and why");
	($ret, $out, $err) = $c->psql('postgres', 'SELECT 1');
	is($out, '1', "$what: the server is still up");
}

# A sequence drawing from evil: every bad answer to its reservation
# fails the refill, and no value is handed out.
$evil->safe_psql('postgres', "SELECT distseq_create('hs', block_size => 10)");
$c->safe_psql('postgres',
	"SELECT distseq_create('hs', block_size => 10, servers => ARRAY['node_evil'])");
my $draw = "SELECT distseq_nextval('hs')";
my $bad = qr/distseq peer "node_evil" gave an unexpected answer/;
my $sig_reserve = 'sequence_name text, count bigint';

replace('postgres', 'reserve', "CREATE FUNCTION distseq_peer_reserve($sig_reserve,
	OUT lo bigint, OUT hi bigint) RETURNS SETOF record
	LANGUAGE sql AS 'SELECT 1::bigint, 50::bigint WHERE false'");
refused($draw, 'a reservation with no row', $bad);
replace('postgres', 'reserve', "CREATE FUNCTION distseq_peer_reserve($sig_reserve,
	OUT lo bigint, OUT hi bigint) LANGUAGE sql AS 'SELECT NULL::bigint, NULL::bigint'");
refused($draw, 'a reservation of NULLs', $bad);
replace('postgres', 'reserve', "CREATE FUNCTION distseq_peer_reserve($sig_reserve,
	OUT lo bigint) LANGUAGE sql AS 'SELECT 12::bigint'");
refused($draw, 'a reservation with a column missing',
	qr/distseq peer "node_evil": column r\.hi does not exist/);
replace('postgres', 'reserve', "CREATE FUNCTION distseq_peer_reserve($sig_reserve,
	OUT lo text, OUT hi text) LANGUAGE sql AS 'SELECT ''12abc''::text, ''50''::text'");
refused($draw, 'a reservation that is no number', $bad);
replace('postgres', 'reserve', "CREATE FUNCTION distseq_peer_reserve($sig_reserve,
	OUT lo numeric, OUT hi numeric)
	LANGUAGE sql AS 'SELECT 12::numeric, 99999999999999999999::numeric'");
refused($draw, 'a reservation past the bigint range', $bad);
replace('postgres', 'reserve', "CREATE FUNCTION distseq_peer_reserve($sig_reserve,
	OUT lo numeric, OUT hi numeric)
	LANGUAGE sql AS 'SELECT -99999999999999999999::numeric, 5::numeric'");
refused($draw, 'a reservation below the bigint range', $bad);
replace('postgres', 'reserve', "CREATE FUNCTION distseq_peer_reserve($sig_reserve,
	OUT lo bigint, OUT hi bigint)
	LANGUAGE sql AS 'SELECT -9223372036854775807::bigint, 5::bigint'");
refused($draw, 'a reservation wider than the bigint range',
	qr/distseq peer "node_evil" returned values -9223372036854775807 to 4 for sequence "hs"/);
replace('postgres', 'reserve', "CREATE FUNCTION distseq_peer_reserve($sig_reserve,
	OUT lo bigint, OUT hi bigint)
	LANGUAGE sql AS 'SELECT -20::bigint, -10::bigint'");
refused($draw, 'a reservation below the start of the sequence',
	qr/distseq peer "node_evil" returned values -20 to -11 for sequence "hs", outside what was asked/);
replace('postgres', 'reserve', 'real');

my $sig_state = 'OUT node_id bigint, OUT epoch bigint, OUT epoch_id bigint';
replace('postgres', 'state', "CREATE FUNCTION distseq_peer_state($sig_state,
	OUT members bigint[], OUT pending boolean) RETURNS SETOF record
	LANGUAGE sql AS 'SELECT 1::bigint, 0::bigint, 0::bigint, ARRAY[1::bigint], false WHERE false'");
refused($draw, 'a node state with no row', $bad);
replace('postgres', 'state', "CREATE FUNCTION distseq_peer_state($sig_state,
	OUT members text, OUT pending boolean)
	LANGUAGE sql AS 'SELECT 1::bigint, 0::bigint, 0::bigint, ''{1,x}''::text, false'");
refused($draw, 'members that are no numbers', $bad);
replace('postgres', 'state', "CREATE FUNCTION distseq_peer_state($sig_state,
	OUT members bigint[], OUT pending boolean)
	LANGUAGE sql AS 'SELECT NULL::bigint, 0::bigint, 0::bigint, NULL::bigint[], false'");
refused($draw, 'a node state of NULLs', $bad);
replace('postgres', 'state', 'real');
like($c->safe_psql('postgres', $draw), qr/^\d+$/, 'with sane answers again, c draws from evil');

# A role there that may create in distseq's schema adds an overload that
# untyped parameters would resolve to (a text argument beats bigint): the
# SQL c sends names the types, so the overload never runs.
$evil->safe_psql('postgres', q{
	CREATE ROLE mallory;
	GRANT CREATE ON SCHEMA public TO mallory;
	SET ROLE mallory;
	CREATE TABLE public.mallory_calls (who text);
	GRANT INSERT ON public.mallory_calls TO PUBLIC;
	CREATE FUNCTION public.distseq_peer_reserve(sequence_name text, count text,
		OUT lo bigint, OUT hi bigint) LANGUAGE sql
		AS $$ INSERT INTO public.mallory_calls SELECT session_user;
		      SELECT 1::bigint, 3::bigint $$;});
my ($ret, $out, $err) = $c->psql('postgres',
	"SELECT count(DISTINCT distseq_nextval('hs')) FROM generate_series(1, 1000)");
is($out, '1000', 'c draws from evil with the overload there');
is($evil->safe_psql('postgres', 'SELECT count(*) FROM public.mallory_calls'), '0',
	'the overload never ran');
$evil->safe_psql('postgres',
	'DROP FUNCTION public.distseq_peer_reserve(text, text); DROP TABLE public.mallory_calls');

# Adding a peer that answers badly.
$bad = qr/distseq peer "node_evil2" gave an unexpected answer/;
replace('evil2', 'state', "CREATE FUNCTION distseq_peer_state($sig_state,
	OUT members bigint[], OUT pending boolean) RETURNS SETOF record
	LANGUAGE sql AS 'SELECT 1::bigint, 0::bigint, 0::bigint, ARRAY[1::bigint], false WHERE false'");
refused("SELECT distseq_add_peer('node_evil2')", 'adding a peer with no node state', $bad);
replace('evil2', 'state', "CREATE FUNCTION distseq_peer_state(OUT node_id text, OUT epoch bigint,
	OUT epoch_id bigint, OUT members bigint[], OUT pending boolean)
	LANGUAGE sql AS 'SELECT ''node''::text, 0::bigint, 0::bigint, ARRAY[1::bigint], false'");
refused("SELECT distseq_add_peer('node_evil2')", 'adding a peer whose node id is no number', $bad);
# an error there comes with its SQLSTATE, detail and hint
replace('evil2', 'state', "CREATE FUNCTION distseq_peer_state($sig_state,
	OUT members bigint[], OUT pending boolean) LANGUAGE plpgsql AS \$\$
	BEGIN RAISE EXCEPTION 'no state here' USING ERRCODE = '22023',
		DETAIL = 'A detail from the peer.', HINT = 'A hint from the peer.'; END \$\$");
($ret, $out, $err) = $c->psql('postgres',
	"\\set VERBOSITY verbose\nSELECT distseq_add_peer('node_evil2')");
like($err, qr/ERROR:  22023: distseq peer "node_evil2": no state here/,
	"a peer's error: its SQLSTATE and message, naming the peer");
like($err, qr/DETAIL:  A detail from the peer\.\nHINT:  A hint from the peer\./,
	'with its detail and hint');
replace('evil2', 'state', 'real');
$c->safe_psql('postgres', "SELECT distseq_add_peer('node_evil2')");
$c->safe_psql('postgres',
	"SELECT distseq_create('ms', block_size => 10, window_size => 100)");
$c->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
is($c->safe_psql('postgres', "SELECT open_windows FROM distseq_status WHERE sequence_name = 'ms'"),
	'2', 'c and evil2 are a group of two that opens windows');

# A member that answers badly: the agent counts it as unreachable.
my $maintain = 'SELECT * FROM distseq_maintain()';
replace('evil2', 'state', "CREATE FUNCTION distseq_peer_state($sig_state,
	OUT members bigint[], OUT pending boolean) RETURNS SETOF record
	LANGUAGE sql AS 'SELECT 1::bigint, 0::bigint, 0::bigint, ARRAY[1::bigint], false WHERE false'");
refused($maintain, 'the agent, with a member without node state',
	qr/could not reach a majority.*node_evil2: distseq peer "node_evil2" gave an unexpected answer/s);
is($c->safe_psql('postgres', 'SELECT reachable FROM distseq_peers'), 'f',
	'distseq_peers shows that member as not reachable');
like($c->safe_psql('postgres', 'SELECT error FROM distseq_peers'), $bad, 'and why');
replace('evil2', 'state', 'real');

my $sig_hwm = 'sequence_name text, OUT epoch bigint, OUT epoch_id bigint';
replace('evil2', 'hwm', "CREATE FUNCTION distseq_peer_hwm($sig_hwm, OUT hwm text)
	LANGUAGE sql AS 'SELECT 0::bigint, 0::bigint, ''abc''::text'");
refused($maintain, 'the agent, with a mark that is no number', $bad);
replace('evil2', 'hwm', "CREATE FUNCTION distseq_peer_hwm($sig_hwm, OUT hwm numeric)
	LANGUAGE sql AS 'SELECT 0::bigint, 0::bigint, 1e30::numeric'");
refused($maintain, 'the agent, with a mark past the bigint range', $bad);
replace('evil2', 'hwm', 'real');

replace('evil2', 'cas', "CREATE FUNCTION distseq_peer_cas(sequence_name text, epoch bigint,
	epoch_id bigint, expected bigint, new_hwm bigint) RETURNS boolean
	LANGUAGE sql AS 'SELECT NULL::boolean'");
$c->safe_psql('postgres', "SELECT distseq_create('mc', block_size => 10, window_size => 100)");
refused($maintain, 'the agent, with a compare-and-set that answers NULL',
	qr/could not reach a majority.*node_evil2/s);
is($c->safe_psql('postgres', "SELECT open_windows FROM distseq_status WHERE sequence_name = 'mc'"),
	'0', 'no window was opened on that answer');
replace('evil2', 'cas', 'real');
$c->safe_psql('postgres', $maintain);
is($c->safe_psql('postgres', "SELECT open_windows FROM distseq_status WHERE sequence_name = 'mc'"),
	'2', 'with sane answers again, the agent opens windows');

# What a peer says is kept as valid text: a WARNING longer than c keeps,
# of two-byte characters, is cut between characters (convert_from checks
# the text), the cut marked; format characters stay as they are.
my $valid = q{SELECT convert_from(convert_to(error, 'UTF8'), 'UTF8') FROM distseq_peers};
$evil->safe_psql('evil2', q{CREATE FUNCTION public.real_state(OUT node_id bigint,
	OUT epoch bigint, OUT epoch_id bigint, OUT members bigint[], OUT pending boolean)
	AS '$libdir/distseq', 'distseq_peer_state'
	LANGUAGE C STRICT SECURITY DEFINER SET search_path = pg_catalog, pg_temp});
replace('evil2', 'state', "CREATE FUNCTION distseq_peer_state($sig_state,
	OUT members bigint[], OUT pending boolean) LANGUAGE plpgsql AS \$\$
	BEGIN RAISE WARNING '%', repeat(U&'\\00E9', 200);
	SELECT * INTO node_id, epoch, epoch_id, members, pending FROM public.real_state(); END \$\$");
($ret, $out, $err) = $c->psql('postgres', $valid);
like($out, qr/^distseq peer "node_evil2" warned: (\x{c3}\x{a9}){100,}\.\.\.$/,
	"a long WARNING of a peer, cut, is valid text") or diag($err);
replace('evil2', 'state', "CREATE FUNCTION distseq_peer_state($sig_state,
	OUT members bigint[], OUT pending boolean) LANGUAGE plpgsql AS \$\$
	BEGIN RAISE EXCEPTION USING MESSAGE = 'bad %s%n%x', DETAIL = 'detail %s%n',
		HINT = 'hint %s%n'; END \$\$");
($ret, $out, $err) = $c->psql('postgres', $valid);
is($out, 'distseq peer "node_evil2": bad %s%n%x',
	"a peer's error with format characters shows them as they are") or diag($err);
($ret, $out, $err) = $c->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/node_evil2: distseq peer "node_evil2": bad %s%n%x/, "the agent's error too");
($ret, $out, $err) = $c->psql('postgres', 'SELECT 1');
is($out, '1', 'c is still up');
replace('evil2', 'state', 'real');

unlike(slurp_file($c->logfile), qr/terminated by signal/, 'no process of c crashed');
$c->stop;
$evil->stop;
done_testing();
