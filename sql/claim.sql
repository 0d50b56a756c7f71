-- claim: leases up to $2 available jobs of queue $1, highest priority first, then oldest id, to
-- worker $4 for $3 ms; each claimed job gets a fresh lock token and one more attempt.
-- Reads pgqueue_jobs_claim_idx (queue, priority DESC, id) WHERE status = 'available'; the CTE
-- with LIMIT keeps the planner from locking more rows than it returns.
WITH next AS (
    SELECT id
    FROM pgqueue_jobs
    WHERE queue = $1 AND status = 'available'
    ORDER BY priority DESC, id
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE pgqueue_jobs AS j
SET status       = 'running',
    attempt      = j.attempt + 1,
    lock_token   = gen_random_uuid(),
    lock_until   = now() + $3::bigint * interval '1 millisecond',
    locked_by    = $4,
    attempted_at = now()
FROM next
WHERE j.id = next.id
RETURNING j.id, j.priority, j.attempt, j.max_attempts, j.run_at, j.created_at, j.lock_token,
          j.payload, j.errors
