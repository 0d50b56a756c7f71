-- complete_keep: marks the succeeded jobs ($1 id, $2 lock_token) still held under their token
-- 'completed', for retention to keep; returns their ids. For jobs that do not repeat.
-- Reads the primary key.
UPDATE pgqueue_jobs AS j
SET status = 'completed', finished_at = now(), lock_until = NULL, lock_token = NULL, locked_by = NULL
FROM unnest($1::uuid[], $2::uuid[]) AS c(id, lock_token)
WHERE j.id = c.id AND j.lock_token = c.lock_token
RETURNING j.id
