# distseq_alter() on three nodes, while sessions on every node draw in short
# transactions: lowering max_value and the block_size at once, every node
# hands out nothing above the new max_value once the call returned, and
# every block cut after it has the new size; a sequence lowered to what was
# reserved is exhausted everywhere, and raising max_value makes every node
# issue again; with a member down the call fails naming it and changes
# nothing.  No value is drawn twice, on any node.
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
my %node = map { $_ => peer_node("node_$_", conf => "distseq.refill_timeout = '30s'\n") } @names;
for my $n (@names)
{
	for my $m (grep { $_ ne $n } @names)
	{
		peer_server($node{$n}, $m, $node{$m});
	}
}
for my $n (@names)
{
	$node{$n}->safe_psql('postgres', "SELECT distseq_add_peer('node_$_')")
	  for grep { $_ ne $n } @names;
}
$node{a}->safe_psql('postgres',
	"SELECT distseq_create('ids', block_size => 1000, window_size => 100000)");

# Each draw is a transaction of its own, and records the end of the stream's
# chunk right after it (a later chunk than the value's if other sessions
# drew meanwhile); an exhausted sequence is waited out, not an error
for my $n (@names)
{
	$node{$n}->safe_psql('postgres', 'SELECT count(*) FROM distseq_maintain()');
	$node{$n}->safe_psql('postgres', q{
		CREATE TABLE drawn (v bigint, block_end bigint, t0 timestamptz, sess int);
		CREATE PROCEDURE draw(sess int, secs float8) LANGUAGE plpgsql AS $$
		DECLARE
			t0 timestamptz;
			v bigint;
			stop timestamptz := clock_timestamp() + secs * interval '1 second';
		BEGIN
			WHILE clock_timestamp() < stop LOOP
				t0 := clock_timestamp();
				BEGIN
					v := distseq_nextval('ids');
				EXCEPTION WHEN sequence_generator_limit_exceeded THEN
					v := NULL;
				END;
				IF v IS NULL THEN
					PERFORM pg_sleep(0.02);
				ELSE
					INSERT INTO drawn
					SELECT v, b.block_end, t0, sess FROM distseq_blocks b
					WHERE b.sequence_name = 'ids';
				END IF;
				COMMIT;
			END LOOP;
		END
		$$;
		CREATE FUNCTION drain() RETURNS bigint LANGUAGE plpgsql AS $$
		DECLARE
			n bigint := 0;
			v bigint;
		BEGIN
			LOOP
				BEGIN
					v := distseq_nextval('ids');
				EXCEPTION WHEN sequence_generator_limit_exceeded THEN
					RETURN n;
				END;
				INSERT INTO drawn VALUES (v, NULL, clock_timestamp(), 0);
				n := n + 1;
			END LOOP;
		END
		$$;});
}

# the highest value any node reserved
sub reserved_top
{
	my $top = 0;
	for my $n (@names)
	{
		my $m = $node{$n}->safe_psql('postgres',
			"SELECT COALESCE(max(next_hi) - 1, 0) FROM distseq.distseq_windows"
			  . " WHERE sequence_name = 'ids' AND next_hi > window_start");
		$top = $m if $m > $top;
	}
	return $top;
}

