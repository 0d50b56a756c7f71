-- complete: deletes the succeeded jobs ($1 id, $2 lock_token) that are still held under their
-- token; returns the ids it deleted. A job missing from the result had lost its lock, and its
-- newer attempt stays untouched. For jobs that do not repeat, when retention keeps no completed
-- jobs: the hot path. Reads the primary key.
DELETE FROM pgqueue_jobs AS j
USING unnest($1::uuid[], $2::uuid[]) AS c(id, lock_token)
WHERE j.id = c.id AND j.lock_token = c.lock_token
RETURNING j.id
