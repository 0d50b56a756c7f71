-- list_running: up to $3 running jobs of queue $1 with ids after $2, in id order.
-- Reads pgqueue_jobs_running_idx (queue, id) WHERE status = 'running'.
SELECT id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
       payload, errors, unique_key, repeat_remaining, (extract(epoch FROM repeat_every) * 1e6)::bigint,
       locked_by, lock_until, metadata, key, weight
FROM pgqueue_jobs
WHERE queue = $1 AND status = 'running' AND id > $2
ORDER BY id
LIMIT $3
