# pg_dump of a database in use, restored elsewhere: the restored sequences
# continue above every value the source handed out, and the sequences a
# column owns are still owned by it.  Sequence w has small windows, closed
# (and merged into one row) while the dump runs and after it: its rows
# stay bounded, and a restore of the older dump continues above every value
# drawn before the dump began.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use List::Util qw(max min);

my $src = PostgreSQL::Test::Cluster->new('src');
$src->init;
$src->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$src->start;
$src->safe_psql('postgres', 'CREATE DATABASE app; CREATE ROLE billing');
$src->safe_psql('app',
	"CREATE EXTENSION distseq;
	 SELECT distseq_create('s', block_size => 10);
	 SELECT distseq_create('t', block_size => 3, window_size => 50000, max_value => 2147483647);
	 SELECT distseq_create('w', block_size => 1, window_size => 100);
	 CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT distseq_nextval('s'), v text);");
# Owned by a column: one that distseq_create_for_column() made the column's
# default, one of distseq_create(owned_by), in a schema and of a role of
# their own (pg_dump hands the sequence to the table's owner before it
# links them).
$src->safe_psql('app',
	"CREATE SCHEMA billing AUTHORIZATION billing;
	 CREATE TABLE billing.items (id bigint PRIMARY KEY, v text);
	 CREATE TABLE billing.notes (note_id bigint);
	 ALTER TABLE billing.items OWNER TO billing;
	 ALTER TABLE billing.notes OWNER TO billing;
	 SELECT distseq_create_for_column('billing.items', 'id', block_size => 4);
	 SELECT distseq_create('notes_id', block_size => 4, owned_by => 'billing.notes.note_id');
	 INSERT INTO billing.items (v) SELECT 'x' FROM generate_series(1, 30);
	 INSERT INTO billing.notes SELECT distseq_nextval('notes_id') FROM generate_series(1, 30);");

# Two clients draw while pg_dump runs; every value they print counts.  They
# read and write files, so they run on their own while the test waits.
my $sqlfile = $src->basedir . '/draw.sql';
PostgreSQL::Test::Utils::append_to_file($sqlfile,
	join('', map { "SELECT distseq_nextval('s'), distseq_nextval('t'), distseq_nextval('w');\n" } 1 .. 20000));
my @clients;
for my $c (1 .. 2)
{
	my $outfile = $src->basedir . "/client$c.out";
	my $h = IPC::Run::start([ 'psql', '-XAtq', '-d', $src->connstr('app') ],
		'<', $sqlfile, '>', $outfile, '2>', $outfile . '.err');
	push @clients, [ $h, $outfile ];
}
$src->poll_query_until('app',
	"SELECT count(*) > 0 FROM distseq_blocks WHERE sequence_name = 's'")
  or die "clients never started";

$src->safe_psql('app', "INSERT INTO orders (v) SELECT 'x' FROM generate_series(1, 50)");
my $w_before = $src->safe_psql('app',
	"SELECT max(distseq_nextval('w')) FROM generate_series(1, 300)");
my $dump = $src->basedir . '/app.dump';
$src->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $src->connstr('app') ],
	'pg_dump while values are drawn');

my (@s_values, @t_values, @w_values);
for my $c (@clients)
{
	$c->[0]->finish;
	for my $line (split /\n/, slurp_file($c->[1]))
	{
		my ($s, $t, $w) = split /\|/, $line;
		push @s_values, $s;
		push @t_values, $t;
		push @w_values, $w;
	}
}
cmp_ok(scalar(@s_values), '==', 40000, 'the clients drew all their values');

