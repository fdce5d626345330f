--
-- A distseq sequence owned by a column, as a serial column owns its
-- sequence: owned_by of distseq_create(), and distseq_create_for_column()
-- always.  Every command that drops the column drops the sequence, and
-- distseq forgets it.
--
CREATE EXTENSION IF NOT EXISTS distseq;
CREATE ROLE regress_ob_owner;
CREATE ROLE regress_ob_member IN ROLE regress_ob_owner;
CREATE ROLE regress_ob_other;
GRANT EXECUTE ON FUNCTION distseq_create, distseq_create_for_column
	TO regress_ob_owner, regress_ob_other;
CREATE SCHEMA ob_app;
GRANT ALL ON SCHEMA ob_app TO regress_ob_owner;

-- the catalog's rows of the sequences of this file
CREATE FUNCTION ob_known(OUT sequence_name text, OUT windows bigint, OUT owner name,
						 OUT owned_by text)
RETURNS SETOF record LANGUAGE sql AS $$
	SELECT s.sequence_name,
		   (SELECT count(*) FROM distseq.distseq_windows w
			WHERE w.sequence_name = s.sequence_name),
		   pg_get_userbyid(c.relowner),
		   (SELECT d.refobjid::regclass || '.' || a.attname
			FROM pg_depend d
			JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
			WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
			  AND d.refclassid = 'pg_class'::regclass AND d.deptype = 'a')
	FROM distseq.distseq_sequences s
	JOIN pg_class c ON c.oid = s.seqrel
	WHERE s.sequence_name LIKE 'ob\_%'
	ORDER BY 1;
$$;

--
-- owned_by links; the sequence belongs to the table's owner
--
CREATE TABLE ob_app.orders (id bigint, note text);
ALTER TABLE ob_app.orders OWNER TO regress_ob_owner;
SET ROLE regress_ob_member;
SELECT distseq_create('ob_orders', block_size => 5, owned_by => 'ob_app.orders.id');
RESET ROLE;
SELECT * FROM ob_known();
SELECT pg_get_serial_sequence('ob_app.orders', 'id');
SELECT distseq_nextval('ob_orders');
-- NULL links nothing
SELECT distseq_create('ob_free', owned_by => NULL);
-- quoted names, a search_path lookup
CREATE TABLE "Ob Mixed" ("Id" bigint);
SELECT distseq_create('ob_mixed', owned_by => '"Ob Mixed"."Id"');
SELECT * FROM ob_known();

--
-- DROP TABLE drops it, and the catalog forgets it
--
DROP TABLE ob_app.orders;
DROP TABLE "Ob Mixed";
SELECT * FROM ob_known();
SELECT distseq_nextval('ob_orders');
-- the same names again: a new sequence, not a block of the old one
CREATE TABLE ob_app.orders (id bigint);
SELECT distseq_create('ob_orders', start_value => 1000, owned_by => 'ob_app.orders.id');
SELECT distseq_nextval('ob_orders');

--
-- ALTER TABLE DROP COLUMN, after renames of the table and the column
--
ALTER TABLE ob_app.orders RENAME TO orders2;
ALTER TABLE ob_app.orders2 RENAME COLUMN id TO order_id;
ALTER TABLE ob_app.orders2 ADD COLUMN other bigint;
SELECT * FROM ob_known();
ALTER TABLE ob_app.orders2 DROP COLUMN other;
SELECT count(*) FROM ob_known();
ALTER TABLE ob_app.orders2 DROP COLUMN order_id;
SELECT * FROM ob_known();

--
-- A rolled back drop leaves it as it was, still issuing above what it issued
--
CREATE TABLE ob_keep (id bigint);
SELECT distseq_create('ob_keep', block_size => 3, owned_by => 'ob_keep.id');
SELECT distseq_nextval('ob_keep') AS before_drop \gset
BEGIN;
DROP TABLE ob_keep;
SELECT count(*) FROM ob_known() WHERE sequence_name = 'ob_keep';
ROLLBACK;
SELECT * FROM ob_known() WHERE sequence_name = 'ob_keep';
SELECT distseq_nextval('ob_keep') > :before_drop AS above;
BEGIN;
SAVEPOINT s;
ALTER TABLE ob_keep DROP COLUMN id;
ROLLBACK TO s;
SELECT distseq_nextval('ob_keep') > :before_drop AS above;
COMMIT;
-- TRUNCATE RESTART IDENTITY restarts the backing relation, not the values
TRUNCATE ob_keep RESTART IDENTITY;
SELECT distseq_nextval('ob_keep') > :before_drop AS above;
-- SET UNLOGGED, which takes an owned sequence along on 15, changes nothing
ALTER TABLE ob_keep SET UNLOGGED;
SELECT distseq_nextval('ob_keep') > :before_drop AS above;
ALTER TABLE ob_keep SET LOGGED;

