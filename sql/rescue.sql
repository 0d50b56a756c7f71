-- rescue: for each queue of $1, takes back up to $2 of its running jobs whose lease ran out
-- (their worker died, froze or lost the database): available again with the lost attempt
-- recorded in errors ($3: how many entries errors keeps), or failed when that was the last
-- attempt. A job whose start was never recorded (attempted_at NULL: claimed ahead of a free
-- slot, see claim.sql) most likely never started, but may have, just before its worker died: the
-- attempt it was charged at claim is not counted against it (max_attempts one more), though its
-- number stays used, so that no attempt number runs twice; it is never failed, and is marked
-- ahead_lost, so that its next claims record its start at once and a job that kills its process
-- at every start cannot come back uncounted for ever (migration 20261209120000). A logged start
-- of a rated queue whose job no live lease holds and whose start was never reported (its worker
-- died, or the job was cancelled or deleted as it did) is taken as reported now, so that it holds
-- its place in the rate's windows for a period more, and not for ever (pgqueue_starts_pending_idx,
-- migration 20261210120000). Wakes the workers of each queue that had a job taken back: a job
-- became available (the message names the first one's place in line: pgqueue_line_place), or a
-- place under the queue's limits freed (also when the job failed: 'a <queue> -').
-- Returns, per queue, how many became available and how many failed. Reads one range of
-- pgqueue_jobs_running_idx (queue) WHERE status = 'running' per queue. Counts the moves itself
-- (pgqueue_count_moves; see the count_moves migration).
WITH rescued AS (
    UPDATE pgqueue_jobs AS j
    SET counted     = NOT j.counted,
        status      = CASE WHEN j.attempted_at IS NOT NULL AND j.attempt >= j.max_attempts THEN 'failed'
                           ELSE 'available' END,
        finished_at = CASE WHEN j.attempted_at IS NOT NULL AND j.attempt >= j.max_attempts THEN now() END,
        max_attempts = j.max_attempts + (j.attempted_at IS NULL)::int,
        ahead_lost  = j.ahead_lost OR j.attempted_at IS NULL,
        errors      = (CASE WHEN jsonb_array_length(coalesce(j.errors, '[]')) >= $3
                            THEN j.errors - 0 ELSE coalesce(j.errors, '[]') END)
                      || jsonb_build_array(jsonb_build_object(
                             'attempt', j.attempt, 'at', now(),
                             'error', 'lock expired: worker ' || coalesce(j.locked_by, 'unknown')
                                      || ' stopped renewing its lease'
                                      || CASE WHEN j.attempted_at IS NULL
                                              THEN ' before the job''s start was recorded; not counted (max_attempts raised by one)'
                                              ELSE '' END)),
        lock_until  = NULL,
        lock_token  = NULL,
        locked_by   = NULL
    WHERE j.ctid = ANY (ARRAY(
              SELECT c.ctid
              FROM unnest($1::text[]) AS x(queue),
                   LATERAL (SELECT ctid
                            FROM pgqueue_jobs
                            WHERE queue = x.queue AND status = 'running' AND lock_until < now()
                            LIMIT $2
                            FOR UPDATE SKIP LOCKED) AS c))
    RETURNING j.queue, j.status, j.priority, j.id
), reported AS (
    UPDATE pgqueue_starts AS s
    SET recorded_at = now()
    WHERE s.job_id IS NOT NULL AND s.recorded_at IS NULL AND s.queue = ANY ($1::text[])
      AND NOT EXISTS (SELECT FROM pgqueue_jobs AS j
                      WHERE j.id = s.job_id AND j.status = 'running' AND j.lock_until >= now())
), counted AS (
    SELECT x.queue,
           count(*) FILTER (WHERE r.status = 'available') AS available,
           count(*) FILTER (WHERE r.status = 'failed') AS failed,
           min(pgqueue_line_place(r.priority, r.id) COLLATE "C") FILTER (WHERE r.status = 'available') AS first
    FROM unnest($1::text[]) AS x(queue)
    LEFT JOIN rescued AS r ON r.queue = x.queue
    GROUP BY x.queue
), moves AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg('running'::text), array_agg(status)) AS n FROM rescued
), notified AS (
    SELECT pgqueue_notify('a ' || queue || ' ' || coalesce(first, '-')) FROM counted WHERE available > 0 OR failed > 0
)
SELECT c.queue, c.available, c.failed, (SELECT count(*) FROM notified)
FROM counted AS c, moves
