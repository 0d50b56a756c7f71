-- enqueue_many_json: EnqueueMany for database/sql transactions: inserts the jobs of $1, a JSON
-- array of [id, payload] pairs ([["<uuid>", <payload>], …]), all with the same options, and
-- notifies the schema's channel once on commit. $2 queue, $3 priority, $4 run_at (NULL: now +
-- $5 µs), $5 delay µs, $6 max_attempts, $7 retry delay µs (NULL: exponential back-off),
-- $8 repeat count (-1: forever), $9 repeat every µs, $10 repeat at a fixed rate, $11 metadata (a
-- JSON object, or NULL), $12 key (or NULL), $13 weight. Status, run_at and repeat_from as in enqueue.sql.
-- Not shared with pgx's EnqueueManyTx, which streams the rows with COPY: database/sql has no COPY,
-- and its drivers bind no arrays (lib/pq sends every parameter as text), so here the jobs travel
-- as one json parameter (json, not jsonb: it is only read once, and jsonb caps a document at
-- 256 MB). JSON null stays the json value null through e->1, never SQL NULL.
WITH job AS (
    INSERT INTO pgqueue_jobs (id, queue, status, priority, payload, run_at, max_attempts, retry_delay,
                              repeat_remaining, repeat_every, repeat_from, metadata, key, weight, counted)
    SELECT (e->>0)::uuid, $2,
           CASE WHEN t.run_at > now() THEN 'scheduled' ELSE 'available' END,
           $3, (e->1)::jsonb, t.run_at, $6, $7::bigint * interval '1 microsecond', $8,
           $9::bigint * interval '1 microsecond', CASE WHEN $10::boolean THEN t.run_at END, $11::jsonb, $12, $13, true
    FROM (SELECT coalesce($4::timestamptz, now() + $5::bigint * interval '1 microsecond') AS run_at) AS t,
         json_array_elements($1::json) AS e
    RETURNING status, priority, id
), counted AS (
    INSERT INTO pgqueue_count_deltas (queue, status, n) SELECT $2, status, count(*) FROM job GROUP BY status
), notified AS (
    SELECT pgqueue_notify(left(s.status, 1) || ' ' || $2 || CASE WHEN s.status = 'available' THEN ' ' || s.first ELSE '' END)
    FROM (SELECT status, min(pgqueue_line_place(priority, id) COLLATE "C") AS first FROM job GROUP BY status) AS s
)
SELECT count(*), (SELECT count(*) FROM notified) FROM job
