# Sequence names that an array literal must quote -- commas, quotes,
# backslashes, braces, blanks, the word NULL -- travel between members
# intact: in the marks a membership change collects and hands the members
# in phase two (text[] and bigint[] parameters of distseq_peer_activate),
# in the seeds a joiner keeps, and in the sequences the agent introduces.
# A name mangled on the way would leave a joiner without the mark of that
# sequence, free to open windows below windows won before.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use DistseqPeers;

my %node;
my @nodes = qw(a b c);
$node{$_} = peer_node("names_$_", window_log => 1) for @nodes;
for my $n (@nodes)
{
	peer_server($node{$n}, $_, $node{$_}) for grep { $_ ne $n } @nodes;
}

sub sql { my ($n, $q) = @_; return $node{$n}->safe_psql('postgres', $q); }

# a and b are a group; c stays fresh until it joins
sql('a', "SELECT distseq_add_peer('node_b')");
sql('b', "SELECT distseq_add_peer('node_a')");

my @names = ('a,b', 'q"u', 'back\\slash', '{brace}', 'NULL', 'null', 'sp ace',
	"it's", '{}', '"', ',', 'x}{y');
for my $name (@names)
{
	sql('a', "SELECT distseq_create(\$q\$$name\$q\$, block_size => 1, window_size => 100,"
		  . " min_open_windows => 1)");
}
sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(a b);
for my $name (@names)
{
	# a few windows' worth, so that the marks lie well above the start
	sql('a', "SELECT count(distseq_nextval(\$q\$$name\$q\$)) FROM generate_series(1, 250)");
	sql('a', 'SELECT count(*) FROM distseq_maintain()');
}
my $marks_a = sql('a',
	"SELECT string_agg(sequence_name || '=' || hwm, E'\\n' ORDER BY sequence_name)"
	  . " FROM distseq.distseq_sequences");

# c joins: phase two hands it every mark, by name
sql('a', "SELECT distseq_add_peer('node_c')");
sql('c', "SELECT distseq_add_peer('node_$_')") for qw(a b);
sql('b', "SELECT distseq_add_peer('node_c')");
is(sql('c', 'SELECT cardinality(members), pending FROM distseq.distseq_node'), '3|f',
	'c is an active member of the group of three');

my $seeds_c = sql('c',
	"SELECT string_agg(sequence_name || '=' || hwm, E'\\n' ORDER BY sequence_name)"
	  . " FROM distseq.distseq_seed");
is($seeds_c, $marks_a, 'c holds the mark of every sequence, under its very name');

# the agent introduces them to c above those marks, and c draws from them
sql($_, 'SELECT count(*) FROM distseq_maintain()') for qw(a b c);
is(sql('c', 'SELECT count(*) FROM distseq.distseq_sequences'), scalar(@names),
	'the agent introduced every sequence to c');
my $bad = 0;
for my $name (@names)
{
	sql($_, "SELECT count(distseq_nextval(\$q\$$name\$q\$)) FROM generate_series(1, 150)")
	  for qw(a b c);
	my @w;
	for my $n (@nodes)
	{
		push @w, map { [ split /\|/ ] } split /\n/,
		  sql($n, "SELECT window_start, window_end FROM public.distseq_windows_ever(\$q\$$name\$q\$)");
	}
	@w = sort { $a->[0] <=> $b->[0] } @w;
	for my $i (1 .. $#w)
	{
		$bad++ if $w[$i]->[0] < $w[ $i - 1 ]->[1];
	}
}
is($bad, 0, 'no windows of the three nodes overlap, for any name');

done_testing();
