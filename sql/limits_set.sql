-- limits_set: sets the limits of queue $1 for every process — $2 max_running, $3 key_max_running,
-- NULL for none — and tells their workers at once ('l' and the queue). Reads pgqueue_queues'
-- primary key.
WITH q AS (
    INSERT INTO pgqueue_queues AS q (name, max_running, key_max_running) VALUES ($1, $2, $3)
    ON CONFLICT (name) DO UPDATE
        SET max_running = excluded.max_running, key_max_running = excluded.key_max_running,
            updated_at = now()
    RETURNING q.name
)
SELECT pgqueue_notify('l ' || q.name) FROM q
