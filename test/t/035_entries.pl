# distseq.max_sequences bounds the sequences in use at once, not the
# sequences ever used: an entry that no backend uses is written back by its
# database's worker and taken by any database, least recently used first,
# and a database's worker exits when it has had no work for
# distseq.worker_idle_timeout, and comes back when a session needs it.
#
# With 8 entries, three databases use 20 sequences each in turn, twice; no
# value of a sequence may come twice, and no draw may fail.  Then: a
# transaction that used a sequence keeps its entry (a drop of it waits for
# the transaction), a transaction whose entry was taken meanwhile goes on
# with a new one, every entry held by sessions gives a clear error, and an
# idle database's worker exits and comes back.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('entries');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.max_sequences = 8
distseq.worker_idle_timeout = '1s'
");
$node->start;

my @dbs = ('d1', 'd2', 'd3');
for my $db (@dbs)
{
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db,
		"CREATE EXTENSION distseq;
		 SELECT distseq_create('s' || g, block_size => 10, window_size => 1000)
		 FROM generate_series(1, 20) g;");
}

# every value drawn, per database and sequence
my %values;

sub record
{
	my ($db, $seq, $out) = @_;
	push @{ $values{"$db.$seq"} }, split(/\n/, $out);
}

# One session per database draws 10 values from each of its 20 sequences in
# turn: sessions hold no values of their own, so every entry but the current
# one may be taken.  Twice, so that sequences
# come back to entries that served others meanwhile.
for my $round (1 .. 2)
{
	for my $db (@dbs)
	{
		my $sql = join(";\n",
			map { "SELECT distseq_nextval('s$_') FROM generate_series(1, 10)" }
			  (1 .. 20));
		my ($ret, $out, $err) = $node->psql($db, $sql);
		is($ret, 0, "round $round: $db used 20 sequences in turn")
		  or diag($err);
		my @v = split /\n/, $out;
		for my $i (1 .. 20)
		{
			record($db, "s$i", join("\n", splice(@v, 0, 10)));
		}
	}
}

# Sessions that draw a chunk and a half; the next sequences take the entries
# over after the worker wrote them back.
for my $db (@dbs)
{
	for my $i (1 .. 20)
	{
		record($db, "s$i",
			$node->safe_psql($db,
				"SELECT distseq_nextval('s$i') FROM generate_series(1, 15)"));
	}
}

# --- A transaction whose entry is taken while it is in it.  Its first use
# of s1 in the backend locks the relation: the entry may be taken, and the
# next draw finds a new one.
my $t = $node->background_psql('d1', on_error_stop => 0);
$t->query_safe('BEGIN');
record('d1', 's1',
	$t->query_safe("SELECT distseq_nextval('s1') FROM generate_series(1, 10)"));
for my $db ('d2', 'd3')
{
	$node->safe_psql($db,
		join(";\n",
			map { "SELECT distseq_nextval('s$_') FROM generate_series(1, 10)" }
			  (1 .. 8)));
}
is( $t->query_safe(
		"SELECT count(*) FROM distseq_pool_status() p
		 JOIN distseq.distseq_sequences s ON p.seqrel = s.seqrel::oid
		 WHERE s.sequence_name = 's1'"),
	'0',
	"s1's entry was taken while the transaction that used it is open");
my ($out, $failed) =
  $t->query("SELECT distseq_nextval('s1') FROM generate_series(1, 25)");
ok(!$failed, 'the transaction draws on from a new entry')
  or diag($t->{stderr});
record('d1', 's1', $out);
$t->query_safe('COMMIT');

# --- A transaction that used a sequence without a lock (its backend had
# used it before) keeps the entry while it is open: a drop of the sequence
# must find it, and wait for it.
$t->query_safe("SELECT distseq_nextval('s2') FROM generate_series(1, 10)");
$t->query_safe('BEGIN');
record('d1', 's2',
	$t->query_safe("SELECT distseq_nextval('s2') FROM generate_series(1, 10)"));
for my $db ('d2', 'd3')
{
	$node->safe_psql($db,
		join(";\n",
			map { "SELECT distseq_nextval('s$_') FROM generate_series(1, 10)" }
			  (9 .. 20)));
}
is( $t->query_safe(
		"SELECT count(*) FROM distseq_pool_status() p
		 JOIN distseq.distseq_sequences s ON p.seqrel = s.seqrel::oid
		 WHERE s.sequence_name = 's2'"),
	'1',
	'the entry of a sequence an open transaction used is not taken');
my ($ret, $dout, $derr) = $node->psql('d1',
	"SET statement_timeout = '1s'; SELECT distseq_drop('s2')");
like($derr, qr/canceling statement due to statement timeout/,
	'a drop of it waits for the transaction');
$t->query_safe('COMMIT');
$t->quit;

# --- Every entry used by one open transaction: a clear error, at once.
# The session attaches eight entries, then uses them all without a lock in
# one transaction, which keeps them (a drop must find that transaction).
my $h = $node->background_psql('d3', on_error_stop => 0);
my $eight = join(";\n", map { "SELECT distseq_nextval('s$_')" } (1 .. 8));
$h->query_safe($eight);
$h->query_safe('BEGIN');
$h->query_safe($eight);
($out, $failed) = $h->query("SELECT distseq_nextval('s9')");
ok($failed, 'a ninth sequence while a transaction uses eight fails');
like(
	$h->{stderr},
	qr/too many distseq sequences in use.*Sequence "s9" of database "d3" needs an entry.*HINT:  Increase distseq.max_sequences/s,
	'the error names the sequence and the database, with a hint');
$h->{stderr} = '';
# once the transaction has ended, the entries go on
$h->query_safe('ROLLBACK');
$h->quit;
for my $i (1 .. 10)
{
	record('d3', "s$i",
		$node->safe_psql('d3',
			"SELECT distseq_nextval('s$i') FROM generate_series(1, 12)"));
}

# --- An idle database's worker exits, and comes back when it is needed.
my $worker = "SELECT count(*) FROM pg_stat_activity
	 WHERE backend_type = 'distseq worker' AND datname = 'd2'";
ok($node->poll_query_until('postgres', "SELECT ($worker) = 0"),
	"d2's worker exits when idle");
# It wrote every pool back when it exited: these draws need refills.
for my $i (1 .. 20)
{
	record('d2', "s$i",
		$node->safe_psql('d2',
			"SELECT distseq_nextval('s$i') FROM generate_series(1, 30)"));
}
is($node->safe_psql('d2', "SELECT distseq_nextval('s20') > 0; $worker"),
	"t\n1", "d2's worker came back when its sequences were used");
ok($node->poll_query_until('postgres', "SELECT ($worker) = 0"),
	'and exits again');

# --- No value of a sequence came twice.
my $dups = 0;
my $count = 0;
for my $key (sort keys %values)
{
	my %seen;
	for my $v (@{ $values{$key} })
	{
		$count++;
		if ($seen{$v}++)
		{
			$dups++;
			diag("$key: $v handed out twice");
		}
	}
}
is($count, 2865, 'every value asked for was drawn');
is($dups, 0, 'no value of any sequence was handed out twice');
unlike(slot_log(), qr/TRAP|PANIC|server process .* was terminated by signal/,
	'no crash');

sub slot_log
{
	return slurp_file($node->logfile);
}

$node->stop;
done_testing();
