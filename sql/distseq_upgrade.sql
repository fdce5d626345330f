--
-- Version 1.0 installed, used by the current library, then updated.
--
CREATE EXTENSION distseq VERSION '1.0';
SELECT extversion FROM pg_extension WHERE extname = 'distseq';
SELECT distseq_create('upgraded', block_size => 5, window_size => 20);
CREATE TEMP TABLE seen (v bigint);
INSERT INTO seen SELECT distseq_nextval('upgraded') FROM generate_series(1, 30);

ALTER EXTENSION distseq UPDATE TO '1.1';
SELECT extversion FROM pg_extension WHERE extname = 'distseq';
-- the extension's objects (row types left out: PostgreSQL 17 and later
-- list those of its tables and views too)
SELECT pg_describe_object(d.classid, d.objid, 0) AS member
FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
WHERE d.refclassid = 'pg_extension'::regclass AND e.extname = 'distseq'
  AND d.deptype = 'e' AND d.classid <> 'pg_type'::regclass
ORDER BY 1;

-- keep drawing: the origin is recorded on the next refill, nothing repeats
INSERT INTO seen SELECT distseq_nextval('upgraded') FROM generate_series(1, 100);
SELECT count(*) AS drawn, count(DISTINCT v) AS distinct_values FROM seen;
SELECT origin_system IS NOT NULL AS origin_known,
       origin_database = (SELECT oid FROM pg_database WHERE datname = current_database()) AS same_database,
       origin_relation = seqrel::oid AS same_relation
FROM distseq_sequences WHERE sequence_name = 'upgraded';

-- a marked sequence skips its open windows at the next refill
CREATE TEMP TABLE old_top AS
SELECT max(window_end) AS top FROM distseq_windows WHERE sequence_name = 'upgraded';
SELECT distseq_rejoin('upgraded');
SELECT distseq_rejoin('no_such');
INSERT INTO seen SELECT distseq_nextval('upgraded') FROM generate_series(1, 100);
SELECT count(*) AS drawn, count(DISTINCT v) AS distinct_values FROM seen;
-- the skipped round: window_size * min_open_windows above the old top
-- (its closed window is merged with the next ones that close)
SELECT count(*) FILTER (WHERE v >= o.top AND v < o.top + 40) AS in_skipped_round,
       count(*) FILTER (WHERE v >= o.top + 40) > 0 AS drawn_above_it
FROM seen, old_top o;
SELECT has_function_privilege('public', 'distseq_rejoin(text)', 'EXECUTE') AS public_may_rejoin;

-- 1.3 knows peers, but changes of membership need the catalog of 1.4
ALTER EXTENSION distseq UPDATE TO '1.3';
SELECT distseq_remove_peer('no_such');
-- on to 1.4, where the catalog is still in the installation schema
ALTER EXTENSION distseq UPDATE TO '1.4';
SELECT pending, proposer FROM distseq_node;
SELECT distseq_remove_peer('no_such');
INSERT INTO seen SELECT distseq_nextval('upgraded') FROM generate_series(1, 100);
SELECT count(*) AS drawn, count(DISTINCT v) AS distinct_values FROM seen;

-- what 1.5 must keep: grants on a sequence, on a function, on a table
CREATE ROLE regress_ds_up;
GRANT USAGE ON SEQUENCE distseq.upgraded TO regress_ds_up;
GRANT EXECUTE ON FUNCTION distseq_rejoin(text) TO regress_ds_up;
GRANT EXECUTE ON FUNCTION distseq_peer_state() TO regress_ds_up;
GRANT SELECT ON distseq_windows TO regress_ds_up;
CREATE TEMP TABLE before_15 AS
SELECT max(v) AS top FROM seen;
CREATE TEMP TABLE acl_14 AS
SELECT c.relname, c.relacl::text FROM pg_class c
WHERE c.relname IN ('distseq_sequences', 'distseq_windows', 'distseq_node',
                    'distseq_peer', 'distseq_seed', 'distseq_change');

