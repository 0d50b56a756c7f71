-- prune: for each queue of $1, deletes up to $5 of its finished jobs kept past their retention:
-- completed ones finished more than $2 µs ago, failed more than $3, cancelled more than $4 (each
-- an array beside $1; a NULL element keeps them for ever). Rows another pruner holds are
-- skipped. Returns how many it deleted in all. Reads pgqueue_jobs_finished_idx (queue, status,
-- finished_at, id).
WITH deleted AS (
    DELETE FROM pgqueue_jobs AS j
    WHERE j.ctid = ANY (ARRAY(
              SELECT c.ctid
              FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
                       AS x(queue, completed_us, failed_us, cancelled_us),
                   LATERAL (SELECT ctid
                            FROM pgqueue_jobs
                            WHERE queue = x.queue
                              AND ((status = 'completed' AND finished_at < now() - x.completed_us * interval '1 microsecond')
                                OR (status = 'failed'    AND finished_at < now() - x.failed_us * interval '1 microsecond')
                                OR (status = 'cancelled' AND finished_at < now() - x.cancelled_us * interval '1 microsecond'))
                            LIMIT $5
                            FOR UPDATE SKIP LOCKED) AS c))
    RETURNING 1
)
SELECT count(*) FROM deleted
