-- runs alone too: the extension may not be there yet
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS distseq;
RESET client_min_messages;
--
-- Bad input: each gets a clear error, and nothing is left half done.
--
\set VERBOSITY default
SELECT distseq_create('good');

-- unknown, NULL, empty and over-long names
SELECT distseq_nextval('no_such_sequence');
SELECT distseq_currval('no_such_sequence');
SELECT distseq_drop('no_such_sequence');
SELECT distseq_nextval(NULL);
SELECT distseq_currval(NULL);
SELECT distseq_create(NULL);
SELECT distseq_drop(NULL);
SELECT distseq_nextval('');
SELECT distseq_create('');
SELECT distseq_create(repeat('x', 64));
SELECT distseq_nextval(repeat('x', 64));
SELECT distseq_create(repeat('x', 63)) IS NULL AS longest_name_works;
SELECT distseq_nextval(repeat('x', 63));
-- over-long names stored compressed in line and out of line: measured whole
CREATE TABLE long_names (i int, n text);
ALTER TABLE long_names ALTER COLUMN n SET STORAGE MAIN;
INSERT INTO long_names VALUES (1, repeat('y', 5000));
ALTER TABLE long_names ALTER COLUMN n SET STORAGE EXTERNAL;
INSERT INTO long_names VALUES (2, repeat('z', 3000)), (3, repeat('日', 1000));
SELECT i, pg_column_compression(n) IS NOT NULL AS compressed FROM long_names ORDER BY i;
SELECT pg_relation_size(reltoastrelid) > 0 AS out_of_line FROM pg_class WHERE relname = 'long_names';
SELECT distseq_nextval(n) FROM long_names WHERE i = 1;
SELECT distseq_nextval(n) FROM long_names WHERE i = 2;
SELECT distseq_nextval(n) FROM long_names WHERE i = 3;
DROP TABLE long_names;

-- a sequence that exists already
SELECT distseq_create('good');

-- sizes that are not positive, bounds that do not fit
SELECT distseq_create('bad', block_size => 0);
SELECT distseq_create('bad', block_size => -5);
SELECT distseq_create('bad', window_size => 0);
SELECT distseq_create('bad', min_open_windows => 0);
SELECT distseq_create('bad', start_value => 10, max_value => 9);
SELECT distseq_create('bad', max_value => 9223372036854775807);
SELECT distseq_create('bad', min_open_windows => 1001);
SELECT distseq_create('bad', start_value => -9223372036854775808);
SELECT distseq_create('bad', start_value => -10, max_value => -9223372036854775808);
SELECT distseq_create(repeat('日', 22));
SELECT count(*) FROM distseq.distseq_sequences WHERE sequence_name = 'bad';
SELECT count(*) FROM pg_class WHERE relname = 'bad' AND relnamespace = 'distseq'::regnamespace;

-- drawing past max_value
SELECT distseq_create('short', block_size => 2, window_size => 2, max_value => 3);
SELECT distseq_nextval('short') FROM generate_series(1, 3);
SELECT distseq_nextval('short');
DO $$
BEGIN
	PERFORM distseq_nextval('short');
EXCEPTION WHEN sequence_generator_limit_exceeded THEN
	RAISE NOTICE 'SQLSTATE %', SQLSTATE;
END
$$;

-- currval before any nextval in this session
SELECT distseq_currval('good');

-- read-only transactions, as native nextval
BEGIN READ ONLY;
SELECT distseq_nextval('good');
ROLLBACK;
BEGIN;
SELECT distseq_nextval('good');
SET TRANSACTION READ ONLY;
SELECT distseq_nextval('good');
ROLLBACK;

-- converting a column that cannot hold ids
CREATE TABLE words (w text);
SELECT distseq_create_for_column('words', 'w');
SELECT distseq_create_for_column('words', 'nope');
SELECT distseq_create_for_column(NULL, 'w');
CREATE VIEW words_v AS SELECT * FROM words;
SELECT distseq_create_for_column('words_v', 'w');
SELECT distseq_create_for_column(0::oid::regclass, 'w');
CREATE TABLE small_ids (id smallint);
SELECT distseq_create_for_column('small_ids', 'id', max_value => 40000);
CREATE TABLE full_table (id smallint);
INSERT INTO full_table VALUES (32767);
SELECT distseq_create_for_column('full_table', 'id');

