-- list_scheduled: up to $4 scheduled jobs of queue $1 in the order they fall due, after run_at $2
-- and id $3. Reads pgqueue_jobs_scheduled_idx (queue, run_at, id).
SELECT id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
       payload, errors, unique_key, repeat_remaining, (extract(epoch FROM repeat_every) * 1e6)::bigint,
       locked_by, lock_until, metadata, key, weight
FROM pgqueue_jobs
WHERE queue = $1 AND status = 'scheduled' AND (run_at, id) > ($2, $3)
ORDER BY run_at, id
LIMIT $4
