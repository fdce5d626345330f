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
\dx+ distseq

-- keep drawing: the origin is recorded on the next refill, nothing repeats
INSERT INTO seen SELECT distseq_nextval('upgraded') FROM generate_series(1, 100);
SELECT count(*) AS drawn, count(DISTINCT v) AS distinct_values FROM seen;
SELECT origin_system IS NOT NULL AS origin_known,
       origin_database = (SELECT oid FROM pg_database WHERE datname = current_database()) AS same_database,
       origin_relation = seqrel::oid AS same_relation
FROM distseq_sequences WHERE sequence_name = 'upgraded';

-- a marked sequence skips its open windows at the next refill
SELECT distseq_rejoin('upgraded');
SELECT distseq_rejoin('no_such');
INSERT INTO seen SELECT distseq_nextval('upgraded') FROM generate_series(1, 100);
SELECT count(*) AS drawn, count(DISTINCT v) AS distinct_values FROM seen;
-- the skipped round: one closed window of window_size * min_open_windows
SELECT count(*) AS skip_windows FROM distseq_windows
WHERE sequence_name = 'upgraded' AND window_end - window_start = 40
  AND next_hi = window_end;
SELECT has_function_privilege('public', 'distseq_rejoin(text)', 'EXECUTE') AS public_may_rejoin;

-- 1.3 knows peers, but changes of membership need the catalog of 1.4
ALTER EXTENSION distseq UPDATE TO '1.3';
SELECT distseq_remove_peer('no_such');
-- and on to the newest version
ALTER EXTENSION distseq UPDATE;
SELECT pending, proposer FROM distseq_node;
SELECT distseq_remove_peer('no_such');
SELECT extversion FROM pg_extension WHERE extname = 'distseq';
INSERT INTO seen SELECT distseq_nextval('upgraded') FROM generate_series(1, 100);
SELECT count(*) AS drawn, count(DISTINCT v) AS distinct_values FROM seen;
SELECT stripes, stripe FROM distseq_status WHERE sequence_name = 'upgraded';

DROP EXTENSION distseq CASCADE;
