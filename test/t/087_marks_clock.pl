# An attack on the clock that gives a backend's slots of marks away
# (src/shmem.c distseq_my_marks: a local copy of each slot's entry, a hand
# with a second chance, two rounds at most), with 1, 2 and 3 slots.  What
# it tried found nothing; it is kept to catch a regression.
#
# Whatever slot the hand picks, a transaction that uses warm sequences
# (each has its entry and was used by this backend) gets a slot for each of
# the first distseq.backend_marks distinct ones it uses, in order of first
# use, and locks every other one: while fewer slots than that mark it, one
# is free to give, and once all do, none may be given.  So, after random
# transactions (repeats, SAVEPOINT / ROLLBACK TO, a PL/pgSQL loop over
# names, PREPARE TRANSACTION, DISCARD ALL between them, a second session
# that likely has the backend slot of the first), pg_locks must show
# exactly the sequences beyond the first backend_marks, and a DROP or a
# distseq_setval() in another session must wait for every sequence the
# transaction used (it fails on lock_timeout), and a DROP of a sequence it
# did not use must not.
#
# Then distseq.max_sequences = 4 for 8 sequences, with another session
# drawing between the transactions: entries are parked and taken over by
# other sequences all the time, so one entry is reached through several
# names, and one slot (the local copy says which) serves them.  The
# sequences are no longer all warm (a first use after a take-over locks,
# and takes no slot), so pg_locks must only show that at most three were
# used without a lock; drops still wait for every sequence used.  No value
# comes twice (a UNIQUE column).
#
# Seen failing when the rules are broken on purpose: a slot that marks the
# running transaction given away on the hand's second round (shmem.c) fails
# the pg_locks checks and the drops and setvals of sequences used through a
# slot, with 1, 2 and 3 slots; a hand that says there is none as soon as
# it comes to a slot of the running transaction fails the pg_locks checks
# with 2 and 3 slots.  (A hand that looks only once round is not seen:
# nextval_setup() asks again through local_prepare() when it got no slot,
# which makes the second round.)
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $seed = $ENV{DISTSEQ_SEED} // 87;
srand($seed);
note("seed $seed");

my $node = PostgreSQL::Test::Cluster->new('marks_clock');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'distseq'
max_prepared_transactions = 4
distseq.max_sequences = 64
");

my $nseq = 8;

# one value of each sequence named, in this order: by INSERT ... SELECT, or
# by a PL/pgSQL loop over the names
sub draw
{
	my (@s) = @_;
	return "SELECT draw_loop(ARRAY[" . join(',', map { "'s$_'" } @s) . "]);\n"
	  if rand() < 0.3;
	return join('',
		map { "INSERT INTO t VALUES ('s$_', distseq_nextval('s$_'));\n" } @s);
}

# the sequences that the running session holds a relation lock on
my $locked = q{SELECT coalesce(string_agg(c.relname, ',' ORDER BY c.relname), '')
	FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
	WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation'
	  AND c.relnamespace = 'distseq'::regnamespace AND c.relname ~ '^s[0-9]+$'};

# the sequences that prepared transactions hold a lock on
my $locked_prepared = $locked =~ s/l\.pid = pg_backend_pid\(\)/l.pid IS NULL/r;

sub names { return join(',', map { "s$_" } sort @_) }

# Does a drop of s$n in another session wait (and fail on lock_timeout)?
# It is rolled back if it does not.  With $setval, a distseq_setval()
# instead, which must wait as well (it is not undone if it does not).
sub drop_waits
{
	my ($n, $setval) = @_;
	my $sql =
	  $setval
	  ? "SELECT distseq_setval('s$n', 1000000000000);"
	  : "BEGIN; SELECT distseq_drop('s$n'); ROLLBACK;";
	my ($ret, $out, $err) =
	  $node->psql('postgres', "SET lock_timeout = '300ms'; $sql");
	return 1 if $err =~ /canceling statement due to lock timeout/;
	diag(($setval ? 'setval' : 'drop') . " of s$n: $err") if $err ne '';
	return 0;
}