-- more sequences than shared memory holds (distseq.max_sequences), one after
-- the other: no session holds values of its own, so the entries of those it
-- used before are written back and taken over, and none is refused
SELECT count(*) FROM generate_series(1, 25) g, LATERAL distseq_create('many_' || g);
DO $$
BEGIN
	FOR i IN 1..25 LOOP
		BEGIN
			PERFORM distseq_nextval('many_' || i);
		EXCEPTION WHEN configuration_limit_exceeded THEN
			RAISE NOTICE 'stopped: %', SQLERRM;
			EXIT;
		END;
	END LOOP;
END
$$;
-- dropped sequences free their entries again
SELECT count(*) FROM generate_series(1, 25) g, LATERAL distseq_drop('many_' || g);
SELECT distseq_create('after_many');
SELECT distseq_nextval('after_many');

-- GUC values out of range (the range from pg_settings, the refusal by its
-- SQLSTATE: PostgreSQL words the message differently from one major to
-- the next)
SELECT name, min_val, max_val, unit FROM pg_settings
WHERE name = 'distseq.refill_timeout';
DO $$
BEGIN
	PERFORM pg_catalog.set_config('distseq.refill_timeout', '0', false);
EXCEPTION WHEN invalid_parameter_value THEN
	RAISE NOTICE 'distseq.refill_timeout = 0 refused: %', SQLSTATE;
END
$$;
SET distseq.max_sequences = 10;
SET distseq.no_such_setting = 1;
-- distseq.standby_ack: off or all, set for the whole server
SELECT name, setting, unit, min_val, max_val, enumvals, context FROM pg_settings
WHERE name LIKE 'distseq.standby\_ack%' ORDER BY name;
SET distseq.standby_ack = off;
ALTER SYSTEM SET distseq.standby_ack = maybe;

-- in a read-only transaction: refused at once, as native nextval() is
SET default_transaction_read_only = on;
SELECT distseq_nextval('after_many');
SELECT distseq_create('read_only');
SELECT distseq_create_for_column('small_ids', 'id');
SELECT distseq_drop('after_many');
SELECT * FROM distseq_maintain();
SELECT distseq_add_peer('no_such_server');
SELECT distseq_remove_peer('no_such_server');
SELECT distseq_accept_promotion();
-- reads work
SELECT distseq_currval('after_many') > 0 AS has_currval;
SELECT count(*) FROM distseq_status WHERE sequence_name = 'after_many';
RESET default_transaction_read_only;

-- a distseq server takes libpq's options, checked as libpq reads them
CREATE SERVER opts_ok FOREIGN DATA WRAPPER distseq
	OPTIONS (host 'a.example,b.example', port '5432,5433', dbname 'x',
			 target_session_attrs 'read-write', connect_timeout '10');
ALTER SERVER opts_ok OPTIONS (SET port '5432');
ALTER SERVER opts_ok OPTIONS (SET port ',5433');
ALTER SERVER opts_ok OPTIONS (SET port '');
ALTER SERVER opts_ok OPTIONS (SET port '5432,abc');
ALTER SERVER opts_ok OPTIONS (SET port '65536');
ALTER SERVER opts_ok OPTIONS (SET port '-1');
ALTER SERVER opts_ok OPTIONS (SET port ' 5432');
ALTER SERVER opts_ok OPTIONS (SET port '5432;5433');
ALTER SERVER opts_ok OPTIONS (SET connect_timeout '5,6');
ALTER SERVER opts_ok OPTIONS (SET connect_timeout '');
ALTER SERVER opts_ok OPTIONS (ADD user 'app');
CREATE USER MAPPING FOR CURRENT_USER SERVER opts_ok OPTIONS (host 'x');
SELECT srvoptions FROM pg_foreign_server WHERE srvname = 'opts_ok';
DROP SERVER opts_ok;
