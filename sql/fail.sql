-- fail: records a failed attempt of each job ($1 id, $2 lock_token) still held under its token,
-- with its error $5 and stack $6, then ends it 'failed' when $4 says so, or puts it back: after
-- the job's own retry_delay if it has one, else after $3 µs (the worker's back-off), 'scheduled'
-- while that lies ahead and 'available' when it is zero. errors keeps the newest $7 entries.
-- Returns id, new status and run_at of each job it changed. Skips a row another transaction
-- locks, as complete.sql does. Counts the moves itself (pgqueue_count_moves; see the count_moves
-- migration). Reads the primary key, one probe per job; the status is tested on the locked row,
-- as in complete_keep.sql.
WITH held AS (
    SELECT p.ctid, p.status, f.delay_us, f.final, f.error, f.stack
    FROM pgqueue_jobs AS p
    JOIN unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::boolean[], $5::text[], $6::text[])
             AS f(id, lock_token, delay_us, final, error, stack)
      ON p.id = f.id AND p.lock_token = f.lock_token
    FOR UPDATE OF p SKIP LOCKED
), failed AS (
    UPDATE pgqueue_jobs AS j
    SET counted     = NOT j.counted,
        status      = CASE WHEN f.final THEN 'failed'
                           WHEN coalesce(j.retry_delay, f.delay_us * interval '1 microsecond') > interval '0'
                               THEN 'scheduled'
                           ELSE 'available' END,
        run_at      = CASE WHEN f.final THEN j.run_at
                           ELSE now() + coalesce(j.retry_delay, f.delay_us * interval '1 microsecond') END,
        finished_at = CASE WHEN f.final THEN now() END,
        attempted_at = coalesce(j.attempted_at, now()), -- started ahead, its start not yet recorded
        errors      = (CASE WHEN jsonb_array_length(coalesce(j.errors, '[]')) >= $7
                            THEN j.errors - 0 ELSE coalesce(j.errors, '[]') END)
                      || jsonb_build_array(jsonb_strip_nulls(jsonb_build_object(
                             'attempt', j.attempt, 'at', now(), 'error', f.error,
                             'stack', nullif(f.stack, '')))),
        lock_until  = NULL,
        lock_token  = NULL,
        locked_by   = NULL
    FROM held AS f
    WHERE j.ctid = f.ctid AND f.status = 'running'
    RETURNING j.id, j.status, j.run_at, j.queue
), counted AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg('running'::text), array_agg(status)) FROM failed
)
SELECT failed.id, failed.status, failed.run_at FROM failed, counted
