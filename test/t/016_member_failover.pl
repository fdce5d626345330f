# A member with a synchronous standby fails over: the promoted standby is
# held back as a copy until the administrator vouches for it with
# distseq_accept_promotion(); then it takes the member's place, and nothing
# is handed out twice.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my %node;
$node{$_} = peer_node("node_$_", window_log => 1) for qw(a b c);
for my $n (qw(a b c))
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } qw(a b c);
}
for my $n (qw(a b c))
{
	$node{$n}->safe_psql('postgres', "SELECT distseq_add_peer('node_$_')")
	  for grep { $_ ne $n } qw(a b c);
}
$node{a}->safe_psql('postgres',
	"SELECT distseq_create('orders', block_size => 5, window_size => 500, min_open_windows => 2)");
$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()') for qw(a b c);

# c gets a synchronous standby.
$node{c}->backup('c_backup');
my $standby = PostgreSQL::Test::Cluster->new('node_c2');
$standby->init_from_backup($node{c}, 'c_backup', has_streaming => 1);
$standby->start;
$node{c}->safe_psql('postgres', "ALTER SYSTEM SET synchronous_standby_names = 'node_c2'");
$node{c}->reload;
$node{c}->poll_query_until('postgres',
	"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'node_c2'")
  or die 'the standby never became synchronous';

my %seen;
my $dups = 0;
sub draw
{
	my ($n, $count) = @_;
	$dups += grep { $seen{$_}++ } split /\n/, $n->safe_psql('postgres',
		"SELECT distseq_nextval('orders') FROM generate_series(1, $count)");
}
for (1 .. 3)
{
	draw($node{$_}, 400) for qw(a b c);
	$node{$_}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()') for qw(a b c);
}

my ($ret, $out, $err) = $node{a}->psql('postgres', 'SELECT distseq_accept_promotion()');
like($err, qr/not a promoted standby of a member/, 'a member in its own place has nothing to accept');

# c dies; its standby is promoted and the others are pointed at it.
$node{c}->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die;
my $port = $standby->port;
$node{$_}->safe_psql('postgres', "ALTER SERVER node_c OPTIONS (SET port '$port')") for qw(a b);

($ret, $out, $err) = $standby->psql('postgres', 'SELECT * FROM distseq_maintain()');
like($err, qr/copy of a member/, 'the promoted standby is held back as a copy');
$standby->safe_psql('postgres', 'SELECT distseq_accept_promotion()');
is($standby->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()'), '1',
	'vouched for, it takes part again');

for (1 .. 3)
{
	draw($_, 400) for ($node{a}, $node{b}, $standby);
	$_->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()')
	  for ($node{a}, $node{b}, $standby);
}
is($standby->safe_psql('postgres', 'SELECT cardinality(members), pending FROM distseq.distseq_node'),
	'3|f', 'as the same member of the same group');

my @w;
for my $n ($node{a}, $node{b}, $standby)
{
	push @w, map { [ split /\|/ ] } split /\n/, $n->safe_psql('postgres',
		"SELECT window_start, window_end FROM public.distseq_windows_ever('orders')");
}
@w = sort { $a->[0] <=> $b->[0] } @w;
my $bad = grep { $w[$_]->[0] < $w[ $_ - 1 ]->[1] } 1 .. $#w;
is($bad, 0, 'no two windows overlap');
is($dups, 0, 'no value was handed out twice (' . scalar(keys %seen) . ' values)');

$_->stop for ($node{a}, $node{b}, $standby);
done_testing();
