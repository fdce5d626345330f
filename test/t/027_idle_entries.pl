# The table of shared-memory entries (distseq.max_sequences) is shared by
# every database of the server.  A database whose sessions once used many
# sequences must not keep the others out until a restart: when the table is
# full, an entry that no open transaction uses is taken over, whichever
# database it serves: sessions hold no values of their own, and one whose
# entry was taken finds a new one at its next draw, going on above what it
# got.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('idle_entries');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'\ndistseq.max_sequences = 2\n");
$node->start;

$node->safe_psql('postgres',
	"CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN;
	 CREATE DATABASE dba OWNER alice; CREATE DATABASE dbb OWNER bob;");
$node->safe_psql('dba',
	"CREATE EXTENSION distseq;
	 SELECT distseq_create('a1', block_size => 10, window_size => 100);
	 SELECT distseq_create('a2', block_size => 10, window_size => 100);
	 GRANT USAGE ON SEQUENCE distseq.a1, distseq.a2 TO alice;");
$node->safe_psql('dbb',
	"CREATE EXTENSION distseq;
	 SELECT distseq_create('b', block_size => 10, window_size => 100);
	 GRANT USAGE ON SEQUENCE distseq.b TO bob;");

sub session
{
	my ($db, $role) = @_;
	return $node->background_psql($db, on_error_stop => 0,
		extra_params => [ '-U', $role ]);
}

# n values of a sequence drawn by a session, or the error
sub draw
{
	my ($s, $seq, $n) = @_;
	my ($out, $failed) = $s->query(
		"SELECT distseq_nextval('$seq') FROM generate_series(1, $n)");
	if ($failed)
	{
		my $err = $s->{stderr};
		$s->{stderr} = '';
		return $err;
	}
	return [ split /\n/, $out ];
}

sub quit_and_wait
{
	my ($s, $db) = @_;
	$s->quit;
	$node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity
		 WHERE datname = '$db' AND backend_type = 'client backend'")
	  or die "the sessions of $db did not end";
}

# alice's session takes both entries and stays idle: bob's database takes
# one of them, and alice's session draws on, from entries found anew
my $sa = session('dba', 'alice');
my @a1 = @{ draw($sa, 'a1', 15) };
my @a2 = @{ draw($sa, 'a2', 15) };
my $sb = session('dbb', 'bob');
my $b = draw($sb, 'b', 25);
is(ref($b), 'ARRAY', 'dbb takes an entry that an idle session of dba drew from')
  or diag($b);
my $next1 = draw($sa, 'a1', 15);
my $next2 = draw($sa, 'a2', 15);
is(ref($next1) . ref($next2), 'ARRAYARRAY',
	'the idle session of dba draws on from entries found anew')
  or diag("$next1 $next2");
cmp_ok($next1->[0], '>', $a1[-1], 'a1 goes on above what the session got');
cmp_ok($next2->[0], '>', $a2[-1], 'a2 goes on above what the session got');
push @a1, @$next1;
push @a2, @$next2;
quit_and_wait($sa, 'dba');

# and dba takes them back once bob has left; its values go on from where
# its catalog stands, never below nor twice
quit_and_wait($sb, 'dbb');
$sa = session('dba', 'alice');
my $more1 = draw($sa, 'a1', 15);
my $more2 = draw($sa, 'a2', 15);
is(ref($more1) . ref($more2), 'ARRAYARRAY', 'dba takes its entries back')
  or diag("$more1 $more2");
$sa->quit;
for my $pair ([ 'a1', \@a1, $more1 ], [ 'a2', \@a2, $more2 ])
{
	my ($name, $old, $new) = @$pair;
	next unless ref($new);
	my %seen;
	my @dups = grep { $seen{$_}++ } (@$old, @$new);
	is(scalar(@dups), 0, "no value of $name was handed out twice");
	cmp_ok($new->[0], '>', $old->[-1],
		"$name goes on above what it handed out before");
}

$node->stop;
done_testing();
