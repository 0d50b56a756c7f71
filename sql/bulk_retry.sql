-- bulk_retry: one batch of a bulk retry. Of the jobs the filter keeps ($1–$6, see
-- job_filter.sql) with ids above $7, it locks up to $8 in id order that retry.sql would change
-- (scheduled and finished ones) and makes them available now, as retry.sql does (a completed
-- run of a repeating job without its repeats; one that still waits for jobs it depends on goes
-- back to 'pending'). A job whose unique key a live job holds, or an
-- earlier job of the batch takes, is left as it is. Wakes the queues' workers. Returns the
-- greatest id it looked at (NULL when none: the bulk is done) and how many jobs it retried.
-- Reads the primary key from $7 on. Counts the moves itself (pgqueue_count_moves; see the
-- count_moves migration).
WITH target AS (
    SELECT id, queue, status, unique_key FROM pgqueue_jobs
    WHERE /*filter*/
      AND status IN ('scheduled', 'completed', 'failed', 'cancelled') AND id > $7
    ORDER BY id LIMIT $8 FOR UPDATE
), free AS (
    SELECT t.* FROM target AS t
    WHERE t.unique_key IS NULL OR t.status = 'scheduled'
       OR (NOT EXISTS (SELECT 1 FROM pgqueue_jobs AS l
                       WHERE l.queue = t.queue AND l.unique_key = t.unique_key
                         AND l.status IN ('scheduled', 'available', 'running'))
           AND NOT EXISTS (SELECT 1 FROM target AS e
                           WHERE e.queue = t.queue AND e.unique_key = t.unique_key
                             AND e.status <> 'scheduled' AND e.id < t.id))
), retried AS (
    UPDATE pgqueue_jobs AS j
    SET counted = NOT j.counted, status = CASE WHEN j.waits_for > 0 THEN 'pending' ELSE 'available' END,
        run_at = now(), finished_at = NULL,
        attempt = CASE WHEN free.status = 'scheduled' THEN j.attempt ELSE 0 END,
        repeat_remaining = CASE WHEN free.status = 'completed' THEN 0 ELSE j.repeat_remaining END
    FROM free
    WHERE j.id = free.id
    RETURNING j.queue, free.status AS from_status, j.status, j.priority, j.id
), moves AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg(from_status), array_agg(status)) AS n FROM retried
), notified AS (
    SELECT pgqueue_notify('a ' || queue || ' ' || first)
    FROM (SELECT queue, min(pgqueue_line_place(priority, id) COLLATE "C") AS first
          FROM retried WHERE status = 'available' GROUP BY queue) AS q
)
SELECT (SELECT id FROM target ORDER BY id DESC LIMIT 1), (SELECT count(*) FROM retried), (SELECT count(*) FROM notified)
FROM moves
