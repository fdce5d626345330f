-- runs alone too: the extension may not be there yet
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS distseq;
RESET client_min_messages;
--
-- Striped sequences: stripe k of N issues only values congruent to k
-- modulo N, so N servers can share a sequence with no coordination.
--
SELECT distseq_create('st0', block_size => 4, window_size => 10, stripes => 3, stripe => 0);
SELECT distseq_create('st1', block_size => 4, window_size => 10, stripes => 3, stripe => 1);
SELECT distseq_create('st2', block_size => 4, window_size => 10, stripes => 3, stripe => 2);
CREATE TEMP TABLE drawn AS
SELECT s, distseq_nextval(s) AS v
FROM (VALUES ('st0'), ('st1'), ('st2')) n(s), generate_series(1, 49);
SELECT s, count(*), min(v), max(v), count(DISTINCT v % 3) AS residues, min(v % 3) AS residue
FROM drawn GROUP BY s ORDER BY s;
SELECT count(*) AS drawn, count(DISTINCT v) AS distinct_values FROM drawn;
SELECT distseq_currval('st1');
SELECT stripes, stripe FROM distseq_status WHERE sequence_name = 'st1';
SELECT block_next, block_end, values_left FROM distseq_blocks WHERE sequence_name = 'st1';

-- start_value and max_value are values; the first and last of the stripe are used
SELECT distseq_create('st_bounds', block_size => 2, window_size => 3,
                      start_value => 10, max_value => 40, stripes => 3, stripe => 2);
SELECT string_agg(distseq_nextval('st_bounds')::text, ',') FROM generate_series(1, 10);
SELECT distseq_nextval('st_bounds');

-- 32-bit limit with stripes
SELECT distseq_create('st_int', start_value => 2147483600, max_value => 2147483647,
                      stripes => 10, stripe => 7);
SELECT max(distseq_nextval('st_int')) FROM generate_series(1, 5);
SELECT distseq_nextval('st_int');

-- bad stripes
SELECT distseq_create('st_bad', stripes => 0);
SELECT distseq_create('st_bad', stripes => 3, stripe => 3);
SELECT distseq_create('st_bad', stripes => 3, stripe => -1);
SELECT distseq_create('st_bad', stripes => 10, stripe => 5, start_value => 1, max_value => 4);

SELECT count(*) FROM (VALUES ('st0'), ('st1'), ('st2'), ('st_bounds'), ('st_int')) n(s),
	LATERAL distseq_drop(s);
