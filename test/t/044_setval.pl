# distseq_setval() on three nodes: every member applies the floor, while
# sessions on every node keep drawing, each in short transactions and from
# blocks it held before the call (blocks larger than a session draws in the
# test, so that one used after the call would show); once the call
# returned, no node hands out a value at or below the floor.  With a member down, the call fails naming
# it and changes nothing; once it is back, the call succeeds.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;
use IPC::Run;

my @names = qw(a b c);
my %node;
for my $n (@names)
{
	$node{$n} = peer_node("node_$n", conf => "distseq.refill_timeout = '30s'\n");
}
for my $n (@names)
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } @names;
}
for my $n (@names)
{
	$node{$n}->safe_psql('postgres', "SELECT distseq_add_peer('node_$_')")
	  for grep { $_ ne $n } @names;
}

$node{a}->safe_psql('postgres',
	"SELECT distseq_create('ids', block_size => 100000, window_size => 1000000, min_open_windows => 2)");
for my $n (@names)
{
	$node{$n}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
	# each iteration is a transaction of its own; the session keeps its block
	$node{$n}->safe_psql('postgres', q{
		CREATE TABLE drawn (v bigint, t0 timestamptz, sess int);
		CREATE TABLE drawing_stop (at timestamptz);
		CREATE PROCEDURE draw(sess int, secs float8) LANGUAGE plpgsql AS $$
		DECLARE
			t0 timestamptz;
			v bigint;
			stop timestamptz := clock_timestamp() + secs * interval '1 second';
		BEGIN
			LOOP
				t0 := clock_timestamp();
				EXIT WHEN t0 > stop OR EXISTS (SELECT FROM drawing_stop);
				v := distseq_nextval('ids');
				INSERT INTO drawn VALUES (v, t0, sess);
				COMMIT;
			END LOOP;
		END
		$$;});
}

# the highest mark of any node, in values (one stripe: slots are values)
sub top_mark
{
	my $top = 0;
	for my $n (@_ ? @_ : @names)
	{
		my $m = $node{$n}->safe_psql('postgres',
			"SELECT GREATEST(COALESCE(max(window_end), 0), COALESCE(max(s.hwm), 0))"
			  . " FROM distseq.distseq_sequences s LEFT JOIN distseq.distseq_windows w USING (sequence_name)"
			  . " WHERE s.sequence_name = 'ids'");
		$top = $m if $m > $top;
	}
	return $top;
}