# Sessions drawing on every node for $secs seconds, numbered from $first
sub drawing
{
	my ($secs, $first) = @_;
	my @runs;
	my $sess = $first;
	for my $n (@names)
	{
		for (1 .. 2)
		{
			my $err = '';
			my $h = IPC::Run::start(
				[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d',
					$node{$n}->connstr('postgres'), '-c', "CALL draw($sess, $secs)" ],
				'<', '/dev/null', '>', '/dev/null', '2>', \$err,
				IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
			push @runs, [ $h, \$err, "$n/$sess" ];
			$sess++;
		}
		$node{$n}->poll_query_until('postgres',
			"SELECT count(DISTINCT sess) = 2 FROM drawn WHERE sess >= $first")
		  or die "node $n does not draw";
	}
	return @runs;
}

sub wait_drawing
{
	for my $r (@_)
	{
		my $ok = eval { $r->[0]->finish; };
		ok($ok && $r->[0]->result == 0, "drawing session $r->[2] ended cleanly")
		  or diag("stderr: ${$r->[1]}");
	}
}

# Call distseq_alter on node a; a lowered max_value found reserved since the
# top was read is tried again.  Returns when the call returned.
sub alter_now
{
	my ($args) = @_;
	my ($rc, $out, $err);
	for (1 .. 20)
	{
		my $list = $args->();
		($rc, $out, $err) = $node{a}->psql('postgres',
			"SELECT distseq_alter('ids', $list); SELECT clock_timestamp();");
		return (split /\n/, $out)[-1] if $rc == 0;
		last unless $err =~ /may have handed out/;
	}
	die "distseq_alter failed: $err";
}

# --- lower max_value and block_size while every node draws ---
my @runs = drawing(6, 1);
my $max;
my $t = alter_now(
	sub {
		$max = reserved_top() + 300000;
		return "block_size => 10, max_value => $max";
	});
wait_drawing(@runs);
for my $n (@names)
{
	my ($after, $above, $bigbefore) = split /\|/, $node{$n}->safe_psql('postgres', qq{
		SELECT count(*) FILTER (WHERE t0 > '$t'),
			   count(*) FILTER (WHERE t0 > '$t' AND v > $max),
			   (SELECT count(*) FROM drawn WHERE t0 < '$t' AND block_end - v > 20)
		FROM drawn});
	cmp_ok($after, '>', 0, "node $n drew after the call returned");
	is($above, '0', "node $n drew nothing above the lowered max_value after the call");
	cmp_ok($bigbefore, '>', 0, "node $n drew from larger chunks before the call");
	is($node{$n}->safe_psql('postgres',
			"SELECT block_size || '/' || max_value FROM distseq.distseq_sequences WHERE sequence_name = 'ids'"),
		"10/$max", "node $n has the new parameters");
	is($node{$n}->safe_psql('postgres',
			"SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'ids' AND window_end > $max + 1"),
		'0', "node $n has no window above the new max_value");
}
# The others may hold every window below the lowered max_value (100,000
# values each, and the sessions drew on after the call): raise it, so that
# every node has values to draw for the check of its chunks.
alter_now(sub { 'max_value => ' . ($max + 3000000) });
for my $n (@names)
{
	# alone now: the chunk a value comes from is the one the view shows
	my $big = $node{$n}->safe_psql('postgres', qq{
		SELECT count(*) FROM (SELECT v, (SELECT block_end FROM distseq_blocks
										 WHERE sequence_name = 'ids' AND v IS NOT NULL) AS e
							  FROM (SELECT distseq_nextval('ids') AS v
									FROM generate_series(1, 30) OFFSET 0) d) x
		WHERE e - v > 10});
	is($big, '0', "every chunk node $n cuts after the call has the new block_size");
}

# --- below what a member reserved: refused, with the least value accepted ---
my ($rc, $out, $err) = $node{b}->psql('postgres',
	"SELECT distseq_alter('ids', max_value => 1)");
isnt($rc, 0, 'a max_value below what the group reserved is refused');
like($err, qr/max_value 1 is below what distseq sequence "ids" may have handed out/, '... saying why');
like($err, qr/Set a max_value of at least \d+/, '... and which max_value would do');

# --- exhausted everywhere, then raised while every node waits to draw ---
my $top = reserved_top();
alter_now(sub { "max_value => $top" });
for my $n (@names)
{
	# what its windows still hold below the top, then nothing
	$node{$n}->safe_psql('postgres', 'SELECT drain()');
	is($node{$n}->safe_psql('postgres', "SELECT count(*) FROM drawn WHERE sess = 0 AND v > $top"),
		'0', "node $n drew nothing above the lowered max_value");
	($rc, $out, $err) = $node{$n}->psql('postgres', "SELECT distseq_nextval('ids')");
	like($err, qr/reached maximum value of sequence "ids" \($top\)/, "node $n is exhausted at max_value");
}
@runs = ();
{
	# the sessions start on an exhausted sequence: no first draw to wait for
	my $sess = 7;
	for my $n (@names)
	{
		my $h = IPC::Run::start(
			[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d',
				$node{$n}->connstr('postgres'), '-c', "CALL draw($sess, 5)" ],
			'<', '/dev/null', '>', '/dev/null', '2>', \my $e,
			IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
		push @runs, [ $h, \$e, "$n/$sess" ];
		$sess++;
	}
}
sleep 1;
my $max2 = $top + 1000000;
$t = alter_now(sub { "max_value => $max2" });
wait_drawing(@runs);
for my $n (@names)
{
	my ($after, $outside) = split /\|/, $node{$n}->safe_psql('postgres', qq{
		SELECT count(*), count(*) FILTER (WHERE v <= $top OR v > $max2)
		FROM drawn WHERE sess >= 7});
	cmp_ok($after, '>', 0, "node $n issues again once max_value was raised");
	is($outside, '0', "node $n drew only between the old and the new max_value");
}

# --- a member down: refused, naming it, nothing changed ---
$node{c}->stop('immediate');
($rc, $out, $err) = $node{a}->psql('postgres',
	"SELECT distseq_alter('ids', block_size => 77)");
isnt($rc, 0, 'distseq_alter fails with a member down');
like($err, qr/could not alter distseq sequence "ids": not every member answered/,
	'... saying not every member answered');
like($err, qr/node_c/, '... naming the member down');
like($err, qr/Nothing was changed/, '... and that nothing changed');
for my $n (qw(a b))
{
	is($node{$n}->safe_psql('postgres',
			"SELECT block_size FROM distseq.distseq_sequences WHERE sequence_name = 'ids'"),
		'10', "node $n kept its block_size");
}
$node{c}->start;
my $ok = 0;
# the first tries may find node c's connection gone still
for (1 .. 20)
{
	($rc, $out, $err) = $node{a}->psql('postgres',
		"SELECT distseq_alter('ids', block_size => 77)");
	last if ($ok = $rc == 0);
	sleep 1;
}
ok($ok, 'distseq_alter succeeds once the member is back') or diag($err);
is($node{$_}->safe_psql('postgres',
		"SELECT block_size FROM distseq.distseq_sequences WHERE sequence_name = 'ids'"),
	'77', "node $_ has the new block_size")
  for @names;

# --- every value drawn, on every node: none twice ---
my %seen;
my $dups = 0;
for my $n (@names)
{
	$dups += $seen{$_}++ ? 1 : 0
	  for split /\n/, $node{$n}->safe_psql('postgres', 'SELECT v FROM drawn');
}
is($dups, 0, 'no value was drawn twice, on any node (' . scalar(keys %seen) . ' values)');

$node{$_}->stop for @names;
done_testing();
