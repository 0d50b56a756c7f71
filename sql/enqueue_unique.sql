-- enqueue_unique: enqueue with a unique key $9: inserts the job unless a live (scheduled,
-- available or running) job of the queue has the same key, in which case it inserts nothing and
-- returns no row. Otherwise as enqueue (always notifies). $1 id, $2 queue, $3 priority,
-- $4 payload, $5 run_at, $6 delay µs, $7 max_attempts, $8 retry delay µs, $9 unique key,
-- $10 repeat count (-1: forever), $11 repeat every µs, $12 repeat at a fixed rate, $13 metadata
-- (a JSON object, or NULL), $14 flow-control key (or NULL), $15
-- weight (EnqueueOptions.Weight).
-- Arbiter: pgqueue_jobs_unique_idx. Concurrent enqueues of one key wait for each other.
WITH job AS (
    INSERT INTO pgqueue_jobs (id, queue, status, priority, payload, run_at, max_attempts, retry_delay,
                              unique_key, repeat_remaining, repeat_every, repeat_from, metadata, key, weight, counted)
    SELECT $1, $2,
           CASE WHEN t.run_at > now() THEN 'scheduled' ELSE 'available' END,
           $3, $4, t.run_at, $7, $8::bigint * interval '1 microsecond', $9, $10,
           $11::bigint * interval '1 microsecond', CASE WHEN $12::boolean THEN t.run_at END, $13::jsonb, $14, $15, true
    FROM (SELECT coalesce($5::timestamptz, now() + $6::bigint * interval '1 microsecond') AS run_at) AS t
    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND status IN ('scheduled', 'available', 'running')
    DO NOTHING
    RETURNING status, run_at, created_at
), counted AS (
    INSERT INTO pgqueue_count_deltas (queue, status, n) SELECT $2, status, 1 FROM job
), notified AS (
    SELECT pgqueue_notify(left(job.status, 1) || ' ' || $2 || CASE WHEN job.status = 'available' THEN ' ' || pgqueue_line_place($3, $1) ELSE '' END)
    FROM job
)
SELECT job.status, job.run_at, job.created_at, (SELECT count(*) FROM notified) FROM job
