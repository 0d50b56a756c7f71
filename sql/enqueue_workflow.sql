-- enqueue_workflow: inserts workflow $1 (name $2, metadata $3, a JSON object or NULL) and its jobs,
-- with their edges, and wakes the queues of those that can run, on commit. The jobs come in $4,
-- a JSON array of objects, one per job: id, queue, step (its name in the workflow), payload,
-- priority, run_at (NULL: now + delay_us µs), delay_us, max_attempts, retry_us (NULL:
-- exponential back-off), metadata, key, weight, waits (its edges not met: 'pending' while more
-- than 0), parent (some job of the workflow depends on it), and run_when (NULL, or 'some_failed'
-- for a callback on failure). The edges come in $5, a JSON
-- array of [parent, child, on_failure, met] (met: the parent, a job from outside the workflow,
-- had completed: see depend_lock.sql), and the ends the resolver must apply at once (parents
-- from outside that had failed or were cancelled) in $6, [[job, outcome], …]. Every job's count
-- is added, and the workflow's unfinished count starts at its number of jobs. All parameters
-- are scalars (JSON as text), so that database/sql drivers bind them as pgx does. JSON null in
-- a payload stays the json value null, never SQL NULL.
WITH flow AS (
    INSERT INTO pgqueue_workflows (id, name, metadata, jobs, unfinished)
    SELECT $1::uuid, $2, $3::jsonb, n, n FROM (SELECT json_array_length($4::json) AS n) AS c
), s AS MATERIALIZED (
    SELECT (e->>'id')::uuid AS id, e->>'queue' AS queue, e->>'step' AS step, (e->'payload')::jsonb AS payload,
           (e->>'priority')::integer AS priority,
           coalesce((e->>'run_at')::timestamptz, now() + (e->>'delay_us')::bigint * interval '1 microsecond') AS run_at,
           (e->>'max_attempts')::integer AS max_attempts, (e->>'retry_us')::bigint * interval '1 microsecond' AS retry_delay,
           (e->'metadata')::jsonb AS metadata, e->>'key' AS key, (e->>'weight')::integer AS weight,
           (e->>'waits')::integer AS waits, (e->>'parent')::boolean AS parent, e->>'run_when' AS run_when
    FROM json_array_elements($4::json) AS e
), job AS (
    INSERT INTO pgqueue_jobs (id, queue, status, priority, payload, run_at, max_attempts, retry_delay,
                              metadata, key, weight, workflow, waits_for, has_dependents, run_when, counted)
    SELECT s.id, s.queue,
           CASE WHEN s.waits > 0 THEN 'pending' WHEN s.run_at > now() THEN 'scheduled' ELSE 'available' END,
           s.priority, s.payload, s.run_at, s.max_attempts, s.retry_delay,
           nullif(s.metadata, 'null'), s.key, s.weight, $1::uuid, s.waits, s.parent, s.run_when, true
    FROM s
    RETURNING queue, status, priority, id
), member AS (
    INSERT INTO pgqueue_workflow_jobs (workflow, job, step) SELECT $1::uuid, s.id, s.step FROM s
), edge AS (
    INSERT INTO pgqueue_deps (parent, child, on_failure, state)
    SELECT (e->>0)::uuid, (e->>1)::uuid, e->>2, CASE WHEN (e->>3)::boolean THEN 'met' ELSE 'waiting' END
    FROM json_array_elements($5::json) AS e
), applied AS (
    INSERT INTO pgqueue_ended (job, outcome)
    SELECT (e->>0)::uuid, e->>1 FROM json_array_elements($6::json) AS e
), counted AS (
    INSERT INTO pgqueue_count_deltas (queue, status, n) SELECT queue, status, count(*) FROM job GROUP BY queue, status
), notified AS (
    SELECT pgqueue_notify(left(j.status, 1) || ' ' || j.queue || CASE WHEN j.status = 'available' THEN ' ' || j.first ELSE '' END)
    FROM (SELECT queue, status, min(pgqueue_line_place(priority, id) COLLATE "C") AS first
          FROM job WHERE status IN ('available', 'scheduled') GROUP BY queue, status) AS j
    UNION ALL
    SELECT pgqueue_notify('e -') WHERE json_array_length($6::json) > 0
)
SELECT count(*), (SELECT count(*) FROM notified) FROM job
