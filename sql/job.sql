-- job: job $1 with its queue and its place in that queue: 0 running, then 1, 2, … for available
-- jobs in run order followed by scheduled ones in due order, -1 finished. $2 names the queue, or
-- is NULL for a job of any queue. No row if there is no such job. Reads the primary key, and a
-- job not found there in the history (migration 20261214120000), where finished jobs move:
-- pgqueue_history_job, which reads pgqueue_history_id_idx of the partitions from the id's time
-- on. A job is in one of the two tables, never both, in the statement's snapshot; the history is
-- read only for an id pgqueue_jobs has not (its One-Time Filter, a second probe of the key).
--
-- The place counts the jobs ahead over the claim and scheduled indexes, at most $3 + 1 in each
-- part (so a look-up deep in a queue of millions reads a bounded stretch of index), and says
-- whether it stopped there: the place is then a lower bound. Each part is a range with an
-- equality on the columns before it, in the index's order, so the scan is of the index and ends
-- where the range does (a row comparison over (-priority, id) did not end the scan there and read
-- the queue's whole index; without the order, generic plans chose a sequential scan).
WITH j AS (
    SELECT * FROM (
        SELECT queue, id, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
               payload, errors, unique_key, repeat_remaining, repeat_every, locked_by, lock_until, metadata, key, weight
        FROM pgqueue_jobs WHERE id = $1
        UNION ALL
        SELECT h.queue, h.id, h.status, h.priority, h.attempt, h.max_attempts, h.run_at, h.created_at, h.attempted_at,
               h.finished_at, h.payload, h.errors, h.unique_key, h.repeat_remaining, h.repeat_every, h.locked_by,
               h.lock_until, h.metadata, h.key, h.weight
        FROM pgqueue_history_job($1) AS h
        WHERE NOT EXISTS (SELECT FROM pgqueue_jobs WHERE id = $1)) AS u
    WHERE $2::text IS NULL OR u.queue = $2
), ahead AS MATERIALIZED (
    SELECT CASE j.status
        WHEN 'available' THEN
            (SELECT count(*) FROM (SELECT FROM pgqueue_jobs AS a
                                   WHERE a.queue = j.queue AND a.status = 'available' AND -a.priority < -j.priority
                                   ORDER BY -a.priority, a.id LIMIT $3::int + 1) AS higher)
          + (SELECT count(*) FROM (SELECT FROM pgqueue_jobs AS a
                                   WHERE a.queue = j.queue AND a.status = 'available' AND -a.priority = -j.priority
                                     AND a.id < j.id
                                   ORDER BY -a.priority, a.id LIMIT $3::int + 1) AS older)
        WHEN 'scheduled' THEN
            (SELECT count(*) FROM (SELECT FROM pgqueue_jobs AS a
                                   WHERE a.queue = j.queue AND a.status = 'available'
                                   ORDER BY -a.priority, a.id LIMIT $3::int + 1) AS available)
          + (SELECT count(*) FROM (SELECT FROM pgqueue_jobs AS s
                                   WHERE s.queue = j.queue AND s.status = 'scheduled' AND s.run_at < j.run_at
                                   ORDER BY s.run_at, s.id LIMIT $3::int + 1) AS sooner)
          + (SELECT count(*) FROM (SELECT FROM pgqueue_jobs AS s
                                   WHERE s.queue = j.queue AND s.status = 'scheduled' AND s.run_at = j.run_at
                                     AND s.id < j.id
                                   ORDER BY s.run_at, s.id LIMIT $3::int + 1) AS older)
        ELSE 0
    END AS n
    FROM j
)
SELECT j.queue, j.id, j.status, j.priority, j.attempt, j.max_attempts, j.run_at, j.created_at, j.attempted_at, j.finished_at,
       j.payload, j.errors, j.unique_key, j.repeat_remaining, (extract(epoch FROM j.repeat_every) * 1e6)::bigint,
       j.locked_by, j.lock_until, j.metadata, j.key, j.weight,
       CASE WHEN j.status = 'running' THEN 0
            WHEN j.status IN ('available', 'scheduled') THEN 1 + least(ahead.n, $3::int + 1)
            ELSE -1 END,
       ahead.n > $3::int
FROM j, ahead
