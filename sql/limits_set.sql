-- limits_set: sets the limits of queue $1 for every process — $2 max_running, $3 key_max_running,
-- $4 rate_limit per $5 µs, $6 key_rate_limit per $7 µs; NULL for none — and tells their workers at
-- once ('l' and the queue). Without a rate limit the queue's logged starts are forgotten. Reads
-- pgqueue_queues' primary key.
WITH q AS (
    INSERT INTO pgqueue_queues AS q (name, max_running, key_max_running, rate_limit, rate_period,
                                     key_rate_limit, key_rate_period)
    VALUES ($1, $2, $3, $4, $5::bigint * interval '1 microsecond', $6, $7::bigint * interval '1 microsecond')
    ON CONFLICT (name) DO UPDATE
        SET max_running = excluded.max_running, key_max_running = excluded.key_max_running,
            rate_limit = excluded.rate_limit, rate_period = excluded.rate_period,
            key_rate_limit = excluded.key_rate_limit, key_rate_period = excluded.key_rate_period,
            updated_at = now()
    RETURNING q.name
), forgotten AS (
    DELETE FROM pgqueue_starts WHERE queue = $1 AND $4::integer IS NULL AND $6::integer IS NULL
)
SELECT pgqueue_notify('l ' || q.name) FROM q
