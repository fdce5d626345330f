-- runs alone too: the extension may not be there yet
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS distseq;
RESET client_min_messages;
--
-- Shared memory is what README.md states: 64 bytes, plus 3272 bytes per
-- sequence entry (distseq.max_sequences of them), plus 8 + 8 bytes per
-- sequence entry for each backend slot (MaxBackends of them).
--
-- MaxBackends: connections, autovacuum workers, background workers, WAL
-- senders and special workers (the autovacuum launcher; from 18 on,
-- autovacuum_worker_slots and the slot sync worker too).
WITH settings AS (
	SELECT current_setting('distseq.max_sequences')::bigint AS sequences,
		   current_setting('max_connections')::bigint
		   + coalesce(current_setting('autovacuum_worker_slots', true)::bigint + 2,
					  current_setting('autovacuum_max_workers')::bigint + 1)
		   + current_setting('max_worker_processes')::bigint
		   + current_setting('max_wal_senders')::bigint AS backends
)
SELECT a.size = 64 + 3272 * s.sequences + (8 + 8 * s.sequences) * s.backends
		   AS as_documented,
	   a.size < 1024 * 1024 AS under_a_megabyte
FROM pg_shmem_allocations a, settings s
WHERE a.name = 'distseq';

--
-- A backend keeps an entry for each sequence it used, not for each name it
-- was asked for: a stream of names that do not exist, through nextval and
-- currval, leaves its table of sequences small.
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
SELECT total_bytes < 64 * 1024 AS backend_table_small
FROM pg_backend_memory_contexts WHERE name = 'distseq local sequences';
