--
-- distseq_alter(): change a live sequence's block_size, window_size,
-- max_value or min_open_windows, on one server.
--
CREATE EXTENSION IF NOT EXISTS distseq;

SELECT distseq_create('al', block_size => 10, window_size => 1000, max_value => 25);
SELECT distseq_nextval('al') FROM generate_series(1, 25);
-- exhausted at max_value, as native
SELECT distseq_nextval('al');
-- raising max_value makes it issue again, above what it handed out
SELECT distseq_alter('al', max_value => 5000);
SELECT distseq_nextval('al') AS after_raise;
SELECT block_size, window_size, max_value, min_open_windows
FROM distseq.distseq_sequences WHERE sequence_name = 'al';

-- block_size: blocks cut after the call have the new size
SELECT distseq_alter('al', block_size => 100);
SELECT block_size, window_size, max_value, min_open_windows
FROM distseq.distseq_sequences WHERE sequence_name = 'al';
SELECT distseq_nextval('al') AS first_of_block \gset
SELECT count(*) AS drawn FROM (SELECT distseq_nextval('al') FROM generate_series(1, 99)) d;
SELECT distseq_nextval('al') - :first_of_block AS next_block_after;
-- the reserved top is a whole block of 100 above the first value drawn
SELECT max(next_hi) - 1 >= :first_of_block + 99 AS block_of_100
FROM distseq.distseq_windows WHERE sequence_name = 'al';

-- lowering max_value below what was reserved is refused, with the least
-- accepted value: the top of what the windows handed to refills
SELECT max(next_hi) - 1 AS top FROM distseq.distseq_windows
WHERE sequence_name = 'al' AND next_hi > window_start \gset
SELECT distseq_alter('al', max_value => 30);
-- at the top it is accepted; no window lies above it, and the values still
-- pooled were given up with the old generation: nothing is left
SELECT distseq_alter('al', max_value => :top);
SELECT count(*) AS windows_above FROM distseq.distseq_windows
WHERE sequence_name = 'al' AND window_end > :top + 1;
SELECT distseq_nextval('al');
SELECT max_value FROM distseq.distseq_sequences WHERE sequence_name = 'al';

-- window_size and min_open_windows: the windows opened later have them
SELECT distseq_alter('al', window_size => 7, min_open_windows => 3, max_value => :top + 100,
					 block_size => 5);
SELECT block_size, window_size, max_value - :top AS max_above_top, min_open_windows
FROM distseq.distseq_sequences WHERE sequence_name = 'al';
SELECT distseq_nextval('al') - :top AS above_top FROM generate_series(1, 3);
-- (the open ones: those that closed are merged into the row below them)
SELECT (min(window_start) - :top - 1) % 7 AS from_top_in_sevens,
	   array_agg(DISTINCT window_end - window_start) AS sizes, count(*) >= 3 AS min_open
FROM distseq.distseq_windows WHERE sequence_name = 'al' AND window_start > :top
  AND next_hi < window_end;
-- and up to the new max_value, not beyond
SELECT count(*) AS drawn, max(v) - :top AS last_above_top
FROM (SELECT distseq_nextval('al') AS v FROM generate_series(1, 97)) d;
SELECT distseq_nextval('al');

-- lowering to a value above what was reserved: nothing above it comes out
SELECT distseq_create('al_low', block_size => 10, window_size => 100);
SELECT distseq_nextval('al_low');
SELECT max(next_hi) - 1 AS low_top FROM distseq.distseq_windows
WHERE sequence_name = 'al_low' AND next_hi > window_start \gset
SELECT distseq_alter('al_low', max_value => :low_top + 15);
SELECT count(*) AS drawn, max(v) - :low_top AS last_above_top
FROM (SELECT distseq_nextval('al_low') AS v FROM generate_series(1, 15)) d;
SELECT distseq_nextval('al_low');
SELECT max(window_end) - :low_top AS window_end_above_top
FROM distseq.distseq_windows WHERE sequence_name = 'al_low';

-- stripes: max_value counts the server's stripe
SELECT distseq_create('al_striped', stripes => 3, stripe => 1, block_size => 2,
					  window_size => 4, max_value => 10);
