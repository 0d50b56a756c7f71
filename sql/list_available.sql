-- list_available: up to $4 available jobs of queue $1 in the order they will run, after the job
-- with priority $2 and id $3: first the rest of that priority, then the lower ones. Each branch
-- is an ordered range of pgqueue_jobs_claim_idx (queue, priority DESC, id), so a page costs the
-- same at the head of a million jobs as at the tail.
(SELECT id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
       payload, errors, unique_key, repeat_remaining, (extract(epoch FROM repeat_every) * 1e6)::bigint,
       locked_by, lock_until
 FROM pgqueue_jobs
 WHERE queue = $1 AND status = 'available' AND priority = $2 AND id > $3
 ORDER BY id
 LIMIT $4)
UNION ALL
(SELECT id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
       payload, errors, unique_key, repeat_remaining, (extract(epoch FROM repeat_every) * 1e6)::bigint,
       locked_by, lock_until
 FROM pgqueue_jobs
 WHERE queue = $1 AND status = 'available' AND priority < $2
 ORDER BY priority DESC, id
 LIMIT $4)
LIMIT $4