-- 1.5 moves the catalog into schema distseq: a distseq sequence named like
-- one of its tables or indexes holds that name there, and the update refuses
SELECT distseq_create('distseq_windows');
SELECT distseq_create('distseq_peer_node_id_key');
-- (the context of the refusal is worded differently from one major to the
-- next)
\set SHOW_CONTEXT never
ALTER EXTENSION distseq UPDATE TO '1.5';
SELECT extversion FROM pg_extension WHERE extname = 'distseq';
SELECT distseq_drop('distseq_windows');
ALTER EXTENSION distseq UPDATE TO '1.5';
SELECT distseq_drop('distseq_peer_node_id_key');
\set SHOW_CONTEXT errors
ALTER EXTENSION distseq UPDATE TO '1.5';
SELECT extversion FROM pg_extension WHERE extname = 'distseq';
SELECT pg_describe_object(d.classid, d.objid, 0) AS member
FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
WHERE d.refclassid = 'pg_extension'::regclass AND e.extname = 'distseq'
  AND d.deptype = 'e' AND d.classid <> 'pg_type'::regclass
ORDER BY 1;

-- the tables and the internal functions moved, the rest stayed
SELECT n.nspname, c.relkind, c.relname
FROM pg_depend d
JOIN pg_class c ON c.oid = d.objid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e'
  AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'distseq')
ORDER BY 1, 2, 3;
SELECT count(*) AS left_in_public FROM pg_class
WHERE relnamespace = 'public'::regnamespace AND relname LIKE 'distseq\_%' AND relkind <> 'v';
-- the tables' grants, the configuration tables pg_dump dumps, function grants
SELECT a.relname, a.relacl = c.relacl::text AS same_acl
FROM acl_14 a JOIN pg_class c ON c.relname = a.relname
WHERE c.relnamespace = 'distseq'::regnamespace ORDER BY 1;
SELECT has_table_privilege('regress_ds_up', 'distseq.distseq_windows', 'SELECT') AS up_reads_windows,
       has_table_privilege('public', 'distseq.distseq_sequences', 'SELECT') AS public_reads_catalog,
       has_function_privilege('regress_ds_up', 'distseq_rejoin(text)', 'EXECUTE') AS up_may_rejoin,
       has_function_privilege('public', 'distseq_rejoin(text)', 'EXECUTE') AS public_may_rejoin,
       has_sequence_privilege('regress_ds_up', 'distseq.upgraded', 'USAGE') AS up_uses_upgraded;
SELECT has_function_privilege('regress_ds_up', 'distseq.distseq_peer_state()', 'EXECUTE') AS up_peer_state,
       has_function_privilege('public', 'distseq.distseq_peer_state()', 'EXECUTE') AS public_peer_state,
       has_function_privilege('public', 'distseq.distseq_peer_cas(text,bigint,bigint,bigint,bigint)', 'EXECUTE') AS public_peer_cas;
SELECT unnest(extconfig)::regclass AS dumped, unnest(extcondition) AS condition
FROM pg_extension WHERE extname = 'distseq' ORDER BY 1::text;

-- the sequence keeps issuing, above everything it issued before
CREATE TEMP TABLE after_15 AS
SELECT distseq_nextval('upgraded') AS v FROM generate_series(1, 100);
SELECT count(DISTINCT v) AS distinct_values, min(v) > (SELECT top FROM before_15) AS above_before,
       (SELECT count(*) FROM after_15 a JOIN seen s USING (v)) AS repeated
FROM after_15;
SELECT stripes, stripe FROM distseq_status WHERE sequence_name = 'upgraded';
-- what peers read of this node instead of the view
SELECT open_windows = (SELECT sum(open_windows) FROM distseq_status) AS same_windows
FROM distseq.distseq_peer_runway();
SELECT count(*) AS block_rows FROM distseq_blocks WHERE sequence_name = 'upgraded';
SELECT pending, proposer FROM distseq.distseq_node;
-- the rejoin and the event trigger find the catalog where it is now
SELECT distseq_rejoin('upgraded');
SELECT distseq_create('dropped_by_ddl');
DROP SEQUENCE distseq.dropped_by_ddl;
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 'dropped_by_ddl';
-- no new sequence may take the name of one of distseq's relations
SELECT distseq_create('distseq_windows');
SELECT distseq_create('distseq_sequences_pkey');
SELECT distseq_nextval('distseq_windows');


