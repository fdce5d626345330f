#!/usr/bin/perl
# A TCP proxy that delays every chunk it forwards, in both directions, by a
# fixed time: far-apart servers on one machine, for bench/far.sh.
#
#   perl bench/delay_proxy.pl LISTEN_PORT TARGET_PORT DELAY_MS
#
# Listens on 127.0.0.1:LISTEN_PORT and connects each client to
# 127.0.0.1:TARGET_PORT.  A chunk read at time t is written at t + DELAY_MS,
# in the order it was read, so a round trip through the proxy takes at least
# 2 x DELAY_MS.  Runs until killed.
use strict;
use warnings;
use IO::Socket::INET;
use IO::Select;
use Time::HiRes qw(time);

@ARGV == 3 or die "usage: $0 LISTEN_PORT TARGET_PORT DELAY_MS\n";
my ($listen_port, $target_port, $delay_ms) = @ARGV;
my $delay = $delay_ms / 1000;

my $listener = IO::Socket::INET->new(
	LocalAddr => '127.0.0.1',
	LocalPort => $listen_port,
	Listen => 64,
	ReuseAddr => 1) or die "cannot listen on $listen_port: $!\n";
my $sel = IO::Select->new($listener);

# per socket (by name): the socket, its peer and the chunks queued for it,
# [due, data]
my (%sock, %peer, %queue);

sub close_pair
{
	my ($s) = @_;
	my $p = $peer{$s};
	for my $x ($s, $p)
	{
		next unless defined $x;
		$sel->remove($x);
		delete $sock{$x};
		delete $peer{$x};
		delete $queue{$x};
		close $x;
	}
}

while (1)
{
	my $now = time;
	my $next;
	for my $q (values %queue)
	{
		next unless @$q;
		$next = $q->[0][0] if !defined $next || $q->[0][0] < $next;
	}
	my $timeout = defined $next ? ($next > $now ? $next - $now : 0) : undef;
	for my $s ($sel->can_read($timeout))
	{
		if ($s == $listener)
		{
			my $c = $listener->accept or next;
			my $t = IO::Socket::INET->new(
				PeerAddr => '127.0.0.1',
				PeerPort => $target_port) or do { close $c; next };
			$_->autoflush(1) for ($c, $t);
			$sock{$c} = $c;
			$sock{$t} = $t;
			$peer{$c} = $t;
			$peer{$t} = $c;
			$queue{$c} = [];
			$queue{$t} = [];
			$sel->add($c, $t);
			next;
		}
		next unless exists $peer{$s};
		my $n = sysread($s, my $buf, 65536);
		if (!$n)
		{
			close_pair($s);
			next;
		}
		push @{ $queue{ $peer{$s} } }, [ time + $delay, $buf ];
	}
	$now = time;
	for my $s (keys %queue)
	{
		my $q = $queue{$s};
		next unless $q;
		while (@$q && $q->[0][0] <= $now)
		{
			my $chunk = shift @$q;
			my $sock = $sock{$s} or last;
			my $off = 0;
			while ($off < length $chunk->[1])
			{
				my $w = syswrite($sock, $chunk->[1], length($chunk->[1]) - $off, $off);
				if (!defined $w)
				{
					close_pair($sock);
					last;
				}
				$off += $w;
			}
			last unless exists $queue{$s};
		}
	}
}
