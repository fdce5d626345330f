/* distseq--1.5--1.6.sql: if_not_exists for the creators, distseq_lastval() */

\echo Use "ALTER EXTENSION distseq UPDATE TO '1.6'" to load this file. \quit

-- distseq_create() and distseq_create_for_column() take if_not_exists, for
-- migrations that run again.  A function cannot gain a parameter in place:
-- each is created anew, and the EXECUTE an administrator granted on the old
-- one (to an application role that creates its sequences, say) is granted
-- on the new one.  The old one moves out of the way first, to schema
-- distseq, which only the installing superuser owns, so that its grants can
-- be read from it after the new one exists.
--
-- As in 1.5, every operator and function of general SQL here is named in
-- pg_catalog: this script runs as a superuser with the installation schema
-- first in search_path, where another role may have created look-alikes.
ALTER FUNCTION @extschema@.distseq_create(pg_catalog.text, pg_catalog.int4, pg_catalog.int8,
										  pg_catalog.int8, pg_catalog.int8, pg_catalog.int4,
										  pg_catalog.int4, pg_catalog.int4, pg_catalog.name[])
	SET SCHEMA distseq;
ALTER FUNCTION @extschema@.distseq_create_for_column(pg_catalog.regclass, pg_catalog.name,
													 pg_catalog.text, pg_catalog.int4,
													 pg_catalog.int8, pg_catalog.int8,
													 pg_catalog.int4)
	SET SCHEMA distseq;

-- if_not_exists: a sequence of that name that exists already is left as it
-- is, with a notice, whatever it was created with (as CREATE SEQUENCE IF
-- NOT EXISTS does)
CREATE FUNCTION @extschema@.distseq_create(sequence_name pg_catalog.text,
										   block_size pg_catalog.int4 DEFAULT NULL,
										   window_size pg_catalog.int8 DEFAULT 100000,
										   start_value pg_catalog.int8 DEFAULT 1,
										   max_value pg_catalog.int8 DEFAULT 9223372036854775806,
										   min_open_windows pg_catalog.int4 DEFAULT 2,
										   stripes pg_catalog.int4 DEFAULT 1,
										   stripe pg_catalog.int4 DEFAULT 0,
										   servers pg_catalog.name[] DEFAULT NULL,
										   if_not_exists pg_catalog.bool DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'distseq_create'
LANGUAGE C VOLATILE;

CREATE FUNCTION @extschema@.distseq_create_for_column(tab pg_catalog.regclass, col pg_catalog.name,
													  sequence_name pg_catalog.text DEFAULT NULL,
													  block_size pg_catalog.int4 DEFAULT NULL,
													  window_size pg_catalog.int8 DEFAULT 100000,
													  max_value pg_catalog.int8 DEFAULT NULL,
													  min_open_windows pg_catalog.int4 DEFAULT 2,
													  if_not_exists pg_catalog.bool DEFAULT false)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'distseq_create_for_column'
LANGUAGE C VOLATILE;

-- Configuration changes are not for everybody: a superuser grants them.
REVOKE ALL ON FUNCTION
	@extschema@.distseq_create(pg_catalog.text, pg_catalog.int4, pg_catalog.int8, pg_catalog.int8,
							   pg_catalog.int8, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4,
							   pg_catalog.name[], pg_catalog.bool),
	@extschema@.distseq_create_for_column(pg_catalog.regclass, pg_catalog.name, pg_catalog.text,
										  pg_catalog.int4, pg_catalog.int8, pg_catalog.int8,
										  pg_catalog.int4, pg_catalog.bool)
	FROM PUBLIC;

-- Grant again what was granted on the old functions.  A grant made by a
-- role holding the grant option is made again in the owner's name.
-- GRANT in an extension's script also records the privileges as the
-- extension's own in pg_init_privs, which pg_dump leaves out: put back what
-- the REVOKE above recorded, so that the grants stay the administrator's
-- and pg_dump keeps them.
DO $$
DECLARE
	f record;
	g record;
	init pg_catalog.aclitem[];
BEGIN
	FOR f IN
		SELECT o.oid AS old_oid, o.proowner AS old_owner, o.proacl AS old_acl, n.new_name
		FROM (VALUES
			('distseq.distseq_create(pg_catalog.text, pg_catalog.int4, pg_catalog.int8, pg_catalog.int8,'
			 ' pg_catalog.int8, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4, pg_catalog.name[])',
			 '@extschema@.distseq_create(pg_catalog.text, pg_catalog.int4, pg_catalog.int8,'
			 ' pg_catalog.int8, pg_catalog.int8, pg_catalog.int4, pg_catalog.int4, pg_catalog.int4,'
			 ' pg_catalog.name[], pg_catalog.bool)'),
			('distseq.distseq_create_for_column(pg_catalog.regclass, pg_catalog.name, pg_catalog.text,'
			 ' pg_catalog.int4, pg_catalog.int8, pg_catalog.int8, pg_catalog.int4)',
			 '@extschema@.distseq_create_for_column(pg_catalog.regclass, pg_catalog.name,'
			 ' pg_catalog.text, pg_catalog.int4, pg_catalog.int8, pg_catalog.int8, pg_catalog.int4,'
			 ' pg_catalog.bool)')
		) AS n(old_name, new_name)
		JOIN pg_catalog.pg_proc o
		  ON o.oid OPERATOR(pg_catalog.=) n.old_name::pg_catalog.regprocedure::pg_catalog.oid
	LOOP
		SELECT p.initprivs INTO init
		FROM pg_catalog.pg_init_privs p
		WHERE p.objoid OPERATOR(pg_catalog.=) f.new_name::pg_catalog.regprocedure::pg_catalog.oid
		  AND p.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
		  AND p.objsubid OPERATOR(pg_catalog.=) 0;

		FOR g IN
			SELECT a.grantee, a.is_grantable
			FROM pg_catalog.aclexplode(f.old_acl) a
			WHERE a.privilege_type OPERATOR(pg_catalog.=) 'EXECUTE'::pg_catalog.text
			  AND a.grantee OPERATOR(pg_catalog.<>) f.old_owner
			ORDER BY a.is_grantable DESC, a.grantee
		LOOP
			EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s',
				f.new_name,
				CASE WHEN g.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid THEN 'PUBLIC'::pg_catalog.text
					 ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(g.grantee)::pg_catalog.text) END,
				CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION'::pg_catalog.text ELSE ''::pg_catalog.text END);
		END LOOP;

		UPDATE pg_catalog.pg_init_privs p SET initprivs = init
		WHERE p.objoid OPERATOR(pg_catalog.=) f.new_name::pg_catalog.regprocedure::pg_catalog.oid
		  AND p.classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass::pg_catalog.oid
		  AND p.objsubid OPERATOR(pg_catalog.=) 0;
	END LOOP;
END
$$;

DROP FUNCTION distseq.distseq_create(pg_catalog.text, pg_catalog.int4, pg_catalog.int8,
									 pg_catalog.int8, pg_catalog.int8, pg_catalog.int4,
									 pg_catalog.int4, pg_catalog.int4, pg_catalog.name[]);
DROP FUNCTION distseq.distseq_create_for_column(pg_catalog.regclass, pg_catalog.name,
												pg_catalog.text, pg_catalog.int4,
												pg_catalog.int8, pg_catalog.int8,
												pg_catalog.int4);

-- The last value this session got from any distseq sequence, as lastval():
-- only in the session that drew it, never in a parallel worker.
CREATE FUNCTION @extschema@.distseq_lastval()
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'distseq_lastval'
LANGUAGE C VOLATILE PARALLEL RESTRICTED;
