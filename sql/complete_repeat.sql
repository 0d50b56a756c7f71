-- complete_repeat: complete for jobs that may repeat (and for Job.CompleteTx): settles the
-- succeeded jobs ($1 id, $2 lock_token, $4 keep) still held under their token, deleting them,
-- or when keep (retention of their queue keeps completed jobs, or the job is a step of a
-- workflow) marking them 'completed', with the result the handler recorded ($5, jsonb; NULL:
-- none). A job with repeats left is followed, in the same statement, by a new job with id $3 at
-- the back of the line, due repeat_every after now, or, for a job that repeats at a fixed rate
-- (repeat_from set), at the first time repeat_from + k * repeat_every (k >= 1) after now, which
-- becomes the new job's repeat_from too (a repeat_every that is not positive, which no enqueue
-- stores, gives no grid: due now + repeat_every, never a division by zero), with the job's
-- metadata; if a live job with its unique key exists already, that one is the next run and none
-- is added. Returns the id of each settled job and of its repeat (NULL if none). A job missing
-- from the result had lost its lock (its newer attempt stays untouched), or its row is locked
-- by another transaction: it skips such a row, as complete.sql does (Job.CompleteTx locks the
-- row first, with hold_row.sql, so that it waits instead). It sets pgqueue.completing for the
-- rest of the transaction, as complete.sql does.
-- Counts what it inserts and moves itself (see the count_moves migration). Reads the primary
-- key.
WITH held AS (
    SELECT p.ctid, c.next_id, c.keep, c.result
    FROM pgqueue_jobs AS p
    JOIN unnest($1::uuid[], $2::uuid[], $3::uuid[], $4::boolean[], $5::jsonb[]) AS c(id, lock_token, next_id, keep, result)
      ON p.id = c.id AND p.lock_token = c.lock_token
    WHERE (NOT c.keep OR p.status = 'running') AND (SELECT set_config('pgqueue.completing', 'on', true)) = 'on'
    FOR UPDATE OF p SKIP LOCKED
), settled AS (
    DELETE FROM pgqueue_jobs AS j
    USING held AS c
    WHERE NOT c.keep AND j.ctid = c.ctid
    RETURNING j.id, c.next_id, j.queue, j.priority, j.payload, j.max_attempts, j.retry_delay,
              j.unique_key, j.repeat_remaining, j.repeat_every, j.repeat_from, j.metadata, j.key, j.weight
), kept AS (
    UPDATE pgqueue_jobs AS j
    SET counted = NOT j.counted, status = 'completed', finished_at = now(),
        attempted_at = coalesce(j.attempted_at, now()), -- started ahead, its start not yet recorded
        lock_until = NULL, lock_token = NULL, locked_by = NULL, result = coalesce(c.result, j.result)
    FROM held AS c
    WHERE c.keep AND j.ctid = c.ctid
    RETURNING j.id, c.next_id, j.queue, j.priority, j.payload, j.max_attempts, j.retry_delay,
              j.unique_key, j.repeat_remaining, j.repeat_every, j.repeat_from, j.metadata, j.key, j.weight
), done AS (
    SELECT * FROM settled UNION ALL SELECT * FROM kept
), repeated AS (
    INSERT INTO pgqueue_jobs (id, queue, status, priority, payload, run_at, max_attempts, retry_delay,
                              unique_key, repeat_remaining, repeat_every, repeat_from, metadata, key, weight, counted)
    SELECT d.next_id, d.queue,
           CASE WHEN n.run_at > now() THEN 'scheduled' ELSE 'available' END,
           d.priority, d.payload, n.run_at, d.max_attempts,
           d.retry_delay, d.unique_key,
           CASE WHEN d.repeat_remaining > 0 THEN d.repeat_remaining - 1 ELSE -1 END, d.repeat_every,
           CASE WHEN d.repeat_from IS NOT NULL THEN n.run_at END, d.metadata, d.key, d.weight, true
    FROM done AS d,
         LATERAL (SELECT CASE
                  WHEN d.repeat_from IS NULL OR NOT coalesce(d.repeat_every > interval '0', false)
                      THEN now() + coalesce(d.repeat_every, interval '0')
                  ELSE d.repeat_from + d.repeat_every *
                       (greatest(floor(extract(epoch FROM now() - d.repeat_from) / extract(epoch FROM d.repeat_every)), 0) + 1)
                  END AS run_at) AS n
    WHERE d.repeat_remaining <> 0
    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND status IN ('scheduled', 'available', 'running')
    DO NOTHING
    RETURNING id, queue, status
), counted AS (
    INSERT INTO pgqueue_count_deltas (queue, status, n) SELECT queue, status, count(*) FROM repeated GROUP BY queue, status
), counted_kept AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg('running'::text), array_agg('completed'::text)) FROM kept
)
SELECT done.id, repeated.id FROM done LEFT JOIN repeated ON repeated.id = done.next_id, counted_kept