# Run random transactions in session $a with $marks slots.  $exact: every
# sequence is warm, so the locks are exactly those beyond the first $marks.
sub attack
{
	my ($a, $c, $marks, $rounds, $exact, $what) = @_;
	my $bad_locks = 0;
	my $bad_drops = 0;
	my $free_waits = 0;

	for my $r (1 .. $rounds)
	{
		# 1 .. 16 draws from the 8 sequences, repeats allowed (with 4
		# entries: from s1 .. s6, 4 of them at most)
		my $len = 1 + int(rand($exact ? 2 * $nseq : 6));
		my @used = map { 1 + int(rand($exact ? $nseq : 6)) } 1 .. $len;
		my (@order, %seen);
		for (@used) { push @order, $_ unless $seen{$_}++ }
		@order = @order[ 0 .. 3 ] if !$exact && @order > 4;
		%seen = map { $_ => 1 } @order;
		@used = grep { $seen{$_} } @used;

		my $sql = "BEGIN;\n";
		my $i = 0;
		while ($i < @used)
		{
			my $n = 1 + int(rand(3));
			my @part = @used[ $i .. ($i + $n - 1 < $#used ? $i + $n - 1 : $#used) ];
			$i += @part;
			if (rand() < 0.2)
			{
				# values drawn in a rolled back savepoint are gone, the
				# slots and locks stay
				$sql .= "SAVEPOINT x;\n" . draw(@part) . "ROLLBACK TO x;\n";
			}
			else
			{
				$sql .= draw(@part);
			}
		}
		$a->query_safe($sql);

		my @slotted = @order[ 0 .. ($marks - 1 < $#order ? $marks - 1 : $#order) ];
		my @beyond = @order[ scalar(@slotted) .. $#order ];
		my $got = $a->query_safe($locked);
		my %got = map { $_ => 1 } split(/,/, $got);
		my $want = names(@beyond);
		if ($exact ? $got ne $want
			: (grep { !$got{"s$_"} } @order) > $marks)
		{
			$bad_locks++;
			diag("$what, round $r: used " . join(' ', @used)
				  . ": locks '$got', expected "
				  . ($exact ? "'$want'" : "at most $marks without a lock"));
		}

		my $prepare = rand() < 0.15;
		if ($prepare)
		{
			$a->query_safe("PREPARE TRANSACTION 'p'");
			my $gotp = $node->safe_psql('postgres', $locked_prepared);
			if ($gotp ne names(@order))
			{
				$bad_locks++;
				diag("$what, round $r: prepared locks '$gotp', expected "
					  . names(@order));
			}
		}

		# the last sequence given a slot is the one a wrong hand takes
		# away first; then another at random
		my @check = ($slotted[-1]);
		push @check, $order[ int(rand(@order)) ];
		push @check, $beyond[0] if @beyond;
		for my $n (@check)
		{
			my $setval = rand() < 0.3;
			next if drop_waits($n, $setval);
			$bad_drops++;
			diag("$what, round $r: used " . join(' ', @used)
				  . ($prepare ? ', prepared' : '')
				  . ": a " . ($setval ? 'setval' : 'drop')
				  . " of s$n did not wait");
		}
		my @unused = grep { !$seen{$_} } 1 .. $nseq;
		$free_waits++ if @unused && rand() < 0.2 && drop_waits($unused[0]);

		if ($prepare)
		{
			$node->safe_psql('postgres', "COMMIT PREPARED 'p'");
		}
		else
		{
			$a->query_safe(rand() < 0.8 ? 'COMMIT' : 'ROLLBACK');
		}
		# another session takes entries over between transactions
		$c->query_safe(draw(map { 1 + int(rand($nseq)) } 1 .. 3)) if $c;
		$a->query_safe('DISCARD ALL') if rand() < 0.1;
	}
	is($bad_locks, 0,
		$exact
		? "$what: the sequences locked are those beyond the slots"
		: "$what: no more sequences used without a lock than slots");
	is($bad_drops, 0,
		"$what: a drop or setval waits for every sequence used");
	is($free_waits, 0, "$what: a drop of a sequence not used does not wait");
	is($node->safe_psql('postgres', 'SELECT count(*) - count(DISTINCT (s, v)) FROM t'),
		'0', "$what: no value twice");
}

$node->start;
$node->safe_psql('postgres',
	"CREATE EXTENSION distseq;
	 CREATE TABLE t (s text, v bigint, UNIQUE (s, v));
	 SELECT distseq_create('s' || g, block_size => 5, window_size => 1000)
	 FROM generate_series(1, $nseq) g;
	 CREATE FUNCTION draw_loop(names text[]) RETURNS void LANGUAGE plpgsql AS \$\$
	 DECLARE n text;
	 BEGIN
		FOREACH n IN ARRAY names LOOP
			INSERT INTO t VALUES (n, distseq_nextval(n));
		END LOOP;
	 END \$\$;");

for my $marks (1, 2, 3)
{
	$node->append_conf('postgresql.conf', "distseq.backend_marks = $marks");
	$node->restart;
	is($node->safe_psql('postgres', 'SHOW distseq.backend_marks'),
		$marks, "$marks slots of marks per backend");
	for my $session (1, 2)
	{
		# the second session is likely to get the backend slot of the
		# first, with its slots of marks as the first left them
		my $a = $node->background_psql('postgres');
		# warm: every sequence has its entry and is known to this backend
		$a->query_safe(draw(1 .. $nseq)) for 1 .. 2;
		attack($a, undef, $marks, $session == 1 ? 25 : 10, 1,
			"$marks slots, session $session");
		$a->quit;
	}
}

# entries taken over all the time
$node->append_conf('postgresql.conf',
	"distseq.max_sequences = 4\ndistseq.backend_marks = 3");
$node->restart;
{
	my $a = $node->background_psql('postgres');
	my $c = $node->background_psql('postgres');
	attack($a, $c, 3, 40, 0, '4 entries for 8 sequences');
	$a->quit;
	$c->quit;
}

$node->stop;
done_testing();