-- 1.6 gives the creators if_not_exists: new functions, which keep the
-- grants an administrator made on the old ones, as grants pg_dump dumps
-- (not as the extension's own, in pg_init_privs)
CREATE ROLE regress_ds_up_sub;
GRANT EXECUTE ON FUNCTION distseq_create TO regress_ds_up WITH GRANT OPTION;
GRANT EXECUTE ON FUNCTION distseq_create_for_column TO regress_ds_up;
SET ROLE regress_ds_up;
GRANT EXECUTE ON FUNCTION distseq_create TO regress_ds_up_sub;
SELECT distseq_create('up_by_role_15');
RESET ROLE;
SELECT distseq_nextval('upgraded') AS before_16 \gset
ALTER EXTENSION distseq UPDATE TO '1.6';
SELECT extversion FROM pg_extension WHERE extname = 'distseq';
SELECT pg_get_function_identity_arguments(p.oid) AS args, n.nspname
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.proname IN ('distseq_create', 'distseq_create_for_column', 'distseq_lastval')
ORDER BY p.proname;
SELECT has_function_privilege('regress_ds_up', 'distseq_create(text,integer,bigint,bigint,bigint,integer,integer,integer,name[],boolean)', 'EXECUTE') AS up_may_create,
       has_function_privilege('regress_ds_up', 'distseq_create(text,integer,bigint,bigint,bigint,integer,integer,integer,name[],boolean)', 'EXECUTE WITH GRANT OPTION') AS up_may_grant,
       has_function_privilege('regress_ds_up_sub', 'distseq_create(text,integer,bigint,bigint,bigint,integer,integer,integer,name[],boolean)', 'EXECUTE') AS sub_may_create,
       has_function_privilege('regress_ds_up', 'distseq_create_for_column(regclass,name,text,integer,bigint,bigint,integer,boolean)', 'EXECUTE') AS up_may_create_for_column,
       has_function_privilege('public', 'distseq_create(text,integer,bigint,bigint,bigint,integer,integer,integer,name[],boolean)', 'EXECUTE') AS public_may_create,
       has_function_privilege('public', 'distseq_create_for_column(regclass,name,text,integer,bigint,bigint,integer,boolean)', 'EXECUTE') AS public_may_create_for_column,
       has_function_privilege('public', 'distseq_lastval()', 'EXECUTE') AS public_lastval;
SELECT p.proname, pg_get_userbyid(a.grantee) AS initial_grantee, a.privilege_type
FROM pg_init_privs i
JOIN pg_proc p ON p.oid = i.objoid
CROSS JOIN aclexplode(i.initprivs) a
WHERE i.classoid = 'pg_proc'::regclass
  AND p.proname IN ('distseq_create', 'distseq_create_for_column')
  AND a.grantee <> p.proowner;
-- the role calls them, with the new argument too
CREATE TABLE up_tab (id bigint);
ALTER TABLE up_tab OWNER TO regress_ds_up;
SET ROLE regress_ds_up;
SELECT distseq_create('up_by_role_15', if_not_exists => true);
SELECT distseq_create('up_by_role_16');
SELECT distseq_create_for_column('up_tab', 'id');
SELECT distseq_create_for_column('up_tab', 'id', if_not_exists => true);
RESET ROLE;
SET ROLE regress_ds_up_sub;
SELECT distseq_create('up_by_sub', if_not_exists => true);
RESET ROLE;
-- the sequence keeps issuing above what it issued, and lastval follows
SELECT distseq_nextval('upgraded') > :before_16 AS above_before,
       distseq_lastval() = distseq_currval('upgraded') AS lastval_is_currval;

-- 1.7: a column may own a distseq sequence.  Before the update the library
-- links none (a 1.6 catalog would keep one its table's drop took along) and
-- refuses the link that pg_dump writes
SELECT count(*) AS linked_at_16 FROM pg_depend
WHERE classid = 'pg_class'::regclass AND objid = 'distseq.up_tab_id'::regclass AND deptype = 'a';
ALTER SEQUENCE distseq.up_tab_id OWNED BY up_tab.id;
SELECT distseq_nextval('upgraded') AS before_17 \gset
ALTER EXTENSION distseq UPDATE TO '1.7';
SELECT extversion FROM pg_extension WHERE extname = 'distseq';
SELECT pg_get_function_identity_arguments(p.oid) AS args, n.nspname
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.proname = 'distseq_create';
-- the grants stay, as the administrator's
SELECT has_function_privilege('regress_ds_up', 'distseq_create(text,integer,bigint,bigint,bigint,integer,integer,integer,name[],boolean,text)', 'EXECUTE') AS up_may_create,
       has_function_privilege('regress_ds_up', 'distseq_create(text,integer,bigint,bigint,bigint,integer,integer,integer,name[],boolean,text)', 'EXECUTE WITH GRANT OPTION') AS up_may_grant,
       has_function_privilege('regress_ds_up_sub', 'distseq_create(text,integer,bigint,bigint,bigint,integer,integer,integer,name[],boolean,text)', 'EXECUTE') AS sub_may_create,
       has_function_privilege('public', 'distseq_create(text,integer,bigint,bigint,bigint,integer,integer,integer,name[],boolean,text)', 'EXECUTE') AS public_may_create;
SELECT p.proname, pg_get_userbyid(a.grantee) AS initial_grantee, a.privilege_type
FROM pg_init_privs i
JOIN pg_proc p ON p.oid = i.objoid
CROSS JOIN aclexplode(i.initprivs) a
WHERE i.classoid = 'pg_proc'::regclass
  AND p.proname = 'distseq_create'
  AND a.grantee <> p.proowner;
SELECT evtname, evttags FROM pg_event_trigger WHERE evtname = 'distseq_on_drop';
-- the old sequences keep issuing above what they issued
SELECT distseq_nextval('upgraded') > :before_17 AS above_before;
-- a sequence made before the update is linked as pg_dump writes it
ALTER SEQUENCE distseq.up_tab_id OWNED BY up_tab.id;
SELECT pg_get_serial_sequence('up_tab', 'id');
-- the role creates one owned by its table, and the table's drop takes it
CREATE TABLE up_tab2 (id bigint);
ALTER TABLE up_tab2 OWNER TO regress_ds_up;
SET ROLE regress_ds_up;
SELECT distseq_create('up_by_role_17', owned_by => 'up_tab2.id');
SELECT distseq_create_for_column('up_tab2', 'id');
RESET ROLE;
DROP TABLE up_tab2;
SELECT sequence_name FROM distseq.distseq_sequences
WHERE sequence_name IN ('up_by_role_17', 'up_tab2_id');

-- ---- 1.7: settling a membership change whose proposer is lost ----
-- ballots on the node row, all 0 on a node that never promised one, and
-- two functions peers call, with the owner's rights, that nobody else may
SELECT promised_round, promised_node, accepted_round, accepted_node FROM distseq.distseq_node;
SELECT p.proname, p.pronargs, p.prosecdef,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may,
       has_function_privilege('regress_ds_up', p.oid, 'EXECUTE') AS up_may
FROM pg_proc p
WHERE p.pronamespace = 'distseq'::regnamespace
  AND p.proname IN ('distseq_peer_prepare', 'distseq_peer_accept')
ORDER BY p.proname;
-- a prepare names the node meant; on this node, a promise, then a refusal
-- of the same ballot, and an accept of a lower one fails
SELECT answer FROM distseq.distseq_peer_prepare(0, 0, 1, 1, 12345);
SELECT p.answer, p.promised_round, p.promised_node, p.accepted_round, p.pending
FROM distseq.distseq_node n,
     LATERAL distseq.distseq_peer_prepare(n.epoch, n.epoch_id, 1, 7, n.node_id) p;
SELECT p.answer, p.promised_round, p.promised_node
FROM distseq.distseq_node n,
     LATERAL distseq.distseq_peer_prepare(n.epoch, n.epoch_id, 1, 7, n.node_id) p;
SELECT distseq.distseq_peer_accept(n.epoch, n.epoch_id, 1, 6, n.epoch + 1, 99, n.members, n.node_id)
FROM distseq.distseq_node n;
SELECT promised_round, promised_node, pending FROM distseq.distseq_node;

-- ---- 1.7: distseq_setval() ----
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args, n.nspname,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.proname IN ('distseq_setval', 'distseq_peer_setval')
ORDER BY p.proname;
SELECT distseq_setval('upgraded', 1000000);
SELECT distseq_nextval('upgraded') > 1000000 AS above_setval;

-- ---- 1.7: distseq_alter() ----
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args, n.nspname,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public_may
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE p.proname IN ('distseq_alter', 'distseq_peer_alter')
ORDER BY p.proname;
SELECT distseq_alter('upgraded', block_size => 7, max_value => 2000000);
SELECT block_size, max_value FROM distseq.distseq_sequences WHERE sequence_name = 'upgraded';
SELECT distseq_nextval('upgraded') BETWEEN 1000000 AND 2000000 AS within_new_max;

DROP TABLE up_tab;
SELECT count(*) AS up_tab_id_left FROM distseq.distseq_sequences WHERE sequence_name = 'up_tab_id';
REVOKE ALL ON FUNCTION distseq_rejoin(text) FROM regress_ds_up;
REVOKE ALL ON FUNCTION distseq.distseq_peer_state() FROM regress_ds_up;
DROP EXTENSION distseq CASCADE;
DROP ROLE regress_ds_up_sub;
DROP ROLE regress_ds_up;
