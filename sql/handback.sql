-- handback: returns jobs ($1 id, $2 lock_token) that a stopping worker did not finish to the queue
-- as available, without charging the attempt they used, and wakes the queue's workers ($3 queue).
-- Returns how many it handed back. Reads the primary key.
WITH back AS (
    UPDATE pgqueue_jobs AS j
    SET status     = 'available',
        attempt    = j.attempt - 1,
        lock_until = NULL,
        lock_token = NULL,
        locked_by  = NULL
    FROM unnest($1::uuid[], $2::uuid[]) AS h(id, lock_token)
    WHERE j.id = h.id AND j.lock_token = h.lock_token
    RETURNING 1
), notified AS (
    SELECT pg_notify(left('pgqueue.' || current_schema(), 63), 'a:' || $3::text)
    WHERE EXISTS (SELECT 1 FROM back)
)
SELECT (SELECT count(*) FROM back), (SELECT count(*) FROM notified)
