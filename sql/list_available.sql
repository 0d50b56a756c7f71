-- list_available: up to $4 available jobs of queue $1 in the order they will run (higher priority
-- first, then older id), after the job whose run-order key (-priority, id) is ($2, $3). One
-- ordered range of pgqueue_jobs_claim_idx (queue, (-priority), id), so a page costs the same at
-- the head of a million jobs as at the tail.
SELECT id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
       payload, errors, unique_key, repeat_remaining, (extract(epoch FROM repeat_every) * 1e6)::bigint,
       locked_by, lock_until, metadata, key, weight
FROM pgqueue_jobs
WHERE queue = $1 AND status = 'available' AND (-priority, id) > ($2::int, $3::uuid)
ORDER BY -priority, id
LIMIT $4
