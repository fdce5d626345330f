# Nothing distseq runs with a superuser's rights may run code of a role
# that can create in, own or rename the schema distseq was installed in.
#
# 1. A role that may CREATE in public (as before PostgreSQL 15, in upgraded
#    databases, or by a grant) fills it with look-alike operators, for
#    every operator and pair of argument types that pg_catalog matches
#    only after a type coercion, and look-alike functions.  Each records
#    who ran it.  A superuser then installs distseq, the newest version and
#    then every version from 1.0 on, one ALTER EXTENSION UPDATE at a time,
#    reads every view and calls the functions after each step.  None of the
#    role's objects may run, or be bound into an object of distseq.
# 2. The database owner's attack (he owns public from PostgreSQL 15 on):
#    after the superuser installed distseq, he renames every schema holding
#    an object of distseq that he may rename (ALTER SCHEMA public RENAME TO
#    x; CREATE SCHEMA public), and puts in the new one look-alike views,
#    with the same columns and no rows, of every relation of distseq, whose
#    WHERE runs his function, with INSTEAD OF triggers that run it too, and
#    look-alikes of every function of distseq.  His function makes him a
#    superuser when a superuser runs it.  Then ordinary DDL (CREATE and
#    DROP SEQUENCE, which fires distseq's SECURITY DEFINER event trigger),
#    every distseq function he may call, refills by the worker, and every
#    function a superuser may call, by its real schema.  He must stay an
#    ordinary role.
# 3. A schema "distseq" prepared by the database owner before CREATE
#    EXTENSION: CREATE EXTENSION refuses it.
# 4. The attack of 2 by the owner of a peer's database, while another
#    database's worker keeps a connection to it as a superuser and calls the
#    functions peers call there; 5. the same with a peer still at 1.4.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('hostile_schema');
$node->init;
$node->append_conf('postgresql.conf', qq(
shared_preload_libraries = 'distseq'
distseq.agent_interval = '200ms'
distseq.remote_timeout = '5s'
distseq.refill_timeout = '20s'
));
$node->start;

# The superuser's own statements run with a safe search_path: a superuser
# who calls the hostile role's functions by an unqualified name runs them,
# as PostgreSQL documents; that is not what is tested here.
my $safe = 'SET search_path = pg_catalog, pg_temp;';

sub su
{
	my ($db, $sql) = @_;
	return $node->safe_psql($db, "$safe $sql");
}

# A statement that may fail (a function refusing its arguments, say)
sub su_try
{
	my ($db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db, "$safe $sql");
	return $ret;
}

sub as_role
{
	my ($db, $role, $sql) = @_;
	return $node->safe_psql($db, $sql, extra_params => [ '-U', $role ]);
}

sub log_count
{
	my ($re) = @_;
	return () = (slurp_file($node->logfile) =~ /$re/g);
}

# Every version from 1.0 to the default, in order
my @versions = sort { version_cmp($a, $b) } split /\n/, su('postgres',
	"SELECT v.version FROM pg_available_extension_versions v
	 JOIN pg_available_extensions e ON e.name = v.name
	 WHERE v.name = 'distseq'
	   AND string_to_array(v.version, '.')::int[] <= string_to_array(e.default_version, '.')::int[]");

sub version_cmp
{
	my @a = split /\./, $_[0];
	my @b = split /\./, $_[1];
	return $a[0] <=> $b[0] || $a[1] <=> $b[1];
}
ok(@versions >= 5 && $versions[0] eq '1.0', "versions to install: @versions");

# What a hostile role's code does when it runs: records the role it ran as,
# in a table and in the server log, and makes the attacker a superuser if
# that role is one.
sub escalate_sql
{
	my ($schema, $attacker) = @_;
	return qq{
		CREATE TABLE $schema.hostile_log (what text, who name, su boolean);
		GRANT INSERT ON $schema.hostile_log TO PUBLIC;
		CREATE FUNCTION $schema.hostile_ran(what text) RETURNS boolean
		LANGUAGE plpgsql VOLATILE AS \$f\$
		BEGIN
			IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r
				WHERE r.rolname OPERATOR(pg_catalog.=) pg_catalog.current_user()) THEN
				RAISE WARNING 'HOSTILE-SU % ran as %', what, pg_catalog.current_user();
				INSERT INTO $schema.hostile_log VALUES (what, pg_catalog.current_user(), true);
				ALTER ROLE $attacker SUPERUSER;
			ELSE
				INSERT INTO $schema.hostile_log VALUES (what, pg_catalog.current_user(), false);
			END IF;
			RETURN false;
		END
		\$f\$;
	};
}