SELECT distseq_nextval('al_striped') FROM generate_series(1, 4);
SELECT distseq_nextval('al_striped');
SELECT distseq_alter('al_striped', max_value => 16);
SELECT distseq_nextval('al_striped') FROM generate_series(1, 2);
SELECT distseq_nextval('al_striped');
-- below the stripe's first value: nothing to hand out, refused
SELECT distseq_create('al_striped2', stripes => 3, stripe => 2, start_value => 3, max_value => 10);
SELECT distseq_alter('al_striped2', max_value => 5);
SELECT distseq_alter('al_striped2', max_value => 4);

-- bad arguments
SELECT distseq_alter('al', max_value => 0);
SELECT distseq_alter('al', max_value => 9223372036854775807);
SELECT distseq_alter('al', block_size => 0);
SELECT distseq_alter('al', block_size => 2147483648);
SELECT distseq_alter('al', window_size => -1);
SELECT distseq_alter('al', min_open_windows => 1001);
SELECT distseq_alter('no_such', block_size => 1);
SELECT distseq_alter('', block_size => 1);
SELECT distseq_alter(NULL, block_size => 1);
-- no parameter: nothing changes but the generation
SELECT distseq_alter('al');
SELECT block_size, window_size, max_value, min_open_windows
FROM distseq.distseq_sequences WHERE sequence_name = 'al';

-- not in a transaction block, as distseq_setval()
BEGIN;
SELECT distseq_alter('al', block_size => 50);
ROLLBACK;
-- a statement that fails after it undoes it
SELECT distseq_alter('al', block_size => 50), 1 / 0;
SELECT block_size FROM distseq.distseq_sequences WHERE sequence_name = 'al';

-- the owner of the backing sequence may, as ALTER SEQUENCE; UPDATE is not enough
CREATE ROLE regress_ds_al;
GRANT UPDATE, USAGE ON SEQUENCE distseq.al_low TO regress_ds_al;
SET ROLE regress_ds_al;
SELECT distseq_alter('al_low', block_size => 3);
-- the members' function is not for PUBLIC
SELECT distseq.distseq_peer_alter('al_low', 1, 1, 1, 1, false);
RESET ROLE;
ALTER SEQUENCE distseq.al_low OWNER TO regress_ds_al;
SET ROLE regress_ds_al;
SELECT distseq_alter('al_low', block_size => 3);
RESET ROLE;
SELECT block_size FROM distseq.distseq_sequences WHERE sequence_name = 'al_low';

-- read-only transactions refuse it
SET default_transaction_read_only = on;
SELECT distseq_alter('al', block_size => 7);
RESET default_transaction_read_only;

-- a sequence created in the same transaction (here in a DO block, which is
-- not a transaction block): its first values come from the creating
-- transaction's counter, recorded at commit under the generation it was
-- created with; a change would give it a new one and lose that record, so
-- that the values drawn would come again (a later session drew 1 again).
-- Refused, for setval as for alter: the block rolls back, creation and all.
DO $$
BEGIN
	PERFORM distseq_create('al_tx', block_size => 10);
	PERFORM distseq_nextval('al_tx') FROM generate_series(1, 5);
	PERFORM distseq_alter('al_tx', block_size => 20);
END $$;
DO $$
BEGIN
	PERFORM distseq_create('al_tx2', block_size => 10);
	PERFORM distseq_nextval('al_tx2') FROM generate_series(1, 5);
	PERFORM distseq_setval('al_tx2', 3);
END $$;
DO $$
BEGIN
	PERFORM distseq_create('al_tx3', block_size => 10);
	PERFORM distseq_nextval('al_tx3') FROM generate_series(1, 5);
END $$;
-- committed: it may be changed now, and nothing drawn comes again
SELECT distseq_alter('al_tx3', block_size => 20);
SELECT distseq_nextval('al_tx3') AS after_alter;

-- drawing after it in the same transaction is refused, as after setval
SELECT distseq_create('al_p', block_size => 10);
SELECT distseq_nextval('al_p');
DO $$
BEGIN
	PERFORM distseq_alter('al_p', block_size => 5);
	PERFORM distseq_nextval('al_p');
END $$;
SELECT distseq_nextval('al_p') AS next_after;

SELECT distseq_drop('al'), distseq_drop('al_low'), distseq_drop('al_striped'),
	   distseq_drop('al_striped2'),
	   distseq_drop('al_tx3'), distseq_drop('al_p');
DROP ROLE regress_ds_al;
