-- prune: deletes up to $5 finished jobs of queue $1 kept past their retention: completed ones
-- finished more than $2 µs ago, failed more than $3, cancelled more than $4 (NULL: kept for
-- ever). Rows another pruner holds are skipped. Returns how many it deleted.
-- Reads pgqueue_jobs_finished_idx (queue, status, finished_at, id).
WITH deleted AS (
    DELETE FROM pgqueue_jobs AS j
    WHERE j.ctid = ANY (ARRAY(
              SELECT ctid
              FROM pgqueue_jobs
              WHERE queue = $1
                AND ((status = 'completed' AND finished_at < now() - $2::bigint * interval '1 microsecond')
                  OR (status = 'failed'    AND finished_at < now() - $3::bigint * interval '1 microsecond')
                  OR (status = 'cancelled' AND finished_at < now() - $4::bigint * interval '1 microsecond'))
              LIMIT $5
              FOR UPDATE SKIP LOCKED))
      AND j.queue = $1
    RETURNING 1
)
SELECT count(*) FROM deleted
