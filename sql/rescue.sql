-- rescue: takes back up to $2 running jobs of queue $1 whose lease ran out (their worker died,
-- froze or lost the database): available again with the lost attempt recorded in errors, or
-- failed when that was the last attempt. Wakes the queue's workers if any became available.
-- Reads pgqueue_jobs_running_idx (queue, id) WHERE status = 'running'.
WITH rescued AS (
    UPDATE pgqueue_jobs AS j
    SET status      = CASE WHEN j.attempt >= j.max_attempts THEN 'failed' ELSE 'available' END,
        finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
        errors      = (CASE WHEN jsonb_array_length(coalesce(j.errors, '[]')) >= $3
                            THEN j.errors - 0 ELSE coalesce(j.errors, '[]') END)
                      || jsonb_build_array(jsonb_build_object(
                             'attempt', j.attempt, 'at', now(),
                             'error', 'lock expired: worker ' || coalesce(j.locked_by, 'unknown')
                                      || ' stopped renewing its lease')),
        lock_until  = NULL,
        lock_token  = NULL,
        locked_by   = NULL
    WHERE j.ctid = ANY (ARRAY(
              SELECT ctid
              FROM pgqueue_jobs
              WHERE queue = $1 AND status = 'running' AND lock_until < now()
              LIMIT $2
              FOR UPDATE SKIP LOCKED))
      AND j.queue = $1
    RETURNING j.status
), notified AS (
    SELECT pgqueue_notify('a ' || $1)
    WHERE EXISTS (SELECT 1 FROM rescued WHERE status = 'available')
)
SELECT count(*) FILTER (WHERE status = 'available'),
       count(*) FILTER (WHERE status = 'failed'),
       (SELECT count(*) FROM notified)
FROM rescued
