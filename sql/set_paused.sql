-- set_paused: pauses ($2 true) or resumes ($2 false) queue $1 for every process, and tells their
-- workers at once ('p' or 'r' and the queue). Reads pgqueue_queues' primary key.
WITH q AS (
    INSERT INTO pgqueue_queues AS q (name, paused) VALUES ($1, $2)
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = now()
    RETURNING q.paused
)
SELECT pgqueue_notify(CASE WHEN q.paused THEN 'p ' ELSE 'r ' END || $1)
FROM q
