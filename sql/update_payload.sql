-- update_payload: saves payload $3 of a running job ($1 id) still held under lock token $2.
-- Returns no row once the lock is lost. Reads the primary key.
UPDATE pgqueue_jobs SET payload = $3 WHERE id = $1 AND lock_token = $2 RETURNING 1
