-- unique_job: the live job of queue $1 with unique key $2, as job.sql returns it (place omitted).
-- Reads pgqueue_jobs_unique_idx.
SELECT queue, id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
       payload, errors, unique_key, repeat_remaining, (extract(epoch FROM repeat_every) * 1e6)::bigint,
       locked_by, lock_until, metadata, key, weight, 0, false
FROM pgqueue_jobs
WHERE queue = $1 AND unique_key = $2 AND status IN ('scheduled', 'available', 'running')