--
-- DROP ... CASCADE, DROP SCHEMA, DROP OWNED, DROP DOMAIN: every command
--
CREATE VIEW ob_keep_view AS SELECT * FROM ob_keep;
DROP TABLE ob_keep;
DROP TABLE ob_keep CASCADE;
CREATE TABLE ob_app.a (id bigint);
CREATE TABLE ob_app.b (id bigint);
SELECT distseq_create('ob_a', owned_by => 'ob_app.a.id');
SELECT distseq_create_for_column('ob_app.b', 'id', 'ob_b');
CREATE DOMAIN ob_id AS bigint;
CREATE TABLE ob_dom (id ob_id, v int);
SELECT distseq_create('ob_dom', owned_by => 'ob_dom.id');
CREATE TABLE ob_owned (id bigint);
ALTER TABLE ob_owned OWNER TO regress_ob_other;
SET ROLE regress_ob_other;
SELECT distseq_create_for_column('ob_owned', 'id', 'ob_owned');
RESET ROLE;
SELECT * FROM ob_known();
DROP SCHEMA ob_app CASCADE;
DROP DOMAIN ob_id CASCADE;
DROP OWNED BY regress_ob_other;
SELECT * FROM ob_known();
DROP TABLE ob_dom;
-- DROP OWNED took the role's grants too
GRANT EXECUTE ON FUNCTION distseq_create, distseq_create_for_column TO regress_ob_other;

--
-- distseq_create_for_column links always
--
CREATE TABLE ob_col (id int);
INSERT INTO ob_col VALUES (41);
SELECT distseq_create_for_column('ob_col', 'id');
SELECT * FROM ob_known();
INSERT INTO ob_col DEFAULT VALUES RETURNING id;
-- with if_not_exists, an existing sequence stays as it is
CREATE TABLE ob_col2 (id bigint);
SELECT distseq_create_for_column('ob_col2', 'id', 'ob_col_id', if_not_exists => true);
SELECT distseq_create('ob_col_id', owned_by => 'ob_col2.id', if_not_exists => true);
SELECT * FROM ob_known();

--
-- ALTER SEQUENCE OWNED BY, as pg_dump writes it, and OWNED BY NONE
--
ALTER SEQUENCE distseq.ob_col_id OWNED BY ob_col2.id;
SELECT * FROM ob_known();
ALTER SEQUENCE distseq.ob_col_id OWNED BY NONE;
SELECT * FROM ob_known();
DROP TABLE ob_col2;
ALTER SEQUENCE distseq.ob_col_id OWNED BY ob_col.id;
-- with another option too, it is PostgreSQL's: another schema than the table's
ALTER SEQUENCE distseq.ob_col_id OWNED BY ob_col.id CACHE 1;
-- not its owner's table
CREATE TABLE ob_theirs (id bigint);
ALTER TABLE ob_theirs OWNER TO regress_ob_other;
ALTER SEQUENCE distseq.ob_col_id OWNED BY ob_theirs.id;
SET ROLE regress_ob_other;
ALTER SEQUENCE distseq.ob_col_id OWNED BY NONE;
RESET ROLE;
-- ALTER TABLE OWNER TO hands the sequence over, as serial's
ALTER TABLE ob_col OWNER TO regress_ob_owner;
SELECT * FROM ob_known();
ALTER SEQUENCE distseq.ob_col_id OWNER TO regress_ob_other;
-- ALTER TABLE SET SCHEMA would move the sequence out of schema distseq
CREATE SCHEMA ob_other;
ALTER TABLE ob_col SET SCHEMA ob_other;
ALTER SEQUENCE distseq.ob_col_id OWNED BY NONE;
ALTER TABLE ob_col SET SCHEMA ob_other;
SELECT * FROM ob_known();
DROP TABLE ob_other.ob_col;
DROP SCHEMA ob_other;
SELECT distseq_drop('ob_col_id');
-- nor ALTER EXTENSION SET SCHEMA of an extension whose member it is
CREATE SCHEMA ob_ext;
CREATE EXTENSION seg SCHEMA ob_ext;
CREATE TABLE ob_ext.member (id bigint);
SELECT distseq_create('ob_member', owned_by => 'ob_ext.member.id');
ALTER EXTENSION seg ADD TABLE ob_ext.member;
CREATE SCHEMA ob_ext2;
ALTER EXTENSION seg SET SCHEMA ob_ext2;
ALTER EXTENSION seg DROP TABLE ob_ext.member;
ALTER EXTENSION seg SET SCHEMA ob_ext2;
SELECT * FROM ob_known() WHERE sequence_name = 'ob_member';
DROP EXTENSION seg;
DROP SCHEMA ob_ext CASCADE;
DROP SCHEMA ob_ext2;

