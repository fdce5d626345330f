-- runs alone too: the extension may not be there yet
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS distseq;
RESET client_min_messages;
--
-- Shared memory follows the formula README.md states (shmem.c,
-- distseq_shmem_size), for the allocation named "distseq":
--
--   size = 50,264 + 512 * E + 2,024 * W + 8 * B + 16 * K * B
--
-- with E entries
-- (distseq.max_sequences), W worker slots (max_worker_processes: one per
-- database whose worker runs), B backend slots (MaxBackends) and K slots of
-- marks per backend (distseq.backend_marks).  50,264 bytes are the header
-- and the ring of the reasons of the last 64 failed refills; a backend slot
-- is 8 bytes and a slot of marks 16, the only terms that grow with B, and
-- neither grows with E.  With the defaults (128 entries, 32 marks, 100
-- connections, 8 worker processes) it all stays under a megabyte.
-- test/t/063_many_sequences.pl measures each term on its own.
--
-- MaxBackends: connections, autovacuum workers, background workers, WAL
-- senders and special workers (the autovacuum launcher; from 18 on,
-- autovacuum_worker_slots and the slot sync worker too).
WITH settings AS (
	SELECT current_setting('distseq.max_sequences')::bigint AS entries,
		   current_setting('distseq.backend_marks')::bigint AS marks,
		   current_setting('max_worker_processes')::bigint AS workers,
		   current_setting('max_connections')::bigint
		   + coalesce(current_setting('autovacuum_worker_slots', true)::bigint + 2,
					  current_setting('autovacuum_max_workers')::bigint + 1)
		   + current_setting('max_worker_processes')::bigint
		   + current_setting('max_wal_senders')::bigint AS backends,
		   100 + coalesce(current_setting('autovacuum_worker_slots', true)::bigint + 2,
						  current_setting('autovacuum_max_workers')::bigint + 1)
		   + current_setting('max_worker_processes')::bigint
		   + current_setting('max_wal_senders')::bigint AS default_backends
), measured AS (
	SELECT s.*, a.size
	FROM pg_shmem_allocations a, settings s
	WHERE a.name = 'distseq'
)
SELECT size = 50264 + 512 * entries + 2024 * workers + 8 * backends
			  + 16 * marks * backends AS as_documented,
	   50264 + 512 * 128 + 2024 * 8 + (8 + 16 * 32) * default_backends
		   < 1024 * 1024 AS defaults_under_a_megabyte
FROM measured;

--
-- A backend keeps an entry for each sequence it used, not for each name it
-- was asked for: a stream of names that do not exist, through nextval and
-- currval, leaves its table of sequences small, without the chunks of homes
-- (nametab.c) those names took for a while: they would add 33 kB here.
--
DO $$
BEGIN
	FOR i IN 1..10000 LOOP
		BEGIN
			IF i % 2 = 0 THEN
				PERFORM distseq_nextval('regress_no_such_' || i);
			ELSE
				PERFORM distseq_currval('regress_no_such_' || i);
			END IF;
		EXCEPTION WHEN undefined_object THEN
			NULL;
		END;
	END LOOP;
END
$$;
SELECT total_bytes < 16 * 1024 AS backend_table_small
FROM pg_backend_memory_contexts
WHERE name = 'distseq name table' AND ident = 'distseq local sequences';

--
-- A name is removed from that table when it turns out not to exist, from
-- among names that do, which stay: every sequence this session drew from
-- is found again, with the value it gave.  700 names fill the table's
-- 128 homes (nametab.c, with distseq.max_sequences = 24) and its index to
-- about two thirds; the odd ones are looked up but never drawn from, then
-- dropped, then looked up again, which removes them from the middle of
-- runs that later names probed past, some of them runs that wrap around
-- the end of the index.  On a little-endian machine, where the hashes are
-- known, each of five broken tables loses an even name here: a lookup that
-- stops at a freed home, a name placed at a freed home without looking in
-- the index first, and removals from the index that move no entry back,
-- that move one back past its own slot, or that ignore a run wrapping
-- around.
--
SELECT count(distseq_create('regress_tab_' || i)) FROM generate_series(1, 700) i;
CREATE TEMP TABLE regress_tab_last (i int, v bigint);
DO $$
BEGIN
	FOR i IN 1..700 LOOP
		IF i % 2 = 0 THEN
			INSERT INTO regress_tab_last
			VALUES (i, distseq_nextval('regress_tab_' || i));
			COMMIT;
		ELSE
			BEGIN
				PERFORM distseq_currval('regress_tab_' || i);
			EXCEPTION WHEN object_not_in_prerequisite_state THEN
				NULL;
			END;
		END IF;
	END LOOP;
END
$$;
SELECT count(distseq_drop('regress_tab_' || i))
FROM generate_series(1, 700, 2) i;
CREATE FUNCTION regress_tab_missing(n text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM distseq_currval(n);
	RETURN false;
EXCEPTION WHEN undefined_object THEN
	RETURN true;
END
$$;
SELECT count(*) FILTER (WHERE regress_tab_missing('regress_tab_' || i)) AS missing
FROM generate_series(1, 700, 2) i;
SELECT count(*) FILTER (WHERE distseq_currval('regress_tab_' || i) = v) AS same
FROM regress_tab_last;
SELECT count(distseq_drop('regress_tab_' || i))
FROM generate_series(2, 700, 2) i;
DROP FUNCTION regress_tab_missing;
