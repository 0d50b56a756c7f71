-- promote: for each queue of $1, makes up to $2 of its due scheduled jobs available, and wakes
-- the workers of each queue where it did (from the first promoted job's place in line:
-- pgqueue_line_place); returns, per queue, how many it promoted and the
-- milliseconds until its next scheduled job is due (NULL if none). Reads one range of
-- pgqueue_jobs_scheduled_idx (queue, run_at, id) WHERE status = 'scheduled' per queue. Counts
-- the moves itself (pgqueue_count_moves; see the count_moves migration).
WITH promoted AS (
    -- The rows are locked by the sub-select and updated by their ctid, as in claim.sql: a join
    -- on id could be planned as a sequential scan when many jobs fall due at once.
    UPDATE pgqueue_jobs AS j
    SET status = 'available', counted = NOT j.counted
    WHERE j.ctid = ANY (ARRAY(
              SELECT c.ctid
              FROM unnest($1::text[]) AS x(queue),
                   LATERAL (SELECT ctid
                            FROM pgqueue_jobs
                            WHERE queue = x.queue AND status = 'scheduled' AND run_at <= now()
                            ORDER BY run_at
                            LIMIT $2
                            FOR UPDATE SKIP LOCKED) AS c))
    RETURNING j.queue, j.priority, j.id
), counted AS (
    SELECT x.queue, count(p.queue) AS n, min(pgqueue_line_place(p.priority, p.id) COLLATE "C") AS first
    FROM unnest($1::text[]) AS x(queue)
    LEFT JOIN promoted AS p ON p.queue = x.queue
    GROUP BY x.queue
), moves AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg('scheduled'::text), array_agg('available'::text)) AS n FROM promoted
), notified AS (
    SELECT pgqueue_notify('a ' || queue || ' ' || first) FROM counted WHERE n > 0
)
SELECT c.queue, c.n,
       (SELECT ceil(extract(epoch FROM min(s.run_at) - now()) * 1000)::bigint
        FROM pgqueue_jobs AS s
        WHERE s.queue = c.queue AND s.status = 'scheduled' AND s.run_at > now()),
       (SELECT count(*) FROM notified)
FROM counted AS c, moves
