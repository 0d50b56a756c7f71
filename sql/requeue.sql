-- requeue: puts jobs ($1 id, $2 lock_token) still held under their token back in line without
-- charging the attempt they used: after $3 µs, 'scheduled' while that lies ahead and 'available'
-- when it is zero. Serves snoozes and the hand-back of jobs a worker did not finish or, claimed
-- ahead of a free slot, did not start ($4 false: their attempted_at stays NULL, not started; a
-- started job's start is recorded if it was not yet). A start logged for a rate limit is taken as
-- reported, as record_rate_starts.sql does.
-- Wakes the workers of each queue where a job became available, from the first one's place in
-- line (pgqueue_line_place). Returns id, status and run_at
-- of each job it changed. Skips a row another transaction locks, as complete.sql does. Counts the
-- moves itself (pgqueue_count_moves; see the count_moves migration). Reads the primary key.
WITH held AS (
    SELECT p.ctid, r.delay_us, r.started
    FROM pgqueue_jobs AS p
    JOIN unnest($1::uuid[], $2::uuid[], $3::bigint[], $4::boolean[]) AS r(id, lock_token, delay_us, started)
      ON p.id = r.id AND p.lock_token = r.lock_token
    WHERE p.status = 'running'
    FOR UPDATE OF p SKIP LOCKED
), back AS (
    UPDATE pgqueue_jobs AS j
    SET counted    = NOT j.counted,
        status     = CASE WHEN r.delay_us > 0 THEN 'scheduled' ELSE 'available' END,
        run_at     = now() + r.delay_us * interval '1 microsecond',
        attempt    = j.attempt - 1,
        attempted_at = CASE WHEN r.started THEN coalesce(j.attempted_at, now()) ELSE j.attempted_at END,
        lock_until = NULL,
        lock_token = NULL,
        locked_by  = NULL
    FROM held AS r
    WHERE j.ctid = r.ctid
    RETURNING j.id, j.queue, j.status, j.run_at, j.priority
), reported AS (
    UPDATE pgqueue_starts AS s
    SET recorded_at = now()
    FROM back AS b
    WHERE s.job_id = b.id AND s.recorded_at IS NULL
), counted AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg('running'::text), array_agg(status)) FROM back
), notified AS (
    SELECT pgqueue_notify('a ' || q.queue || ' ' || q.first)
    FROM (SELECT queue, min(pgqueue_line_place(priority, id) COLLATE "C") AS first
          FROM back WHERE status = 'available' GROUP BY queue) AS q
)
SELECT back.id, back.status, back.run_at FROM back, counted, (SELECT count(*) FROM notified) AS n
