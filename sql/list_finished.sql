-- list_finished: up to $5 jobs of queue $1 with finished status $2, in the order they finished,
-- after finished_at $3 and id $4. Reads pgqueue_jobs_finished_idx (queue, status, finished_at, id).
SELECT id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
       payload, errors, unique_key, repeat_remaining, (extract(epoch FROM repeat_every) * 1e6)::bigint,
       locked_by, lock_until, metadata, key, weight
FROM pgqueue_jobs
WHERE queue = $1 AND status = $2 AND (finished_at, id) > ($3, $4)
ORDER BY finished_at, id
LIMIT $5
