-- promote: makes up to $2 due scheduled jobs of queue $1 available and wakes the queue's workers
-- if it did; returns how many it promoted and the milliseconds until the next one is due (NULL if
-- none). Reads pgqueue_jobs_scheduled_idx (queue, run_at, id) WHERE status = 'scheduled'.
WITH promoted AS (
    -- The rows are locked by the sub-select and updated by their ctid, as in claim.sql: a join
    -- on id could be planned as a sequential scan when many jobs fall due at once.
    UPDATE pgqueue_jobs AS j
    SET status = 'available'
    WHERE j.ctid = ANY (ARRAY(
              SELECT ctid
              FROM pgqueue_jobs
              WHERE queue = $1 AND status = 'scheduled' AND run_at <= now()
              ORDER BY run_at
              LIMIT $2
              FOR UPDATE SKIP LOCKED))
      AND j.queue = $1
    RETURNING 1
), counted AS (
    SELECT count(*) AS n FROM promoted
), notified AS (
    SELECT pgqueue_notify('a ' || $1)
    FROM counted
    WHERE n > 0
)
SELECT counted.n,
       (SELECT ceil(extract(epoch FROM min(s.run_at) - now()) * 1000)::bigint
        FROM pgqueue_jobs AS s
        WHERE s.queue = $1 AND s.status = 'scheduled' AND s.run_at > now()),
       (SELECT count(*) FROM notified)
FROM counted
