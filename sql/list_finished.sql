-- list_finished: up to $5 jobs of queue $1 with finished status $2, in the order they finished,
-- after finished_at $3 and id $4, from pgqueue_jobs and from the history (migration
-- 20261214120000), where finished jobs move: a Merge Append of two ranges, each limited to $5,
-- of pgqueue_jobs_finished_idx (queue, status, finished_at, id) and of pgqueue_history_finished_idx
-- (the same columns; a Merge Append of its partitions' ranges, every partition read: nothing
-- bounds a listing's expiry). A job is in one of the two tables, never both, in the statement's
-- snapshot. (With one limit over both, unlimited, the planner did not merge the history's
-- partitions under the union and sorted a sequential scan of both tables.) The status list
-- lets a generic plan use pgqueue_jobs_finished_idx, a partial index of those statuses.
SELECT id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
       payload, errors, unique_key, repeat_remaining, (extract(epoch FROM repeat_every) * 1e6)::bigint,
       locked_by, lock_until, metadata, key, weight
FROM ((SELECT id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
              payload, errors, unique_key, repeat_remaining, repeat_every, locked_by, lock_until, metadata, key, weight
       FROM pgqueue_jobs
       WHERE queue = $1 AND status = $2 AND status IN ('completed', 'failed', 'cancelled') AND (finished_at, id) > ($3, $4)
       ORDER BY finished_at, id
       LIMIT $5)
      UNION ALL
      (SELECT h.id, h.status, h.priority, h.attempt, h.max_attempts, h.run_at, h.created_at, h.attempted_at,
              h.finished_at, h.payload, h.errors, h.unique_key, h.repeat_remaining, h.repeat_every, h.locked_by,
              h.lock_until, h.metadata, h.key, h.weight
       FROM pgqueue_history AS h
       WHERE h.queue = $1 AND h.status = $2 AND (h.finished_at, h.id) > ($3, $4)
       ORDER BY h.finished_at, h.id
       LIMIT $5)) AS f
ORDER BY finished_at, id
LIMIT $5
