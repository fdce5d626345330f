--
-- The SQL surface of distseq: create, draw, status, drop, conversion of
-- existing columns, privileges.
--
CREATE EXTENSION distseq;

SELECT distseq_create('orders');
SELECT distseq_create('tickets', block_size => 50, window_size => 100000,
                      start_value => 1000001, max_value => 2147483647);

CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT distseq_nextval('orders'), item text);
INSERT INTO orders (item) VALUES ('a'), ('b'), ('c');
SELECT id, item FROM orders ORDER BY id;
SELECT distseq_currval('orders');
SELECT distseq_nextval('tickets'), distseq_nextval('tickets');

-- one refill served the whole block; windows were opened ahead
SELECT sequence_name, backing_sequence, block_size, segment_size, pool_start, pool_end,
       open_windows, window_values_left, refills, values_issued, values_lost
FROM distseq_status ORDER BY sequence_name;
SELECT pid IS NULL AS shared, sequence_name, block_next, block_end, values_left
FROM distseq_blocks ORDER BY sequence_name;
SELECT * FROM distseq.distseq_windows ORDER BY sequence_name, window_start;

-- a rollback gives nothing back; values keep growing in the session
BEGIN;
SELECT distseq_nextval('orders');
ROLLBACK;
SELECT distseq_nextval('orders');
SELECT distseq_currval('orders');

-- a non-constant name works too
SELECT s, distseq_nextval(s) FROM (VALUES ('orders'), ('tickets'), ('orders')) v(s);

-- 32-bit range up to max_value exactly, across several windows and blocks
SELECT distseq_create('tiny', block_size => 3, window_size => 4,
                      start_value => 2147483640, max_value => 2147483647);
SELECT distseq_nextval('tiny') FROM generate_series(1, 8);
SELECT distseq_nextval('tiny');
SELECT distseq_nextval('tiny');
SELECT open_windows, window_values_left FROM distseq_status WHERE sequence_name = 'tiny';

-- a refill that closes a window opens the next one in the same transaction:
-- every segment (at least 10 blocks) takes a whole window here, so after each
-- refill, however many the worker has done ahead, min_open_windows are open
-- above one merged closed row
SELECT distseq_create('closing', block_size => 5, window_size => 10,
                      min_open_windows => 2);
SELECT distseq_nextval('closing');
SELECT count(*) FILTER (WHERE next_hi < window_end) AS open,
       count(*) FILTER (WHERE next_hi = window_end) AS closed
FROM distseq.distseq_windows WHERE sequence_name = 'closing';
SELECT count(distseq_nextval('closing')) FROM generate_series(1, 40);
SELECT count(*) FILTER (WHERE next_hi < window_end) AS open,
       count(*) FILTER (WHERE next_hi = window_end) AS closed
FROM distseq.distseq_windows WHERE sequence_name = 'closing';
SELECT distseq_drop('closing');

-- drop and re-create under the same name: nothing cached for the old one is used
SELECT distseq_nextval('tickets');
SELECT distseq_drop('tickets');
SELECT count(*) FROM distseq.distseq_windows WHERE sequence_name = 'tickets';
SELECT distseq_create('tickets', start_value => 5);
SELECT distseq_nextval('tickets');
SELECT distseq_currval('tickets');

-- DROP SEQUENCE on the backing sequence drops the distseq sequence too
SELECT distseq_create('scratch');
DROP SEQUENCE distseq.scratch;
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 'scratch';
SELECT distseq_create('scratch');
SELECT distseq_drop('scratch');

-- dropping inside a transaction that rolls back keeps the sequence
BEGIN;
SELECT distseq_drop('orders');
ROLLBACK;
SELECT distseq_nextval('orders') > 3 AS still_there;

-- names are taken as they are written
SELECT distseq_create('Mixed Case "name"');
SELECT distseq_nextval('Mixed Case "name"');
SELECT distseq_drop('Mixed Case "name"');

-- take over a serial column and an identity column, starting above their ids
CREATE TABLE legacy (id serial PRIMARY KEY, v text);
INSERT INTO legacy (v) VALUES ('x'), ('y'), ('z');
SELECT distseq_create_for_column('legacy', 'id');
INSERT INTO legacy (v) VALUES ('new') RETURNING id;
SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef
WHERE adrelid = 'legacy'::regclass;
SELECT start_value, max_value FROM distseq_status WHERE sequence_name = 'legacy_id';

CREATE TABLE ident (id int GENERATED ALWAYS AS IDENTITY, v text);
INSERT INTO ident (v) SELECT 'v' || g FROM generate_series(1, 41) g;
SELECT distseq_create_for_column('ident', 'id', 'ident_seq', block_size => 10);
INSERT INTO ident (v) VALUES ('new') RETURNING id;
SELECT attidentity FROM pg_attribute WHERE attrelid = 'ident'::regclass AND attname = 'id';

-- ownership and privileges follow the backing sequence
CREATE ROLE distseq_alice;
CREATE ROLE distseq_bob;
SELECT has_function_privilege('distseq_bob', 'distseq_create(text,integer,bigint,bigint,bigint,integer,integer,integer,name[],boolean,text)', 'EXECUTE') AS bob_may_create,
       has_function_privilege('distseq_bob', 'distseq_drop(text)', 'EXECUTE') AS bob_may_drop,
       has_function_privilege('distseq_bob', 'distseq_nextval(text)', 'EXECUTE') AS bob_may_draw;
GRANT EXECUTE ON FUNCTION distseq_create(text,integer,bigint,bigint,bigint,integer,integer,integer,name[],boolean,text),
                          distseq_drop(text) TO distseq_alice;
SET ROLE distseq_alice;
SELECT distseq_create('alice_seq');
SELECT distseq_nextval('alice_seq');
SELECT sequence_name FROM distseq_status ORDER BY 1;
RESET ROLE;
SELECT relowner::regrole FROM pg_class WHERE oid = 'distseq.alice_seq'::regclass;
SET ROLE distseq_bob;
SELECT distseq_nextval('alice_seq');
SELECT distseq_currval('alice_seq');
SELECT count(*) FROM distseq_status;
SELECT count(*) FROM distseq.distseq_windows;
RESET ROLE;
SET ROLE distseq_alice;
GRANT USAGE ON SEQUENCE distseq.alice_seq TO distseq_bob;
RESET ROLE;
SET ROLE distseq_bob;
SELECT distseq_nextval('alice_seq');
SELECT sequence_name FROM distseq_status ORDER BY 1;
SELECT distseq_drop('alice_seq');
RESET ROLE;
GRANT EXECUTE ON FUNCTION distseq_drop(text) TO distseq_bob;
SET ROLE distseq_bob;
SELECT distseq_drop('alice_seq');
RESET ROLE;
SET ROLE distseq_alice;
SELECT distseq_drop('alice_seq');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION distseq_create(text,integer,bigint,bigint,bigint,integer,integer,integer,name[],boolean,text),
                           distseq_drop(text) FROM distseq_alice, distseq_bob;
DROP ROLE distseq_alice;
DROP ROLE distseq_bob;
