# A sequence used in the transaction that created it (src/increate.c): a
# migration creates a table with a distseq default and seeds it in one
# transaction.  Other sessions cannot see the sequence before the commit;
# after it, they, a clean restart and a crash (-m immediate) all continue
# above every value the creating transaction drew, also for a prepared
# transaction, and never hand one out twice.  A crash before the commit
# leaves nothing.  On a node with peers, windows come only from the
# majority protocol: drawing before the commit is refused there.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my $node = PostgreSQL::Test::Cluster->new('increate');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'distseq'
max_prepared_transactions = 2
));
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
# made before the migration: a node's first windows lock its node row
$node->safe_psql('postgres', "SELECT distseq_create('other')");

# A session kept open across statements
sub session
{
	my ($in, $out, $err) = ('', '', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres') ],
		'<', \$in, '>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return { h => $h, in => \$in, out => \$out, err => \$err };
}

# Run SQL in a session; returns what it printed (errors go to stderr)
sub query
{
	my ($s, $sql) = @_;
	${ $s->{out} } = '';
	${ $s->{err} } = '';
	${ $s->{in} } .= "$sql;\nSELECT 'done';\n";
	$s->{h}->pump until ${ $s->{out} } =~ /^done$/m;
	my $out = ${ $s->{out} };
	$out =~ s/^done\n//m;
	chomp $out;
	return $out;
}

# The values a script prints, without the empty lines of void results
sub values_of
{
	my ($sql) = @_;
	return grep { $_ ne '' } split /\n/, $node->safe_psql('postgres', $sql);
}

# The migration: create, seed, and meanwhile nobody else sees the sequence.
my $mig = session();
query($mig, 'BEGIN');
query($mig, 'CREATE TABLE items (id bigint PRIMARY KEY, v int)');
query($mig, "SELECT distseq_create_for_column('items', 'id')");
my $seeded = query($mig,
	'INSERT INTO items (v) SELECT g FROM generate_series(1, 1000) g;'
	  . ' SELECT max(id) FROM items');
is($seeded, 1000, 'the creating transaction seeds 1000 rows: ids 1 to 1000');

my ($ret, $out, $err) =
  $node->psql('postgres', "SELECT distseq_nextval('items_id')");
like($err, qr/distseq sequence "items_id" does not exist/,
	'another session cannot use the sequence before the commit');

# the refill worker goes on serving others meanwhile
is($node->safe_psql('postgres', "SELECT distseq_nextval('other')"),
	1, 'another sequence is served while the creation is open');

# ROLLBACK TO SAVEPOINT in the creating transaction gives nothing back
query($mig, 'SAVEPOINT s');
my $in_sp = query($mig, "SELECT distseq_nextval('items_id')");
query($mig, 'ROLLBACK TO SAVEPOINT s');
my $after_sp = query($mig, "SELECT distseq_nextval('items_id')");
cmp_ok($after_sp, '>', $in_sp, 'a value drawn in a rolled-back savepoint does not come again');
query($mig, 'COMMIT');
is(${ $mig->{err} }, '', 'the creating transaction commits');

# After the commit, several sessions insert at once
my @sessions = map { session() } 1 .. 3;
query($_, 'INSERT INTO items (v) SELECT -1 FROM generate_series(1, 400)') for @sessions;
query($_, 'INSERT INTO items (v) SELECT -2 FROM generate_series(1, 400)') for @sessions;
$_->{h}->finish for @sessions;
is($node->safe_psql('postgres', 'SELECT min(id) > ' . $after_sp
		  . ', count(*), count(DISTINCT id) FROM items WHERE v < 0'),
	't|2400|2400', 'after the commit, other sessions go on above every value drawn');

# Clean restart right after a creating transaction
my ($last) = values_of(q{
	BEGIN;
	SELECT distseq_create('restarted', block_size => 7);
	SELECT max(distseq_nextval('restarted')) FROM generate_series(1, 250);
	COMMIT;
});
is($last, 250, 'drew 250 values while creating "restarted"');
$node->restart;
my @after = values_of(
	"SELECT distseq_nextval('restarted') FROM generate_series(1, 300)");
is(scalar(grep { $_ <= $last } @after), 0, 'after a clean restart: above every value drawn');

# Crash right after the commit: no refill has ever run for the sequence,
# the commit itself carries the record of what was drawn.
($last) = values_of(q{
	BEGIN;
	SELECT distseq_create('crashed', block_size => 3, window_size => 50,
						  min_open_windows => 1);
	SELECT max(distseq_nextval('crashed')) FROM generate_series(1, 350);
	COMMIT;
});
is($last, 350, 'drew 350 values, beyond the first windows, while creating "crashed"');

# and a prepared transaction that created one
my @prepared = values_of(q{
	BEGIN;
	SELECT distseq_create('prepared');
	SELECT distseq_nextval('prepared') FROM generate_series(1, 10);
	PREPARE TRANSACTION 'creates_prepared';
});
is_deeply(\@prepared, [ 1 .. 10 ], 'drew 10 values in a transaction that is then prepared');

# and one still open at the crash
my $open = session();
query($open, 'BEGIN');
query($open, "SELECT distseq_create('never_committed')");
is(query($open, "SELECT distseq_nextval('never_committed')"), 1,
	'an open transaction draws from the sequence it creates');

$node->stop('immediate');
$open->{h}->kill_kill;
$node->start;

@after = values_of(
	"SELECT distseq_nextval('crashed') FROM generate_series(1, 3000)");
my %seen;
is(scalar(grep { $_ <= $last || $seen{$_}++ } @after), 0,
	'after a crash: above every value drawn, none twice');

($ret, $out, $err) =
  $node->psql('postgres', "SELECT distseq_nextval('prepared')");
like($err, qr/does not exist/, 'the prepared creation is not visible before COMMIT PREPARED');
$node->safe_psql('postgres', "COMMIT PREPARED 'creates_prepared'");
@after = values_of(
	"SELECT distseq_nextval('prepared') FROM generate_series(1, 500)");
is(scalar(grep { $_ <= 10 } @after), 0, 'after COMMIT PREPARED: above the values drawn');

($ret, $out, $err) =
  $node->psql('postgres', "SELECT distseq_nextval('never_committed')");
like($err, qr/does not exist/, 'a creation open at the crash left nothing');
is($node->safe_psql('postgres', 'SELECT count(*) FROM items'), 3400,
	'the committed migration and inserts are all there');
$node->stop;

# A node with a peer: windows come only from the majority protocol
my %peer;
$peer{$_} = peer_node("increate_$_") for qw(a b);
peer_server($peer{a}, 'b', $peer{b});
peer_server($peer{b}, 'a', $peer{a});
$peer{a}->safe_psql('postgres', "SELECT distseq_add_peer('node_b')");
is($peer{a}->safe_psql('postgres',
		'SELECT epoch > 0 AND cardinality(members) = 2 FROM distseq.distseq_node'),
	't', 'node a has a peer');

($ret, $out, $err) = $peer{a}->psql('postgres', q{
	BEGIN;
	SELECT distseq_create('grouped');
	SELECT distseq_nextval('grouped');
});
like($err, qr/distseq sequence "grouped" cannot hand out values in the transaction that created it/,
	'with peers, drawing in the creating transaction is refused');
like($err, qr/HINT:  Commit the transaction that created the sequence first\./,
	'... with a hint');

# a striped sequence there has windows of its own: it may draw at once
my @striped = grep { $_ ne '' } split /\n/, $peer{a}->safe_psql('postgres', q{
	BEGIN;
	SELECT distseq_create('striped', stripes => 2, stripe => 1);
	SELECT distseq_nextval('striped') FROM generate_series(1, 3);
	COMMIT;
});
is_deeply(\@striped, [ 1, 3, 5 ], 'with peers, a striped sequence draws in its creating transaction');
cmp_ok($peer{a}->safe_psql('postgres', "SELECT distseq_nextval('striped')"),
	'>', 5, '... and continues above after the commit');

# once committed, the grouped one gets windows through the protocol
$peer{a}->safe_psql('postgres', "SELECT distseq_create('grouped')");
$peer{b}->safe_psql('postgres', "SELECT distseq_create('grouped')");
cmp_ok($peer{a}->safe_psql('postgres', "SELECT distseq_nextval('grouped')"),
	'>', 0, 'after the commit the sequence with peers hands out values');

done_testing();
