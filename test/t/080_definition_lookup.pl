# A backend's first use of a sequence reads its definition from
# distseq_sequences through the table's primary key index, not through SPI,
# and keeps the table's OID for the next first use.  What that lookup must
# get right:
#
# - the collation: the index on sequence_name is ordered by the database's
#   collation, so a search in another one (C, say) descends into the wrong
#   pages.  A database whose default collation is ICU's root locale orders
#   "a1" before "B1" where C orders it after; every one of 1,800 names of
#   mixed case must be found by a session that has not used it yet.
# - the table's OID kept across a DROP EXTENSION and CREATE EXTENSION, and
#   across an update that moves the table into schema distseq (1.5), in one
#   session.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('lookup');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
distseq.max_sequences = 2000
");
$node->start;

# 1,800 names: a1..a600, B1..B600 and an accented e followed by 1..600
my $names = "SELECT p || g AS n
	FROM unnest(ARRAY['a', 'B', U&'\\00E9']) p, generate_series(1, 600) g";

SKIP:
{
	# try it: a server built without ICU refuses it
	my ($icu_ret, $icu_out, $icu_err) = $node->psql('postgres',
		"CREATE DATABASE icu TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'
		 LOCALE_PROVIDER icu ICU_LOCALE 'und'");
	skip 'this server is built without ICU', 4
	  if $icu_err =~ /ICU is not supported/;
	is($icu_ret, 0, 'a database whose collation is ICU root') or diag($icu_err);
	is( $node->safe_psql('icu',
			"SELECT 'a1' < 'B1' COLLATE \"default\" AND 'a1' > 'B1' COLLATE \"C\""),
		't',
		'the database collation orders names unlike C');

	$node->safe_psql('icu',
		"CREATE EXTENSION distseq;
		 CREATE TABLE t (name text, v bigint, UNIQUE (name, v));
		 SELECT count(distseq_create(n, block_size => 5)) FROM ($names) s;");

	# one new session draws from every name: each is its first use there
	my ($ret, $out, $err) = $node->psql('icu',
		"INSERT INTO t SELECT n, distseq_nextval(n) FROM ($names) s;
		 SELECT count(DISTINCT name) FROM t;");
	is($ret, 0, 'a new session found every name') or diag($err);
	is($out, 1800, 'one value from each of 1,800 sequences');
}

# what psql printed, without the empty lines of distseq_create()
sub values_of
{
	return join(',', grep { $_ ne '' } split(/\n/, shift));
}

# In one session: draw, drop the extension, create it again, draw again; then
# an old catalog whose table an update moves into schema distseq.
$node->safe_psql('postgres', 'CREATE DATABASE again');
my ($ret, $out, $err) = $node->psql(
	'again', q{
CREATE EXTENSION distseq;
SELECT distseq_create('first');
SELECT distseq_nextval('first');
DROP EXTENSION distseq CASCADE;
CREATE EXTENSION distseq;
SELECT distseq_create('second');
SELECT distseq_nextval('second');
SELECT distseq_nextval('first');
});
is($ret, 3, 'a sequence of the dropped extension is gone');
like($err, qr/distseq sequence "first" does not exist/,
	'after the extension was created again, its old sequence is reported missing');
is(values_of($out), '1,1', 'both sequences drew in the session that dropped the extension');

$node->safe_psql('postgres', 'CREATE DATABASE old');
($ret, $out, $err) = $node->psql(
	'old', q{
CREATE EXTENSION distseq VERSION '1.4';
SELECT distseq_create('before');
SELECT distseq_nextval('before');
ALTER EXTENSION distseq UPDATE TO '1.5';
SELECT distseq_create('after');
SELECT distseq_nextval('after');
SELECT distseq_nextval('before');
});
is($ret, 0, 'an update moved the catalog in the session') or diag($err);
is(values_of($out), '1,1,2', 'sequences made before and after the move both drew');

done_testing();
