# Helpers for TAP tests with several distseq nodes on loopback TCP.
package DistseqPeers;

use strict;
use warnings;
use Exporter 'import';
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IO::Select;
use IO::Socket::INET;
use POSIX ();
use Socket qw(SOL_SOCKET SO_RCVBUF);
use Test::More;
use Time::HiRes qw(time);

our @EXPORT =
  qw(peer_node peer_server peer_group tcp_proxy window_log logged_windows
  window_overlaps slow_refills fast_refills refills_of queue_refills refilled
  hot_served_first);

# A started node with distseq preloaded and installed, listening on
# 127.0.0.1 with trust for loopback connections (and "hba" lines first);
# install_path runs it on another PostgreSQL installation.
sub peer_node
{
	my ($name, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name,
		$opts{install_path} ? (install_path => $opts{install_path}) : ());

	$node->init(allows_streaming => 1);
	$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'distseq'
listen_addresses = '127.0.0.1'
distseq.agent_interval = '200ms'
distseq.remote_timeout = '2s'
) . ($opts{conf} // ''));
	my $hba = slurp_file($node->data_dir . '/pg_hba.conf');
	open my $fh, '>', $node->data_dir . '/pg_hba.conf' or die;
	print $fh ($opts{hba} // '') . "host all all 127.0.0.1/32 trust\n$hba";
	close $fh;
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION distseq');
	window_log($node) if $opts{window_log};
	return $node;
}

# Every window ever written on $node, in database $db: distseq merges the
# closed windows of a run into one row, which in a group spans the other
# members' windows between them, so a test that checks what windows covered
# (no two nodes' overlap, every value drawn was reserved) reads
# public.distseq_window_log, which a trigger fills with each row as it is
# inserted or updated (a release splits windows: the pieces are logged
# too), except the update that widens a row to merge the ones above it.
# "made" marks the rows that made a window: not the update of a row nor
# the upper piece a release cuts out of one (inserted while the row it is
# cut from, which ends where it does, is still there), since a merged row
# and its pieces span the other members' windows between the node's own.  logged_windows and
# public.distseq_windows_ever(seq) give the union of the windows made, as
# disjoint (window_start, window_end) rows.  peer_node(..., window_log => 1) sets
# it up on a new node.
sub window_log
{
	my ($node, $db) = @_;
	$node->safe_psql($db // 'postgres', q{
		CREATE TABLE public.distseq_window_log (sequence_name text,
			window_start bigint, window_end bigint, next_hi bigint,
			made boolean);
		CREATE FUNCTION public.distseq_window_logger() RETURNS trigger
			LANGUAGE plpgsql SET search_path = pg_catalog AS $$
		BEGIN
			IF TG_OP = 'UPDATE' AND NEW.window_end > OLD.window_end THEN
				RETURN NULL;
			END IF;
			INSERT INTO public.distseq_window_log
				VALUES (NEW.sequence_name, NEW.window_start, NEW.window_end, NEW.next_hi,
					TG_OP = 'INSERT' AND NOT EXISTS (SELECT FROM distseq.distseq_windows o
						WHERE o.sequence_name = NEW.sequence_name
						AND o.window_start < NEW.window_start
						AND o.window_end = NEW.window_end));
			RETURN NULL;
		END $$;
		CREATE TRIGGER distseq_window_log AFTER INSERT OR UPDATE
			ON distseq.distseq_windows FOR EACH ROW
			EXECUTE FUNCTION public.distseq_window_logger();
		CREATE FUNCTION public.distseq_windows_ever(seq text)
			RETURNS TABLE (window_start bigint, window_end bigint)
			LANGUAGE sql AS $$
			SELECT min(s), max(e) FROM (
				SELECT s, e, count(*) FILTER (WHERE brk) OVER (ORDER BY s, e) AS island
				FROM (SELECT l.window_start AS s, l.window_end AS e,
						l.window_start > COALESCE(max(l.window_end) OVER (
							ORDER BY l.window_start, l.window_end
							ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING),
							l.window_start - 1) AS brk
					  FROM public.distseq_window_log l
					  WHERE l.sequence_name = seq AND l.made) a) b
			GROUP BY island ORDER BY 1 $$;});
}

