-- job: job $1 with its queue and its place in that queue: 0 running, then 1, 2, … for available
-- jobs in run order followed by scheduled ones in due order, -1 finished. $2 names the queue, or
-- is NULL for a job of any queue. The place is counted over the claim and scheduled indexes. No
-- row if there is no such job. Reads the primary key.
SELECT j.queue, j.id, j.status, j.priority, j.attempt, j.max_attempts, j.run_at, j.created_at, j.attempted_at, j.finished_at,
       j.payload, j.errors, j.unique_key, j.repeat_remaining, (extract(epoch FROM j.repeat_every) * 1e6)::bigint,
       j.locked_by, j.lock_until, j.metadata, j.key, j.weight,
       CASE j.status
           WHEN 'running' THEN 0
           WHEN 'available' THEN 1 + (
               SELECT count(*) FROM pgqueue_jobs AS a
               WHERE a.queue = j.queue AND a.status = 'available'
                 AND (-a.priority, a.id) < (-j.priority, j.id))
           WHEN 'scheduled' THEN 1 + (
               SELECT count(*) FROM pgqueue_jobs AS a WHERE a.queue = j.queue AND a.status = 'available') + (
               SELECT count(*) FROM pgqueue_jobs AS s
               WHERE s.queue = j.queue AND s.status = 'scheduled' AND (s.run_at, s.id) < (j.run_at, j.id))
           ELSE -1
       END
FROM pgqueue_jobs AS j
WHERE j.id = $1 AND ($2::text IS NULL OR j.queue = $2)
