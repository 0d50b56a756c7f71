-- retry: makes job $1 of queue $2 available now: a failed, cancelled or kept completed job with a
-- fresh set of attempts (its errors stay), a scheduled one ahead of its time. Running and
-- available jobs are left alone. Wakes the queue's workers. Returns the status the job had; no
-- row if the queue has no such job. Reads the primary key.
WITH target AS (
    SELECT id, status FROM pgqueue_jobs WHERE id = $1 AND queue = $2 FOR UPDATE
), retried AS (
    UPDATE pgqueue_jobs AS j
    SET status = 'available', run_at = now(), finished_at = NULL,
        attempt = CASE WHEN target.status = 'scheduled' THEN j.attempt ELSE 0 END
    FROM target
    WHERE j.id = target.id AND target.status IN ('scheduled', 'completed', 'failed', 'cancelled')
    RETURNING j.id
), notified AS (
    SELECT pgqueue_notify('a ' || $2)
    WHERE EXISTS (SELECT 1 FROM retried)
)
SELECT target.status, (SELECT count(*) FROM notified) FROM target