# Two drawing sessions per node, for $secs seconds or until stop_drawing()
sub start_drawing
{
	my ($secs, $sess) = @_;
	my @h;
	for my $n (@names)
	{
		for my $k (1 .. 2)
		{
			$sess++;
			my ($out, $err) = ('', '');
			my $h = IPC::Run::start(
				[
					'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1',
					'-d', $node{$n}->connstr('postgres'),
					'-c', "CALL draw($sess, $secs)"
				],
				'<', '/dev/null', '>', \$out, '2>', \$err,
				IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
			push @h, { h => $h, err => \$err, name => "$n/$sess" };
		}
	}
	return @h;
}

# Once every node has drawn after $t in a session numbered above $sess,
# stop the drawing sessions: they must not run out of time before a call
# that took long returned
sub stop_drawing
{
	my ($t, $sess) = @_;
	for my $n (@names)
	{
		$node{$n}->poll_query_until('postgres',
			"SELECT count(*) > 0 FROM drawn WHERE t0 > '$t' AND sess > $sess")
		  or diag("node $n did not draw after the call returned");
	}
	$node{$_}->safe_psql('postgres', 'INSERT INTO drawing_stop VALUES (now())')
	  for @names;
}

sub finish_drawing
{
	for my $c (@_)
	{
		my $ok = eval { $c->{h}->finish; };
		ok($ok && $c->{h}->result == 0, "drawing session $c->{name} ended cleanly")
		  or diag("stderr: ${$c->{err}}");
	}
	$node{$_}->safe_psql('postgres', 'DELETE FROM drawing_stop') for @names;
}

# Every node: values drawn after $t are above $floor, there are some, and no
# window at or below the floor is open
sub check_after
{
	my ($t, $floor, $what) = @_;
	for my $n (@names)
	{
		my ($after, $bad) = split /\|/, $node{$n}->safe_psql('postgres',
			"SELECT count(*), count(*) FILTER (WHERE v <= $floor) FROM drawn WHERE t0 > '$t'");
		cmp_ok($after, '>', 0, "$what: node $n drew after the call returned");
		is($bad, '0', "$what: nothing at or below $floor drawn on node $n after the call returned");
		is($node{$n}->safe_psql('postgres',
				"SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'ids'"
				  . " AND next_hi < window_end AND next_hi <= $floor"),
			'0', "$what: no window at or below the floor is open on node $n");
		is($node{$n}->safe_psql('postgres',
				"SELECT hwm > $floor FROM distseq.distseq_sequences WHERE sequence_name = 'ids'"),
			't', "$what: the mark of node $n is above the floor");
	}
}

sub check_unique
{
	my %seen;
	my $dups = 0;
	for my $n (@names)
	{
		for my $v (split /\n/, $node{$n}->safe_psql('postgres', 'SELECT v FROM drawn'))
		{
			$dups++ if $seen{$v}++;
		}
	}
	is($dups, 0, 'no value was drawn twice, on any node (' . scalar(keys %seen) . ' values)');
}

# --- setval while every node draws ---
my @drawing = start_drawing(120, 0);
# every session holds a block before the call
$node{$_}->poll_query_until('postgres',
	'SELECT count(DISTINCT sess) = 2 FROM drawn')
  or die "node $_ does not draw"
  for @names;
my $floor = top_mark() + 10000000;
my ($ret, $t) = split /\n/, $node{a}->safe_psql('postgres',
	"SELECT distseq_setval('ids', $floor); SELECT clock_timestamp();");
is($ret, $floor, 'distseq_setval returns the value');
for my $n (@names)
{
	is($node{$n}->safe_psql('postgres',
			"SELECT count(DISTINCT sess) FROM drawn WHERE t0 < '$t'"),
		'2', "both sessions on node $n drew before the call");
}
stop_drawing($t, 0);
finish_drawing(@drawing);
check_after($t, $floor, 'setval on a');
check_unique();

# --- forward only, whichever member reserved it ---
my ($rc, $out, $err) = $node{b}->psql('postgres',
	"SELECT distseq_setval('ids', $floor)");
isnt($rc, 0, 'a value below what the group reserved is refused');
like($err, qr/is below what distseq sequence "ids" may have handed out/,
	'... saying why');
like($err, qr/set a value of at least \d+/, '... and which value would do');

# --- a member down: refused, naming it, nothing changed ---
$node{c}->stop('immediate');
my $floor2 = top_mark(qw(a b)) + 10000000;
($rc, $out, $err) = $node{a}->psql('postgres',
	"SELECT distseq_setval('ids', $floor2)");
isnt($rc, 0, 'distseq_setval fails with a member down');
like($err, qr/not every member answered/, '... saying not every member answered');
like($err, qr/node_c/, '... naming the member down');
like($err, qr/Nothing was changed/, '... and that nothing changed');
unlike($err, qr/node_b:/, '... and not the member that answered');
for my $n (qw(a b))
{
	is($node{$n}->safe_psql('postgres',
			"SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'ids' AND window_end > $floor2"),
		'0', "node $n that answered did not move to the new floor");
}
# the failed call left the sequence usable where it answered
like($node{a}->safe_psql('postgres', "SELECT distseq_nextval('ids')"),
	qr/^\d+$/, 'node a still draws');

# back: the call succeeds, and every node draws above the floor
$node{c}->start;
@drawing = start_drawing(120, 6);
$node{$_}->poll_query_until('postgres',
	'SELECT count(DISTINCT sess) = 2 FROM drawn WHERE sess > 6')
  or die "node $_ does not draw"
  for @names;
$floor2 = top_mark() + 10000000;
my $ok = 0;
# the first try may find node c's connection gone still
for my $try (1 .. 20)
{
	($rc, $out, $err) = $node{a}->psql('postgres',
		"SELECT distseq_setval('ids', $floor2); SELECT clock_timestamp();");
	if ($rc == 0)
	{
		$ok = 1;
		last;
	}
	sleep 1;
}
ok($ok, 'distseq_setval succeeds once the member is back') or diag($err);
($ret, $t) = split /\n/, $out;
stop_drawing($t, 6);
finish_drawing(@drawing);
check_after($t, $floor2, 'setval after the member came back');
check_unique();

$node{$_}->stop for @names;
done_testing();
