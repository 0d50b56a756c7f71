-- list_running: up to $3 running jobs of queue $1 with ids after $2, in id order.
-- Reads the queue's range of pgqueue_jobs_running_idx (queue) WHERE status = 'running' and sorts
-- what it finds: the running jobs of one queue, a few times its processes' slots. The inner
-- select is planned on its own (OFFSET 0), so that the order asked for cannot make the planner
-- walk the primary key through every row of the table instead.
SELECT *
FROM (SELECT id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
             payload, errors, unique_key, repeat_remaining, (extract(epoch FROM repeat_every) * 1e6)::bigint,
             locked_by, lock_until, metadata, key, weight
      FROM pgqueue_jobs
      WHERE queue = $1 AND status = 'running' AND id > $2
      OFFSET 0) AS r
ORDER BY id
LIMIT $3