# The union of the windows $node ever had for sequence $seq (from
# window_log), as disjoint [start, end, $tag] intervals.
sub logged_windows
{
	my ($node, $tag, $seq, $db) = @_;
	my @w;
	for my $line (split /\n/, $node->safe_psql($db // 'postgres',
			"SELECT window_start, window_end FROM public.distseq_window_log"
			  . " WHERE sequence_name = '$seq' AND made ORDER BY window_start, window_end"))
	{
		my ($s, $e) = split /\|/, $line;
		if (@w && $s <= $w[-1][1])
		{
			$w[-1][1] = $e if $e > $w[-1][1];
		}
		else
		{
			push @w, [ $s, $e, $tag ];
		}
	}
	return @w;
}

# Make each refill of the sequences whose names match $regex 0.2 s slower
# (a trigger on the worker's UPDATE of distseq_windows), to queue them.
sub slow_refills
{
	my ($node, $regex) = @_;

	$node->safe_psql(
		'postgres', qq{
	CREATE FUNCTION slow_refill() RETURNS trigger LANGUAGE plpgsql AS \$\$
	BEGIN
		PERFORM pg_sleep(0.2);
		RETURN NEW;
	END \$\$;
	CREATE TRIGGER slow_refill BEFORE UPDATE ON distseq.distseq_windows
		FOR EACH ROW WHEN (NEW.sequence_name ~ '$regex')
		EXECUTE FUNCTION slow_refill();
});
	return;
}

# Undo slow_refills before the node stops: the worker writes its pools back
# to distseq_windows at shutdown.
sub fast_refills
{
	my ($node) = @_;

	$node->safe_psql('postgres',
		'DROP TRIGGER slow_refill ON distseq.distseq_windows');
	return;
}

# The refills made so far of the sequences named $prefix followed by digits
sub refills_of
{
	my ($node, $prefix) = @_;

	return $node->safe_psql('postgres',
		"SELECT sum(refills) FROM distseq_status WHERE sequence_name ~ '^${prefix}[0-9]'"
	);
}

# Wait until refills_of reaches $count; returns whether it did
sub refilled
{
	my ($node, $prefix, $count) = @_;

	return $node->poll_query_until(
		'postgres', qq{
	SELECT sum(refills) >= $count FROM distseq_status
	WHERE sequence_name ~ '^${prefix}[0-9]'});
}

# Make sequences $prefix . 1 .. $n each ask for a refill ahead of need,
# without waiting for it; returns refills_of before.  Each must have
# block_size 10, have been drawn from once and have its next segment, with
# distseq.prefetch_threshold = 100: 150 values are the rest of its first
# segment (90), then some of the prefetched one (200), whose first chunks
# leave less than a segment.
sub queue_refills
{
	my ($node, $prefix, $n) = @_;
	my $before = refills_of($node, $prefix);

	$node->safe_psql(
		'postgres', qq{
	DO \$\$
	BEGIN
		FOR k IN 1 .. $n LOOP
			PERFORM count(distseq_nextval('$prefix' || k)) FROM generate_series(1, 150);
		END LOOP;
	END \$\$});
	return $before;
}

# Queue the refills of $prefix . 1 .. $n (queue_refills), then draw 500
# values from the sequence 'hot', more than its pool holds: its backend
# waits for refills, which must be served before the queued ones.  Checks
# that the values are distinct, that the backend waited, that at most 3 +
# 2 per wait of the queued refills were done meanwhile (nothing is timed),
# and that every queued one is served in the end.
sub hot_served_first
{
	my ($node, $prefix, $n) = @_;
	my $hot_waits =
	  q{SELECT waits FROM distseq_status WHERE sequence_name = 'hot'};
	local $Test::Builder::Level = $Test::Builder::Level + 1;

	my $start = queue_refills($node, $prefix, $n);
	my $waits_before = $node->safe_psql('postgres', $hot_waits);
	is( $node->safe_psql(
			'postgres', q{
	SELECT count(DISTINCT v) FROM (
		SELECT distseq_nextval('hot') v FROM generate_series(1, 500)) d}),
		'500',
		'500 distinct values from the hot sequence');
	my $done = refills_of($node, $prefix) - $start;
	my $waits = $node->safe_psql('postgres', $hot_waits) - $waits_before;
	cmp_ok($waits, '>=', 1, "the hot sequence's backend waited ($waits times)");
	cmp_ok($done, '<=', 3 + 2 * $waits,
		"its refills are served before the queued cold ones ($done of $n done)");
	ok(refilled($node, $prefix, $start + $n),
		'every queued cold refill is served');
	return;
}

