-- runs alone too: the extension may not be there yet
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS distseq;
RESET client_min_messages;
--
-- The status views of sequences at the bounds distseq_create accepts: more
-- values left in the windows than a bigint counts, values at both ends of
-- bigint, striped sequences with many stripes.  Every column of
-- distseq_status and distseq_blocks is read, before and after draws.
--
SELECT distseq_create('bounds_full', block_size => 1, window_size => 9223372036854775807,
                      start_value => -9223372036854775807, max_value => 9223372036854775806);
SELECT distseq_create('bounds_many', block_size => 1000, window_size => 18446744073709551,
                      start_value => -9223372036854775807, min_open_windows => 1000);
-- striped: start_value at least -9223372036854775808 + stripes
SELECT distseq_create('bounds_low3', block_size => 2147483647, window_size => 9223372036854775807,
                      start_value => -9223372036854775805, stripes => 3, stripe => 0);
SELECT distseq_create('bounds_wide', block_size => 5, window_size => 9223372036854775807,
                      start_value => -9223372034707292161,
                      stripes => 2147483647, stripe => 2147483646);
SELECT distseq_create('bounds_top', block_size => 3, window_size => 9223372036854775807,
                      start_value => 9223372036854775801);
SELECT distseq_create('bounds_top3', block_size => 2, window_size => 9223372036854775807,
                      start_value => 9223372036854775790, stripes => 3, stripe => 2);

\x on
SELECT * FROM distseq_status WHERE sequence_name LIKE 'bounds%' ORDER BY sequence_name;
\x off

SELECT distseq_nextval('bounds_full'), distseq_nextval('bounds_many'),
       distseq_nextval('bounds_low3'), distseq_nextval('bounds_wide');
SELECT string_agg(distseq_nextval('bounds_top')::text, ', ') FROM generate_series(1, 4);
SELECT string_agg(distseq_nextval('bounds_top3')::text, ', ') FROM generate_series(1, 3);

-- every column is computed, for every sequence
CREATE TEMP TABLE status_after AS
SELECT * FROM distseq_status WHERE sequence_name LIKE 'bounds%';
SELECT count(*) FROM status_after;
\x on
SELECT sequence_name, pool_start, pool_end, prefetch_start, prefetch_end, open_windows,
       window_values_left, values_issued, values_lost, start_value, max_value,
       window_size, min_open_windows, stripes, stripe
FROM status_after
WHERE sequence_name NOT LIKE 'bounds_top%' ORDER BY sequence_name;
\x off
SELECT sequence_name, window_values_left, values_issued
FROM status_after WHERE sequence_name LIKE 'bounds_top%' ORDER BY sequence_name;
SELECT pid IS NULL AS shared, sequence_name, block_next, block_end, values_left
FROM distseq_blocks WHERE sequence_name LIKE 'bounds%' ORDER BY sequence_name;

-- the last values, then the end
SELECT distseq_nextval('bounds_top'), distseq_nextval('bounds_top');
SELECT distseq_nextval('bounds_top');
SELECT distseq_nextval('bounds_top3');
SELECT distseq_nextval('bounds_top3');
SELECT sequence_name, open_windows, window_values_left, values_issued
FROM distseq_status WHERE sequence_name LIKE 'bounds_top%' ORDER BY sequence_name;

-- runway_seconds beyond numeric(20, 1): 9223372036854775806 values left
-- (a bigint still counts them) going at less than 0.9 a second.  Segments
-- stay at their floor, ten blocks of one value, when they last longer than
-- four segment lifetimes; the rate then falls below 0.9 about eleven
-- seconds after the last refill.
SELECT distseq_create('bounds_runway', block_size => 1, window_size => 4611686018427387903);
ALTER SYSTEM SET distseq.segment_lifetime = '1ms';
SELECT pg_reload_conf();
DO $$
BEGIN
	FOR i IN 1 .. 3000 LOOP
		PERFORM distseq_nextval('bounds_runway');
		EXIT WHEN (SELECT refills FROM distseq_status
				   WHERE sequence_name = 'bounds_runway') >= 2;
		PERFORM pg_sleep(0.01);
	END LOOP;
	FOR i IN 1 .. 600 LOOP
		EXIT WHEN (SELECT values_per_second < 0.9 FROM distseq_status
				   WHERE sequence_name = 'bounds_runway');
		PERFORM pg_sleep(0.05);
	END LOOP;
END
$$;
SELECT segment_size, window_values_left > 9e18 AS values_left_beyond_9e18,
       values_per_second < 0.9 AS slow,
       runway_seconds > 1e19 AS runway_beyond_numeric_20_1,
       runway_seconds = round(window_values_left / values_per_second::numeric, 1)
           AS runway_is_values_left_over_rate,
       scale(runway_seconds) AS runway_scale
FROM distseq_status WHERE sequence_name = 'bounds_runway';
ALTER SYSTEM RESET distseq.segment_lifetime;
SELECT pg_reload_conf();

-- the column types a reader gets
SELECT attname, format_type(atttypid, atttypmod)
FROM pg_attribute
WHERE attrelid = 'distseq_status'::regclass AND attname IN ('window_values_left', 'runway_seconds')
ORDER BY attnum;

SELECT count(*) FROM distseq.distseq_sequences s, LATERAL distseq_drop(s.sequence_name)
WHERE s.sequence_name LIKE 'bounds%';
DROP TABLE status_after;
