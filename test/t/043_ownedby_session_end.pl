# A distseq sequence owned by a permanent column whose type is a temporary
# domain: the end of the session drops the domain, the column and the
# sequence, as internal deletions that no event trigger sees.  distseq
# forgets the sequence all the same, while another session draws from it:
# the name can be created again, and the session that drew gets no value of
# the old sequence from the new one.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION distseq');

my $drawer = $node->background_psql('postgres', on_error_stop => 0);
for my $round (1 .. 3)
{
	my $owner = $node->background_psql('postgres');
	$owner->query_safe(
		"CREATE DOMAIN pg_temp.d AS bigint;
		 CREATE TABLE t$round (id pg_temp.d, v int);
		 SELECT distseq_create('s', block_size => 2, window_size => 10,
			start_value => $round * 1000, owned_by => 't$round.id')");
	my $before = $drawer->query_safe("SELECT distseq_nextval('s')");
	is($before, $round * 1000, "round $round: the other session draws");

	# the end of the owner's session drops the sequence
	$owner->quit;
	$node->poll_query_until('postgres',
		"SELECT NOT EXISTS (SELECT FROM pg_class WHERE relname = 's'
			AND relnamespace = 'distseq'::regnamespace)")
	  or die "the session end did not drop the sequence";
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 's'"),
		'0', "round $round: the catalog forgot it");
	is($node->safe_psql('postgres',
			"SELECT attname FROM pg_attribute WHERE attrelid = 't$round'::regclass
			 AND attnum > 0 AND NOT attisdropped"),
		'v', "round $round: the column went with the domain");

	# created again, far above: the drawer's block of the old one is gone
	$node->safe_psql('postgres',
		"SELECT distseq_create('s', start_value => $round * 1000 + 500)");
	is($drawer->query_safe("SELECT distseq_nextval('s')"),
		$round * 1000 + 500, "round $round: the name is a new sequence");
	$node->safe_psql('postgres', "SELECT distseq_drop('s')");
}
$drawer->quit;

done_testing();