# The pairs of intervals [start, end, tag] that overlap.
sub window_overlaps
{
	my @w = sort { $a->[0] <=> $b->[0] } @_;
	my @bad;
	my $far = 0;
	for my $i (1 .. $#w)
	{
		$far = $i - 1 if $w[ $i - 1 ][1] > $w[$far][1];
		push @bad, "$w[$far][2]:[$w[$far][0],$w[$far][1]) $w[$i][2]:[$w[$i][0],$w[$i][1])"
		  if $w[$i][0] < $w[$far][1];
	}
	return @bad;
}

# On node $on, a foreign server "node_$to_name" reaching node $to, with a
# user mapping for the current user as the superuser.
sub peer_server
{
	my ($on, $to_name, $to) = @_;
	my $port = $to->port;

	$on->safe_psql('postgres', qq(
		CREATE SERVER node_$to_name FOREIGN DATA WRAPPER distseq
			OPTIONS (host '127.0.0.1', port '$port', dbname 'postgres');
		CREATE USER MAPPING FOR CURRENT_USER SERVER node_$to_name OPTIONS (user 'postgres');));
}

# The nodes $node->{$n} for each name in @names form one group: each gets
# a server for every other (peer_server), then adds every other as a peer.
sub peer_group
{
	my ($node, @names) = @_;
	for my $n (@names)
	{
		peer_server($node->{$n}, $_, $node->{$_}) for grep { $_ ne $n } @names;
	}
	for my $n (@names)
	{
		$node->{$n}->safe_psql('postgres', "SELECT distseq_add_peer('node_$_')")
		  for grep { $_ ne $n } @names;
	}
}

# A TCP proxy on loopback to $to_port, in a child process, for at most ten
# minutes; returns its pid and its port.  What it passes from the server to
# the clients is ruled by files, looked at while it runs:
#   hang => F   while F exists, nothing (on every connection, old and new,
#               while it still accepts new ones and passes what clients send);
#   limit => F  a connection accepted while F exists gets only as many bytes
#               as F says; then the proxy stops reading from the server,
#               whose sends fill the (small) buffers and wait.
sub tcp_proxy
{
	my ($to_port, %opt) = @_;
	my $listen = IO::Socket::INET->new(
		LocalAddr => '127.0.0.1',
		LocalPort => 0,
		Listen => 64,
		ReuseAddr => 1) or die "proxy: $!";
	my $port = $listen->sockport;
	my $parent = $$;
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0)
	{
		$SIG{PIPE} = 'IGNORE';
		# the test harness's handlers would run its END blocks (stopping
		# the nodes) in this child: a signal just ends the proxy
		$SIG{TERM} = $SIG{INT} = 'DEFAULT';
		my (%other, %upstream, %budget);
		my $end = time + 600;
		while (time < $end && getppid() == $parent)
		{
			my $hung = defined $opt{hang} && -e $opt{hang};
			my $sel = IO::Select->new($listen,
				grep {
					!($upstream{$_}
						&& ($hung || (defined $budget{$_} && $budget{$_} <= 0)))
				} values %other);
			for my $s ($sel->can_read(0.05))
			{
				if ($s == $listen)
				{
					my $c = $listen->accept or next;
					my $u = IO::Socket::INET->new(Proto => 'tcp') or next;
					# no autotuned megabytes between the server and us
					setsockopt($u, SOL_SOCKET, SO_RCVBUF, 65536);
					if (!$u->connect(Socket::pack_sockaddr_in($to_port,
								Socket::inet_aton('127.0.0.1'))))
					{
						close $c;
						next;
					}
					$other{$c} = $u;
					$other{$u} = $c;
					$upstream{$u} = 1;
					$budget{$u} = 0 + slurp_file($opt{limit})
					  if defined $opt{limit} && -e $opt{limit};
					next;
				}
				my $to = $other{$s} or next;
				my $max = defined $budget{$s} ? $budget{$s} : 65536;
				$max = 65536 if $max > 65536;
				my $n = sysread($s, my $buf, $max);
				if (!$n)
				{
					delete @other{ $s, $to };
					delete @upstream{ $s, $to };
					delete @budget{ $s, $to };
					close $s;
					close $to;
					next;
				}
				$budget{$s} -= $n if defined $budget{$s};
				my $off = 0;
				while ($off < $n)
				{
					my $w = syswrite($to, $buf, $n - $off, $off);
					last unless $w;
					$off += $w;
				}
			}
		}
		POSIX::_exit(0);
	}
	close $listen;
	return ($pid, $port);
}

1;
