--
-- distseq_setval(): move a sequence forward, past values inserted with
-- explicit ids (a bulk load), on one server.
--
CREATE EXTENSION IF NOT EXISTS distseq;

SELECT distseq_create('sv', block_size => 10, window_size => 1000);
SELECT distseq_nextval('sv') AS first;
-- as setval(): returns the value; the next value handed out is above it
SELECT distseq_setval('sv', 3500);
SELECT distseq_nextval('sv');
SELECT distseq_currval('sv'), distseq_lastval();
-- windows below the floor are closed, the mark is past it
SELECT window_start, window_end, next_hi FROM distseq.distseq_windows
WHERE sequence_name = 'sv' ORDER BY window_start;
SELECT hwm >= 3501 AS hwm_past_floor FROM distseq.distseq_sequences WHERE sequence_name = 'sv';

-- currval stays what this session drew, as with setval()
SELECT distseq_setval('sv', 5000);
SELECT distseq_currval('sv'), distseq_lastval();
SELECT distseq_nextval('sv');

-- forward only: below what this server reserved is refused, and says how far
SELECT distseq_setval('sv', 4000);
SELECT distseq_setval('sv', 5000);
-- the highest value reserved is allowed: nothing below it can come again
SELECT max(next_hi) - 1 AS top FROM distseq.distseq_windows WHERE sequence_name = 'sv' \gset
SELECT distseq_setval('sv', :top) = :top AS set_at_top;
SELECT distseq_nextval('sv') > :top AS above_top;

-- bounds, as setval()
SELECT distseq_create('sv_small', start_value => 10, max_value => 100);
SELECT distseq_setval('sv_small', 9);
SELECT distseq_setval('sv_small', 101);
SELECT distseq_setval('sv_small', 99);
SELECT distseq_nextval('sv_small');
-- at max_value: nothing is left
SELECT distseq_setval('sv_small', 100);
SELECT distseq_nextval('sv_small');

-- stripes: the next value of this server's stripe above the floor
SELECT distseq_create('sv_striped', stripes => 3, stripe => 1);
SELECT distseq_nextval('sv_striped');
SELECT distseq_setval('sv_striped', 3500);
SELECT distseq_nextval('sv_striped');
SELECT distseq_setval('sv_striped', 5000);
SELECT distseq_nextval('sv_striped');

-- bad names
SELECT distseq_setval('no_such', 1);
SELECT distseq_setval('', 1);
SELECT distseq_setval(NULL, 1) IS NULL AS strict_null;
SELECT distseq_setval('sv', NULL) IS NULL AS strict_null;

-- not in a transaction block: it cannot be undone once peers applied it
BEGIN;
SELECT distseq_setval('sv', 100000);
ROLLBACK;
-- nor drawn from in the statement that set it
SELECT distseq_setval('sv', 100000), distseq_nextval('sv');
-- a statement that fails after it undoes it: the sequence goes on below the
-- floor that was not set, from a new block
SELECT distseq_nextval('sv') AS before_failed \gset
SELECT distseq_setval('sv', 200000), 1 / 0;
SELECT distseq_nextval('sv') BETWEEN :before_failed + 1 AND 200000 AS goes_on_below;
SELECT max(next_hi) < 200000 AS floor_undone FROM distseq.distseq_windows WHERE sequence_name = 'sv';

-- privileges: UPDATE on the backing sequence, as setval()
CREATE ROLE regress_ds_sv;
SET ROLE regress_ds_sv;
SELECT distseq_setval('sv', 300000);
RESET ROLE;
GRANT USAGE ON SEQUENCE distseq.sv TO regress_ds_sv;
SET ROLE regress_ds_sv;
SELECT distseq_setval('sv', 300000);
RESET ROLE;
GRANT UPDATE ON SEQUENCE distseq.sv TO regress_ds_sv;
SET ROLE regress_ds_sv;
SELECT distseq_setval('sv', 300000);
SELECT distseq_nextval('sv');
RESET ROLE;

-- the members' function is not for PUBLIC
SET ROLE regress_ds_sv;
SELECT distseq.distseq_peer_setval('sv', 1, false);
RESET ROLE;

-- read-only transactions refuse it, as setval()
SET default_transaction_read_only = on;
SELECT distseq_setval('sv', 400000);
RESET default_transaction_read_only;

SELECT distseq_drop('sv'), distseq_drop('sv_small'), distseq_drop('sv_striped');
DROP ROLE regress_ds_sv;