# The source goes on after the dump: those values come from reservations the
# dump does not know about.
for my $line (split /\n/, $src->safe_psql('app',
		"SELECT distseq_nextval('s'), distseq_nextval('t'), distseq_nextval('w')
		 FROM generate_series(1, 3000)"))
{
	my ($s, $t, $w) = split /\|/, $line;
	push @s_values, $s;
	push @t_values, $t;
	push @w_values, $w;
}
push @s_values, split /\n/, $src->safe_psql('app', 'SELECT id FROM orders');
my %uniq = map { $_ => 1 } @s_values;
is(scalar(keys %uniq), scalar(@s_values), 'source values are distinct');
%uniq = map { $_ => 1 } @w_values;
is(scalar(keys %uniq), scalar(@w_values), 'w: source values are distinct');
cmp_ok($src->safe_psql('app',
		"SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'w'"),
	'<=', 2 + 2 + 16,
	'w: after 430 windows the source keeps its open windows, one merged row, and what pools gave back');
my $s_max = max(@s_values);
my $t_max = max(@t_values);
# drawn after the dump too
$src->safe_psql('app',
	"INSERT INTO billing.items (v) SELECT 'z' FROM generate_series(1, 20);
	 INSERT INTO billing.notes SELECT distseq_nextval('notes_id') FROM generate_series(1, 20);");
my $items_max = $src->safe_psql('app', 'SELECT max(id) FROM billing.items');
my $notes_max = $src->safe_psql('app', 'SELECT max(note_id) FROM billing.notes');

sub check_restored
{
	my ($node, $db, $what) = @_;
	my @s = split /\n/, $node->safe_psql($db,
		"SELECT distseq_nextval('s') FROM generate_series(1, 2000)");
	my @t = split /\n/, $node->safe_psql($db,
		"SELECT distseq_nextval('t') FROM generate_series(1, 2000)");
	cmp_ok(min(@s), '>', $s_max, "$what: s continues above the source ($s_max)");
	cmp_ok(min(@t), '>', $t_max, "$what: t continues above the source ($t_max)");
	my @w = split /\n/, $node->safe_psql($db,
		"SELECT distseq_nextval('w') FROM generate_series(1, 300)");
	cmp_ok(min(@w), '>', $w_before,
		"$what: w continues above every value drawn before the dump began ($w_before)");
	my @ids = split /\n/, $node->safe_psql($db,
		"INSERT INTO orders (v) SELECT 'y' FROM generate_series(1, 100) RETURNING id");
	cmp_ok(min(@ids), '>', $s_max, "$what: table defaults continue above the source");
	is($node->safe_psql($db, "SELECT count(*) FROM orders WHERE v = 'x'"),
		'50', "$what: the rows came along");
	cmp_ok($node->safe_psql($db,
			"SELECT values_lost FROM distseq_status WHERE sequence_name = 's'"),
		'>', 0, "$what: the skipped values are counted");

	# the columns still own their sequences, which still continue
	is($node->safe_psql($db,
			"SELECT pg_get_serial_sequence('billing.items', 'id'),
			        pg_get_serial_sequence('billing.notes', 'note_id'),
			        (SELECT pg_get_userbyid(relowner) FROM pg_class
			         WHERE oid = 'distseq.notes_id'::regclass)"),
		'distseq.items_id|distseq.notes_id|billing', "$what: the links came along");
	cmp_ok($node->safe_psql($db,
			"INSERT INTO billing.items (v) VALUES ('y') RETURNING id"),
		'>', $items_max, "$what: the owned sequence continues above the source");
	cmp_ok($node->safe_psql($db, "SELECT distseq_nextval('notes_id')"),
		'>', $notes_max, "$what: the other one too");
	# and go with their table or column
	$node->safe_psql($db,
		'DROP TABLE billing.items; ALTER TABLE billing.notes DROP COLUMN note_id');
	is($node->safe_psql($db,
			"SELECT count(*) FROM distseq.distseq_sequences
			 WHERE sequence_name IN ('items_id', 'notes_id')")
		  . '|' . $node->safe_psql($db,
			"SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			 WHERE n.nspname = 'distseq' AND c.relname IN ('items_id', 'notes_id')"),
		'0|0', "$what: DROP TABLE and DROP COLUMN drop the owned sequences");
}

# A fresh cluster.
my $dst = PostgreSQL::Test::Cluster->new('dst');
$dst->init;
$dst->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$dst->start;
$dst->safe_psql('postgres', 'CREATE DATABASE app; CREATE ROLE billing');
$dst->command_ok([ 'pg_restore', '-d', $dst->connstr('app'), $dump ],
	'restore into a fresh cluster');
check_restored($dst, 'app', 'fresh cluster');

# Another database of the same cluster.
$src->safe_psql('postgres', 'CREATE DATABASE app2');
$src->command_ok([ 'pg_restore', '-d', $src->connstr('app2'), $dump ],
	'restore into another database');
check_restored($src, 'app2', 'other database');

# Over the source itself, with --clean: the catalog goes back to the dump.
$src->command_ok(
	[ 'pg_restore', '--clean', '-d', $src->connstr('app'), $dump ],
	'restore over the source database');
check_restored($src, 'app', 'same database');

$dst->stop;
$src->stop;
done_testing();
