# A synchronous standby that is promoted never hands out a value the old
# primary handed out: reservations are used only once the standby has them.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf('postgresql.conf', "shared_preload_libraries = 'distseq'");
$primary->start;
$primary->safe_psql('postgres',
	"CREATE EXTENSION distseq;
	 SELECT distseq_create('s', block_size => 5, window_size => 200);");
$primary->backup('bkp');

my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'bkp', has_streaming => 1);
$standby->start;
$primary->append_conf('postgresql.conf', "synchronous_standby_names = 'standby'");
$primary->reload;
$primary->poll_query_until('postgres',
	"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby'")
  or die "standby never became synchronous";

# Load from several sessions; keep every value any of them received.
my %seen;
my @values;
for my $client (1 .. 4)
{
	my $out = $primary->safe_psql('postgres',
		"SELECT distseq_nextval('s') FROM generate_series(1, 300)");
	push @values, split /\n/, $out;
}
$seen{$_}++ for @values;
is(scalar(keys %seen), scalar(@values), 'primary: all values distinct');

# A refill whose synchronous wait is cancelled must not be used: stop the
# standby so the worker's commit waits, then cancel the worker.
$primary->safe_psql('postgres', "SELECT distseq_create('t', block_size => 5)");
$standby->stop;
my ($in, $out, $err) = ('', '', '');
my $h = IPC::Run::start(
	[
		'psql', '-XAtq', '-d', $primary->connstr('postgres'), '-c',
		"SET distseq.refill_timeout = '60s'; SELECT distseq_nextval('t')"
	],
	\$in, \$out, \$err);
$primary->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM pg_stat_activity
	 WHERE backend_type = 'distseq worker' AND wait_event = 'SyncRep'")
  or die "the worker never waited for the standby";
$primary->safe_psql('postgres',
	"SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE backend_type = 'distseq worker'");
$h->finish;
like($err, qr/could not refill distseq sequence "t".*not acknowledged by the synchronous standbys/s,
	'a reservation whose synchronous wait was cancelled is not used');
is($out, '', 'no value was handed out from it');

$standby->start;
$primary->poll_query_until('postgres',
	"SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby'")
  or die "standby never became synchronous again";
for my $client (1 .. 2)
{
	my $out = $primary->safe_psql('postgres',
		"SELECT distseq_nextval('s') FROM generate_series(1, 300)");
	push @values, split /\n/, $out;
}
my $t_value = $primary->safe_psql('postgres', "SELECT distseq_nextval('t')");
ok($t_value > 0, 't draws once the standby is back');

# The primary dies with values in its pools; the standby takes over.
$primary->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or die "standby never left recovery";

my @after = split /\n/, $standby->safe_psql('postgres',
	"SELECT distseq_nextval('s') FROM generate_series(1, 1000)");
my %old = map { $_ => 1 } @values;
my @repeated = grep { $old{$_} } @after;
is(scalar(@after), 1000, 'the promoted standby draws');
is(scalar(@repeated), 0, 'and never a value the old primary handed out')
  or diag("repeated: @repeated[0 .. ($#repeated < 9 ? $#repeated : 9)]");
my $t_after = $standby->safe_psql('postgres', "SELECT distseq_nextval('t')");
ok($t_after > $t_value, 'the other sequence continues above its last value too');

$standby->stop;
done_testing();
