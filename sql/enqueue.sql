-- enqueue: inserts one job, scheduled when its run_at lies in the future by the database clock and
-- available otherwise, and, when $9 is true, notifies the schema's channel ('a ' or 's ' and the
-- queue, and for an available job its place in line: pgqueue_line_place) on commit. $1 id, $2 queue, $3 priority, $4 payload, $5 run_at (NULL: now + $6 µs),
-- $6 delay µs, $7 max_attempts, $8 retry delay µs (NULL: exponential back-off), $9 notify,
-- $10 repeat count (-1: forever), $11 repeat every µs, $12 repeat at a fixed rate (repeat_from:
-- the run's due time), $13 metadata (a JSON object, or NULL), $14 flow-control key (or NULL), $15
-- weight (EnqueueOptions.Weight).
WITH job AS (
    INSERT INTO pgqueue_jobs (id, queue, status, priority, payload, run_at, max_attempts, retry_delay,
                              repeat_remaining, repeat_every, repeat_from, metadata, key, weight, counted)
    SELECT $1, $2,
           CASE WHEN t.run_at > now() THEN 'scheduled' ELSE 'available' END,
           $3, $4, t.run_at, $7, $8::bigint * interval '1 microsecond', $10,
           $11::bigint * interval '1 microsecond', CASE WHEN $12::boolean THEN t.run_at END, $13::jsonb, $14, $15, true
    FROM (SELECT coalesce($5::timestamptz, now() + $6::bigint * interval '1 microsecond') AS run_at) AS t
    RETURNING status, run_at, created_at
), counted AS (
    INSERT INTO pgqueue_count_deltas (queue, status, n) SELECT $2, status, 1 FROM job
), notified AS (
    SELECT pgqueue_notify(left(job.status, 1) || ' ' || $2 || CASE WHEN job.status = 'available' THEN ' ' || pgqueue_line_place($3, $1) ELSE '' END)
    FROM job
    WHERE $9::boolean
)
SELECT job.status, job.run_at, job.created_at, (SELECT count(*) FROM notified) FROM job
