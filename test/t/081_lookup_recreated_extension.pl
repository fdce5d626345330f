# A backend's first use of any sequence looks up the OID of the catalog
# table distseq_sequences by name, then opens it.  If another transaction is
# dropping the extension and creating it again, the open waits for that
# transaction's lock on the old table; once it commits, the old table is
# gone and the name now stands for a new one.  The first use must find the
# new table, as SQL naming it would (RangeVarGetRelid looks the name up
# again after the lock), not fail with "could not open relation with OID".
# Checked with the catalog in schema distseq (1.5 on) and in the
# installation schema (1.4).
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('recreated');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'\n");
$node->start;

# Does $sql return $expect within 15 s?
sub soon
{
	my ($db, $sql, $expect) = @_;
	for (1 .. 150)
	{
		return 1 if $node->safe_psql($db, $sql) eq $expect;
		usleep(100_000);
	}
	return 0;
}

foreach my $version ('', '1.4')
{
	my $db = $version eq '' ? 'newest' : 'v14';
	my $with = $version eq '' ? '' : " VERSION '$version'";
	my $what = $version eq '' ? 'newest version' : "version $version";

	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db,
		"CREATE EXTENSION distseq$with; SELECT distseq_create('s')");

	# B drops and re-creates the extension, with a sequence of the same
	# name starting at 1000, and keeps its transaction open
	my $b = $node->background_psql($db);
	$b->query_safe(
		"SET client_min_messages = warning;
		 BEGIN;
		 DROP EXTENSION distseq CASCADE;
		 CREATE EXTENSION distseq$with;
		 SELECT distseq_create('s', start_value => 1000);");

	# A has never used distseq: its first use waits for B's lock
	my $a = $node->background_psql($db, on_error_stop => 0);
	my $a_pid = $a->query_safe('SELECT pg_backend_pid()');
	$a->query_until(qr/started/,
		"\\echo started\nSELECT distseq_nextval('s') AS v \\gset\n");
	ok( soon(
			$db,
			"SELECT count(*) FROM pg_locks WHERE pid = $a_pid AND NOT granted",
			'1'),
		"$what: a first use waits for the transaction re-creating the extension"
	);

	$b->query_safe('COMMIT');
	$b->quit;

	my $out = $a->query(q{\echo :v});
	my $err = $a->{stderr};
	$a->quit;
	unlike($err, qr/ERROR/,
		"$what: the first use after the extension was re-created raised no error"
	);
	is($out, '1000',
		"$what: the first use drew from the sequence of the new extension");
}

done_testing();
