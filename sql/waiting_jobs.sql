-- waiting_jobs: the waiting (scheduled or available) jobs of queue $1, oldest first, with the
-- columns of list_*.sql, for ReadWaitingJobs: a test's look at what a transaction enqueued. The
-- planner reads the queue's ranges of pgqueue_jobs_claim_idx and pgqueue_jobs_scheduled_idx, or
-- the table, and sorts: meant for a test's few jobs; Queue.Jobs pages a queue of millions.
SELECT id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
       payload, errors, unique_key, repeat_remaining, (extract(epoch FROM repeat_every) * 1e6)::bigint,
       locked_by, lock_until, metadata, key, weight
FROM pgqueue_jobs
WHERE queue = $1 AND status IN ('scheduled', 'available')
ORDER BY id
