-- list_pending: up to $3 pending jobs of queue $1 (waiting for the jobs they depend on) with ids
-- after $2, in id order: the order they were enqueued in. No index holds pending jobs (the claim
-- never reads them, and a workflow's steps wait there as long as their parents run), so a page
-- reads pgqueue_jobs itself, filtered: its cost grows with the table. It is read only when the
-- queue has pending jobs at all, by their count (pgqueue_counts plus the deltas not folded in
-- yet, as stats.sql sums them: a few rows), so that a listing of a queue without any costs no
-- scan.
SELECT id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
       payload, errors, unique_key, repeat_remaining, (extract(epoch FROM repeat_every) * 1e6)::bigint,
       locked_by, lock_until, metadata, key, weight
FROM pgqueue_jobs
WHERE queue = $1 AND status = 'pending' AND id > $2
  AND (SELECT sum(c.n)
       FROM (SELECT n FROM pgqueue_counts WHERE queue = $1 AND status = 'pending'
             UNION ALL
             SELECT n FROM pgqueue_count_deltas WHERE queue = $1 AND status = 'pending') AS c) > 0
ORDER BY id
LIMIT $3