--
-- Bad input
--
CREATE TABLE ob_tab (id bigint);
SELECT distseq_create('ob_bad', owned_by => 'ob_nosuchtable.id');
SELECT distseq_create('ob_bad', owned_by => 'ob_tab.nosuchcol');
SELECT distseq_create('ob_bad', owned_by => 'ob_tab.ctid');
SELECT distseq_create('ob_bad', owned_by => 'ob_tab');
SELECT distseq_create('ob_bad', owned_by => 'ob_tab.');
SELECT distseq_create('ob_bad', owned_by => 'no_db.public.ob_tab.id');
CREATE VIEW ob_view AS SELECT 1::bigint AS id;
SELECT distseq_create('ob_bad', owned_by => 'ob_view.id');
CREATE SEQUENCE ob_native;
SELECT distseq_create('ob_bad', owned_by => 'ob_native.last_value');
-- a temporary table: its drop at the end of the session tells distseq nothing
CREATE TEMP TABLE ob_temp (id bigint);
SELECT distseq_create('ob_bad', owned_by => 'ob_temp.id');
SELECT distseq_create_for_column('ob_temp', 'id', 'ob_bad');
ALTER SEQUENCE distseq.ob_free OWNED BY ob_temp.id;
-- another owner's table
SET ROLE regress_ob_other;
SELECT distseq_create('ob_bad', owned_by => 'ob_tab.id');
SELECT distseq_create_for_column('ob_tab', 'id', 'ob_bad');
-- not the sequence's owner
ALTER SEQUENCE distseq.ob_free OWNED BY ob_tab.id;
RESET ROLE;
-- nothing was left behind
SELECT * FROM ob_known();

DROP TABLE ob_tab, ob_theirs, ob_temp;
DROP VIEW ob_view;
DROP SEQUENCE ob_native;
SELECT distseq_drop('ob_free');

--
-- A permanent column of a temporary type: the drop of the type at the end
-- of the session (or DISCARD TEMP, or ON COMMIT DROP) drops the column and
-- the sequence, which no event trigger sees; distseq forgets it all the same
--
CREATE DOMAIN pg_temp.ob_tdom AS bigint;
CREATE TABLE ob_tcol (id pg_temp.ob_tdom, v int);
SELECT distseq_create('ob_tdom', owned_by => 'ob_tcol.id');
DISCARD TEMP;
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 'ob_tdom';
SELECT distseq_create('ob_tdom', owned_by => 'ob_tcol.v');
SELECT distseq_nextval('ob_tdom');
BEGIN;
CREATE TEMP TABLE ob_trow (a int) ON COMMIT DROP;
ALTER TABLE ob_tcol ADD COLUMN r ob_trow;
ALTER SEQUENCE distseq.ob_tdom OWNED BY ob_tcol.r;
COMMIT;
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 'ob_tdom';
-- nor does it see a drop under session_replication_role = replica
CREATE TABLE ob_repl (id bigint);
SELECT distseq_create('ob_repl', owned_by => 'ob_repl.id');
SET session_replication_role = replica;
DROP TABLE ob_repl;
RESET session_replication_role;
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 'ob_repl';
SELECT distseq_create('ob_repl', owned_by => 'ob_tcol.v');
-- rolled back, it leaves the sequence as it was
BEGIN;
SAVEPOINT s;
SET LOCAL session_replication_role = replica;
ALTER TABLE ob_tcol DROP COLUMN v;
ROLLBACK TO s;
COMMIT;
SELECT * FROM ob_known() WHERE sequence_name = 'ob_repl';
-- on a node with peers (which a transaction that rolls back pretends to
-- be) a drop under replica is refused, as the trigger refuses it, and the
-- end of a temporary object keeps the sequence, with a warning
CREATE TABLE ob_peers (id bigint, v int);
SELECT distseq_create('ob_peers', owned_by => 'ob_peers.id');
BEGIN;
UPDATE distseq.distseq_node SET epoch = 1;
SAVEPOINT s;
SET LOCAL session_replication_role = replica;
DROP TABLE ob_peers;
ROLLBACK TO s;
CREATE DOMAIN pg_temp.ob_pdom AS bigint;
ALTER TABLE ob_peers ADD COLUMN w pg_temp.ob_pdom;
ALTER SEQUENCE distseq.ob_peers OWNED BY ob_peers.w;
DISCARD TEMP;
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 'ob_peers';
ROLLBACK;
DROP TABLE ob_peers;
DROP TABLE ob_tcol;
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name LIKE 'ob\_%';

DROP FUNCTION ob_known();
REVOKE ALL ON FUNCTION distseq_create, distseq_create_for_column
	FROM regress_ob_owner, regress_ob_other;
DROP ROLE regress_ob_member;
DROP ROLE regress_ob_owner;
DROP ROLE regress_ob_other;