sub assert_clean
{
	my ($db, $schema, $attacker, $what) = @_;
	is(su($db, "SELECT count(*) FROM $schema.hostile_log WHERE su"), '0',
		"$what: no hostile object ran as a superuser")
	  or diag(su($db, "SELECT * FROM $schema.hostile_log"));
	is(su('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = '$attacker'"), 'f',
		"$what: $attacker is not a superuser");
	is(log_count(qr/WARNING:  HOSTILE-SU/), 0, "$what: the server log shows no hostile code run as a superuser");
}

# Reads and calls a superuser makes in a database with distseq at any
# version: every view, and the functions that the version has.
sub exercise
{
	my ($db, $ext) = @_;
	my $has = sub {
		su($db, "SELECT count(*) FROM pg_proc p JOIN pg_depend d ON d.objid = p.oid
				 WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
				   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'distseq')
				   AND p.proname = '$_[0]'") > 0;
	};
	su_try($db, "SELECT $ext.distseq_create('ex', block_size => 2, window_size => 5)");
	su($db, "SELECT count(DISTINCT v) FROM (SELECT $ext.distseq_nextval('ex') AS v
			 FROM generate_series(1, 12)) s");
	su($db, "SELECT * FROM $ext.distseq_status");
	su($db, "SELECT * FROM $ext.distseq_blocks");
	su_try($db, "SELECT * FROM $ext.distseq_peers") if $has->('distseq_peer_status');
	su_try($db, "SELECT $ext.distseq_rejoin()") if $has->('distseq_rejoin');
	su_try($db, "SELECT * FROM $ext.distseq_maintain()") if $has->('distseq_maintain');
	su($db, "CREATE SEQUENCE public.plain_seq; DROP SEQUENCE public.plain_seq");
	su($db, "SELECT $ext.distseq_create('ex_dropped'); DROP SEQUENCE distseq.ex_dropped");
}

#
# 1. Look-alike operators and functions in the installation schema
#
su('postgres', "CREATE ROLE mallory LOGIN; CREATE DATABASE lookalike");
su('lookalike', "GRANT CREATE ON SCHEMA public TO mallory");
as_role('lookalike', 'mallory', $safe . escalate_sql('public', 'mallory') . q{
	DO $$
	DECLARE
		ops text[] := ARRAY['+', '-', '*', '/', '%', '=', '<>', '<', '<=', '>', '>=', '||'];
		types text[] := ARRAY['smallint', 'integer', 'bigint', 'real', 'double precision',
			'numeric', 'text', 'name', 'oid', 'regclass', 'regnamespace', 'boolean',
			'bigint[]', 'name[]', 'text[]', 'integer[]'];
		op text;
		l text;
		r text;
		res text;
		n integer := 0;
	BEGIN
		FOREACH op IN ARRAY ops LOOP
			FOREACH l IN ARRAY types LOOP
				FOREACH r IN ARRAY types LOOP
					-- an exact match in pg_catalog wins anyway
					CONTINUE WHEN EXISTS (SELECT 1 FROM pg_operator o
						WHERE o.oprname = op AND o.oprleft = l::regtype::oid
						  AND o.oprright = r::regtype::oid);
					BEGIN
						EXECUTE format('SELECT pg_typeof(NULL::%s OPERATOR(pg_catalog.%s) NULL::%s)::text',
									   l, op, r) INTO res;
					EXCEPTION WHEN OTHERS THEN
						CONTINUE;	-- no operator at all
					END;
					n := n + 1;
					-- does what pg_catalog's does, after recording
					EXECUTE format('CREATE FUNCTION public.hostile_op_%s(%s, %s) RETURNS %s
									LANGUAGE plpgsql CALLED ON NULL INPUT AS %L',
								   n, l, r, res,
								   format('BEGIN PERFORM public.hostile_ran(%L); RETURN $1 OPERATOR(pg_catalog.%s) $2; END',
										  format('%s(%s, %s)', op, l, r), op));
					EXECUTE format('CREATE OPERATOR public.%s (FUNCTION = public.hostile_op_%s, LEFTARG = %s, RIGHTARG = %s)',
								   op, n, l, r);
				END LOOP;
			END LOOP;
		END LOOP;
		RAISE NOTICE 'hostile operators: %', n;
	END
	$$;
	-- functions that match better than pg_catalog's polymorphic or
	-- coerced ones, or as well (pg_catalog, searched first, wins those)
	CREATE FUNCTION public.cardinality(bigint[]) RETURNS integer LANGUAGE plpgsql AS
		$$BEGIN PERFORM public.hostile_ran('cardinality(bigint[])'); RETURN 1; END$$;
	CREATE FUNCTION public.array_length(bigint[], integer) RETURNS integer LANGUAGE plpgsql AS
		$$BEGIN PERFORM public.hostile_ran('array_length(bigint[], integer)'); RETURN 1; END$$;
	CREATE FUNCTION public.quote_ident(name) RETURNS text LANGUAGE plpgsql AS
		$$BEGIN PERFORM public.hostile_ran('quote_ident(name)'); RETURN $1; END$$;
	CREATE FUNCTION public.random() RETURNS double precision LANGUAGE plpgsql AS
		$$BEGIN PERFORM public.hostile_ran('random()'); RETURN 0.5; END$$;
	CREATE FUNCTION public.current_database() RETURNS name LANGUAGE plpgsql AS
		$$BEGIN PERFORM public.hostile_ran('current_database()'); RETURN 'x'; END$$;
	CREATE FUNCTION public.has_sequence_privilege(regclass, text) RETURNS boolean LANGUAGE plpgsql AS
		$$BEGIN PERFORM public.hostile_ran('has_sequence_privilege(regclass, text)'); RETURN true; END$$;
});
cmp_ok(su('lookalike', "SELECT count(*) FROM pg_operator WHERE oprowner = 'mallory'::regrole"),
	'>', 100, 'mallory made look-alike operators');
# they do capture ordinary queries
as_role('lookalike', 'mallory', "SELECT 2::bigint / 4::double precision");
is(su('lookalike', "SELECT count(*) FROM public.hostile_log WHERE what = '/(bigint, double precision)'"),
	'1', 'a look-alike operator captures an ordinary query');
su('lookalike', "DELETE FROM public.hostile_log");

# the newest version at once, then every update step from 1.0, each in a
# session with the usual search_path
$node->safe_psql('lookalike', "CREATE EXTENSION distseq");
exercise('lookalike', 'public');
su('lookalike', "DROP EXTENSION distseq CASCADE");
$node->safe_psql('lookalike', "CREATE EXTENSION distseq VERSION '1.0'");
exercise('lookalike', 'public');
for my $v (@versions[ 1 .. $#versions ])
{
	# A database updated to 1.4 by the scripts of before 1.5 has its status
	# view bound to the look-alike "/" and "=": 1.5 must re-create it.
	rebind_status_view() if $v eq '1.5';
	$node->safe_psql('lookalike', "ALTER EXTENSION distseq UPDATE TO '$v'");
	exercise('lookalike', 'public');
}

sub rebind_status_view
{
	$node->safe_psql(
		'lookalike', q{
		CREATE OR REPLACE VIEW distseq_status WITH (security_barrier) AS
		SELECT s.sequence_name, s.seqrel AS backing_sequence, s.block_size, p.segment_size,
			   p.pool_start, p.pool_end, p.prefetch_start, p.prefetch_end,
			   COALESCE(w.open_windows, 0) AS open_windows,
			   COALESCE(w.values_left, 0) AS window_values_left,
			   COALESCE(p.refills, 0) AS refills, COALESCE(p.waits, 0) AS waits,
			   COALESCE(p.wait_time_ms, 0) AS wait_time_ms,
			   COALESCE(p.values_issued, s.values_issued) AS values_issued,
			   COALESCE(p.values_lost, s.values_lost) AS values_lost,
			   s.start_value, s.max_value, s.window_size, s.min_open_windows,
			   s.stripes, s.stripe, s.servers, p.values_per_second,
			   (COALESCE(w.values_left, 0) / NULLIF(p.values_per_second, 0))::numeric(20, 1)
				   AS runway_seconds
		FROM distseq_sequences s
		LEFT JOIN distseq_pool_status() p
			   ON p.seqrel = s.seqrel::oid AND p.generation = s.generation
		LEFT JOIN LATERAL (
			SELECT count(*) AS open_windows,
				   sum(w.window_end - w.next_hi)::bigint AS values_left
			FROM distseq_windows w
			WHERE w.sequence_name = s.sequence_name AND w.next_hi < w.window_end
		) w ON true
		WHERE pg_catalog.has_sequence_privilege(s.seqrel::oid, 'SELECT, USAGE, UPDATE')});
	cmp_ok( su( 'lookalike', "SELECT count(*) FROM pg_depend
			WHERE classid = 'pg_rewrite'::regclass AND refclassid = 'pg_operator'::regclass
			  AND refobjid IN (SELECT oid FROM pg_operator WHERE oprowner = 'mallory'::regrole)"),
		'>', 0, 'a status view made by the old scripts is bound to look-alikes');
	return;
}
is(su('lookalike', "SELECT extversion FROM pg_extension WHERE extname = 'distseq'"),
	$versions[-1], 'updated to the newest version');

is(su('lookalike', "SELECT count(*) FROM public.hostile_log"), '0',
	'installing, updating and using distseq ran no look-alike operator or function');
# nothing of distseq was bound to one of them either (a view would run it
# for every reader)
is( su( 'lookalike', "SELECT count(*) FROM pg_depend d
		WHERE d.classid <> 'pg_operator'::regclass
		  AND ((d.refclassid = 'pg_operator'::regclass
				AND d.refobjid IN (SELECT oid FROM pg_operator WHERE oprowner = 'mallory'::regrole))
			OR (d.refclassid = 'pg_proc'::regclass
				AND d.refobjid IN (SELECT oid FROM pg_proc WHERE proowner = 'mallory'::regrole)))"),
	'0',
	'no object depends on a look-alike');
assert_clean('lookalike', 'public', 'mallory', 'look-alike operators');

#
# 2. The database owner renames the schemas he may rename
#

# The owner's tools: hostile_ran() and a trigger function that calls it
sub owner_tools
{
	my ($db, $role) = @_;
	as_role($db, $role, q{
		CREATE SCHEMA tools;
		GRANT USAGE ON SCHEMA tools TO PUBLIC;
	} . escalate_sql('tools', $role) . q{
		CREATE FUNCTION tools.hostile_trigger() RETURNS trigger LANGUAGE plpgsql AS $f$
		BEGIN
			PERFORM tools.hostile_ran(TG_OP || ' on ' || TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME);
			RETURN NULL;
		END
		$f$;
	});
	return;
}

# Renames every schema holding an object of distseq that $role may rename
# (the schemas of its members and the one it was installed in) and fills a
# new one of the same name with look-alikes, with the same columns, of every
# relation of distseq, and of every function.  Returns the new name of
# public.
sub rename_attack
{
	my ($db, $role) = @_;
	my $members = q{
		(SELECT d.classid, d.objid FROM pg_depend d
		 WHERE d.deptype = 'e' AND d.refclassid = 'pg_extension'::regclass
		   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'distseq'))
	};
	my @renamable = split /\n/, as_role($db, $role, qq{
		SELECT n.nspname FROM pg_namespace n
		WHERE pg_has_role(n.nspowner, 'USAGE')
		  AND n.oid IN (SELECT extnamespace FROM pg_extension WHERE extname = 'distseq'
						UNION SELECT c.relnamespace FROM pg_class c
						  WHERE (c.tableoid, c.oid) IN $members
						UNION SELECT p.pronamespace FROM pg_proc p
						  WHERE (p.tableoid, p.oid) IN $members
						UNION SELECT c.oid FROM pg_namespace c
						  WHERE (c.tableoid, c.oid) IN $members)
		ORDER BY 1});
	is_deeply(\@renamable, ['public'], "$db: the owner may rename public, and no other schema of distseq");

	my @relations = split /\n/, as_role($db, $role, qq{
		SELECT format('%I|%s', c.relname,
					  string_agg(format('NULL::%s AS %I', format_type(a.atttypid, a.atttypmod), a.attname),
								 ', ' ORDER BY a.attnum))
		FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
		WHERE (c.tableoid, c.oid) IN $members
		GROUP BY c.relname ORDER BY 1});
	my @functions = split /\n/, as_role($db, $role, qq{
		SELECT format('%I(%s) RETURNS %s|%s', p.proname, pg_get_function_arguments(p.oid),
					  pg_get_function_result(p.oid),
					  CASE WHEN p.proretset OR p.prorettype IN ('void'::regtype, 'event_trigger'::regtype)
							 OR 'o' = ANY (p.proargmodes) OR 'b' = ANY (p.proargmodes)
						   THEN 'RETURN;' ELSE 'RETURN NULL;' END)
		FROM pg_proc p WHERE (p.tableoid, p.oid) IN $members ORDER BY 1});
	cmp_ok(scalar(@relations), '>=', 8,
		"$db: relations to imitate: " . join(' ', map { (split /\|/)[0] } @relations));
	cmp_ok(scalar(@functions), '>=', 20, "$db: functions to imitate");

	my $attack = '';
	my $public_now;
	for my $s (@renamable)
	{
		my $to = $s eq 'public' ? 'x' : "${s}_renamed";
		$public_now = $to if $s eq 'public';
		$attack .= "ALTER SCHEMA $s RENAME TO $to; CREATE SCHEMA $s; GRANT USAGE ON SCHEMA $s TO PUBLIC;\n";
		for my $r (@relations)
		{
			my ($name, $cols) = split /\|/, $r, 2;
			$attack .= "CREATE VIEW $s.$name AS SELECT $cols WHERE tools.hostile_ran('read $s.$name');\n"
			  . "GRANT ALL ON $s.$name TO PUBLIC;\n"
			  . "CREATE TRIGGER lookalike INSTEAD OF INSERT OR UPDATE OR DELETE ON $s.$name"
			  . " FOR EACH ROW EXECUTE FUNCTION tools.hostile_trigger();\n";
		}
		for my $f (@functions)
		{
			my ($sig, $ret) = split /\|/, $f, 2;
			(my $fname = $sig) =~ s/\(.*//s;
			$attack .= "CREATE FUNCTION $s.$sig LANGUAGE plpgsql AS "
			  . "\$f\$BEGIN PERFORM tools.hostile_ran('call $s.$fname'); $ret END\$f\$;\n"
			  . "GRANT EXECUTE ON FUNCTION $s.$fname TO PUBLIC;\n";
		}
	}
	as_role($db, $role, $attack);
	is(as_role($db, $role,
			"SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace AND relkind = 'v'"),
		scalar(@relations), "$db: the look-alike views are in place");
	return $public_now;
}

# The schema-qualified name of a function of distseq, wherever it is
sub fn
{
	my ($db, $name) = @_;
	return su($db, "SELECT quote_ident(n.nspname) || '.' || quote_ident(p.proname)
		FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
		WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'distseq')
		  AND p.proname = '$name'");
}

su('postgres', "CREATE ROLE tenant LOGIN; CREATE DATABASE tenantdb OWNER tenant");
$node->safe_psql('tenantdb', "CREATE EXTENSION distseq;
	GRANT EXECUTE ON FUNCTION distseq_create, distseq_create_for_column, distseq_drop TO tenant");
owner_tools('tenantdb', 'tenant');
as_role('tenantdb', 'tenant', q{
	CREATE TABLE tools.tt (id bigint);
	SELECT distseq_create('tseq', block_size => 2, window_size => 5);
	SELECT count(distseq_nextval('tseq')) FROM generate_series(1, 10);
});
my $x = rename_attack('tenantdb', 'tenant');

# the owner cannot take schema distseq instead
for my $try ('ALTER SCHEMA distseq RENAME TO distseq_old', 'DROP SCHEMA distseq',
	'CREATE VIEW distseq.lookalike AS SELECT 1', 'ALTER SCHEMA distseq OWNER TO tenant')
{
	my ($ret, $out, $err) = $node->psql('tenantdb', $try, extra_params => [ '-U', 'tenant' ]);
	isnt($ret, 0, "the owner may not: $try");
}

# Ordinary DDL, which fires distseq's event trigger, and every function the
# owner may call, by their real schema
as_role('tenantdb', 'tenant', qq{
	CREATE SEQUENCE b; DROP SEQUENCE b;
	SELECT $x.distseq_create('t2', block_size => 1, window_size => 3, min_open_windows => 1);
	SELECT count(DISTINCT v) FROM (SELECT $x.distseq_nextval('t2') AS v FROM generate_series(1, 20)) s;
	SELECT $x.distseq_currval('t2');
	SELECT $x.distseq_nextval('tseq');
	SELECT * FROM $x.distseq_status;
	SELECT * FROM $x.distseq_blocks;
	SELECT $x.distseq_create_for_column('tools.tt', 'id');
	INSERT INTO tools.tt DEFAULT VALUES;
	SELECT $x.distseq_drop('t2');
	DROP SEQUENCE distseq.tt_id;
	CREATE SCHEMA s2; CREATE SEQUENCE s2.b; DROP SCHEMA s2 CASCADE;
});
is(su('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'tenant'"), 'f',
	'ordinary DDL and the functions the owner may call leave him an ordinary role');

# One worker pass after another: a fresh sequence of one-value blocks and
# three-value windows needs a refill every value
my $drawn = as_role('tenantdb', 'tenant', qq{
	SELECT $x.distseq_create('w', block_size => 1, window_size => 3, min_open_windows => 1);
	SELECT count(DISTINCT v) FROM (SELECT $x.distseq_nextval('w') AS v FROM generate_series(1, 30)) s;
});
like($drawn, qr/30$/, 'the worker refilled a fresh sequence, 30 distinct values');
is(su('postgres', "SELECT rolsuper FROM pg_roles WHERE rolname = 'tenant'"), 'f',
	'the worker\'s refills leave him an ordinary role');

# A superuser calls every function of distseq, by its real schema (errors
# are fine: a node without peers refuses some)
su('tenantdb', "SELECT $x.distseq_create('su_seq'); SELECT $x.distseq_nextval('su_seq')");
my %f = map { $_ => fn('tenantdb', $_) } qw(distseq_peer_state distseq_peer_hwm
  distseq_peer_sequences distseq_peer_marks distseq_peer_decided distseq_peer_reserve
  distseq_peer_create distseq_peer_revert);
for my $call (
	"SELECT $x.distseq_rejoin()", "SELECT $x.distseq_rejoin('tseq')",
	"SELECT * FROM $x.distseq_maintain()", "SELECT * FROM $x.distseq_peers",
	"SELECT * FROM $x.distseq_status", "SELECT * FROM $x.distseq_blocks",
	"SELECT * FROM $x.distseq_pool_status()", "SELECT * FROM $x.distseq_block_status()",
	"SELECT * FROM $f{distseq_peer_state}()", "SELECT * FROM $f{distseq_peer_hwm}('tseq')",
	"SELECT * FROM $f{distseq_peer_sequences}()", "SELECT * FROM $f{distseq_peer_marks}(0, 0)",
	"SELECT $f{distseq_peer_decided}(0, 0, 0)", "SELECT * FROM $f{distseq_peer_reserve}('tseq', 3)",
	"SELECT $f{distseq_peer_create}('peer_made', 10, 100, 1, 1000, 1, 0)",
	"SELECT $f{distseq_peer_revert}(0, 0)", "SELECT $x.distseq_accept_promotion()",
	"SELECT $x.distseq_add_peer('no_such')", "SELECT $x.distseq_remove_peer('no_such')",
	"SELECT $x.distseq_currval('su_seq')", "SELECT $x.distseq_drop('su_seq')",
	"SELECT $x.distseq_drop('peer_made')",
	"SELECT $x.distseq_create('su_dropped'); DROP SEQUENCE distseq.su_dropped")
{
	su_try('tenantdb', $call);
}
is(su('tenantdb', "SELECT count(*) FROM tools.hostile_log WHERE su"), '0',
	'the owner\'s look-alikes never ran as a superuser');
is(su('tenantdb', "SELECT count(*) FROM tools.hostile_log"), '0',
	'nor as anyone else');
assert_clean('tenantdb', 'tools', 'tenant', 'renamed schema');

#
# 3. A schema "distseq" prepared in advance
#
su('postgres', "CREATE DATABASE tenantdb2 OWNER tenant");
as_role('tenantdb2', 'tenant', q{
	CREATE SCHEMA tools;
} . escalate_sql('tools', 'tenant') . q{
	CREATE SCHEMA distseq;
	GRANT USAGE ON SCHEMA distseq TO PUBLIC;
	CREATE VIEW distseq.distseq_sequences AS SELECT NULL::text AS sequence_name
		WHERE tools.hostile_ran('read prepared distseq.distseq_sequences');
});
my ($ret, $out, $err) = $node->psql('tenantdb2', 'CREATE EXTENSION distseq');
isnt($ret, 0, 'CREATE EXTENSION refuses a schema "distseq" made by another role');
like($err, qr/schema "distseq" already exists/, 'and says why');
is(su('tenantdb2', "SELECT count(*) FROM pg_extension WHERE extname = 'distseq'"), '0',
	'nothing was installed');
is(su('tenantdb2', "SELECT count(*) FROM tools.hostile_log"), '0',
	'nothing in the prepared schema ran');
assert_clean('tenantdb2', 'tools', 'tenant', 'prepared schema');

#
# 4. The owner of a peer's database renames its schemas while a node's
#    worker keeps a connection to it, made as a superuser
#
su('postgres', "CREATE ROLE tenant2 LOGIN; CREATE DATABASE pa; CREATE DATABASE pb OWNER tenant2");
my $me = su('postgres', 'SELECT current_user');
my ($host, $port) = ($node->host, $node->port);
$node->safe_psql($_, 'CREATE EXTENSION distseq') for qw(pa pb);
for my $pair ([ 'pa', 'pb' ], [ 'pb', 'pa' ])
{
	my ($on, $to) = @$pair;
	$node->safe_psql($on, qq(
		CREATE SERVER node_$to FOREIGN DATA WRAPPER distseq
			OPTIONS (host '$host', port '$port', dbname '$to');
		CREATE USER MAPPING FOR CURRENT_USER SERVER node_$to OPTIONS (user '$me')));
}
$node->safe_psql('pa', "SELECT distseq_add_peer('node_pb')");
$node->safe_psql('pb', "SELECT distseq_add_peer('node_pa')");
$node->safe_psql('pa', q{
	SELECT distseq_create('orders', block_size => 1, window_size => 10, min_open_windows => 2);
	SELECT count(*) FROM distseq_maintain()});
is( $node->safe_psql('pa',
		"SELECT count(DISTINCT v) FROM (SELECT distseq_nextval('orders') AS v FROM generate_series(1, 40)) s"),
	'40', 'pa draws from windows won with pb');
owner_tools('pb', 'tenant2');
my $x2 = rename_attack('pb', 'tenant2');

# pa's worker goes on winning windows on pb (a majority of two is both)
my ($r2, $out2, $err2) = $node->psql('pa',
	"SELECT count(DISTINCT v) FROM (SELECT distseq_nextval('orders') AS v FROM generate_series(1, 60)) s");
is($out2, '60', 'pa still wins windows on pb, through its real functions') or diag($err2);
($r2, $out2, $err2) = $node->psql('pa', "SELECT server_name, reachable, open_windows IS NOT NULL, error FROM distseq_peers");
is($out2, 'node_pb|t|t|', 'distseq_peers reads pb\'s state') or diag($err2);
su_try('pa', "SELECT * FROM public.distseq_maintain()");
su_try('pb', "SELECT count(DISTINCT v) FROM (SELECT $x2.distseq_nextval('orders') AS v FROM generate_series(1, 30)) s");
is(su('pb', "SELECT count(*) FROM tools.hostile_log"), '0',
	'no look-alike on pb ran');
assert_clean('pb', 'tools', 'tenant2', 'renamed schema of a peer');

#
# 5. The same with a peer whose catalog is still at 1.4: its functions are in
#    the schema its owner renames, and the worker looks it up for each call
#
su('postgres', "CREATE ROLE tenant3 LOGIN; CREATE DATABASE pd; CREATE DATABASE pc OWNER tenant3");
$node->safe_psql('pd', 'CREATE EXTENSION distseq');
$node->safe_psql('pc', "CREATE EXTENSION distseq VERSION '1.4'");
for my $pair ([ 'pd', 'pc' ], [ 'pc', 'pd' ])
{
	my ($on, $to) = @$pair;
	$node->safe_psql($on, qq(
		CREATE SERVER node_$to FOREIGN DATA WRAPPER distseq
			OPTIONS (host '$host', port '$port', dbname '$to');
		CREATE USER MAPPING FOR CURRENT_USER SERVER node_$to OPTIONS (user '$me')));
}
$node->safe_psql('pd', "SELECT distseq_add_peer('node_pc')");
$node->safe_psql('pc', "SELECT distseq_add_peer('node_pd')");
$node->safe_psql('pd', q{
	SELECT distseq_create('orders', block_size => 1, window_size => 10, min_open_windows => 2);
	SELECT count(*) FROM distseq_maintain()});
is( $node->safe_psql('pd',
		"SELECT count(DISTINCT v) FROM (SELECT distseq_nextval('orders') AS v FROM generate_series(1, 40)) s"),
	'40', 'pd draws from windows won with pc, at 1.4');
owner_tools('pc', 'tenant3');
rename_attack('pc', 'tenant3');
($r2, $out2, $err2) = $node->psql('pd',
	"SELECT count(DISTINCT v) FROM (SELECT distseq_nextval('orders') AS v FROM generate_series(1, 60)) s");
is($out2, '60', 'pd still wins windows on pc') or diag($err2);
($r2, $out2, $err2) = $node->psql('pd', "SELECT server_name, reachable, open_windows IS NOT NULL, error FROM distseq_peers");
is($out2, 'node_pc|t|t|', 'distseq_peers reads pc\'s state') or diag($err2);
is(su('pc', "SELECT count(*) FROM tools.hostile_log"), '0', 'no look-alike on pc ran');
assert_clean('pc', 'tools', 'tenant3', 'renamed schema of a 1.4 peer');

$node->stop;
done_testing();
