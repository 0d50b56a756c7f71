-- bulk_retry: one batch of a bulk retry. Of the jobs the filter keeps ($1–$6, see
-- job_filter.sql) with ids above $7, it takes up to $8 in id order that retry.sql would change
-- (scheduled and finished ones) and makes them available now, as retry.sql does (a completed
-- run of a repeating job without its repeats; one that still waits for jobs it depends on goes
-- back to 'pending'). A job whose unique key a live job holds, or an
-- earlier job of the batch takes, is left as it is. Wakes the queues' workers. Returns the
-- greatest id it looked at (NULL when none: the bulk is done) and how many jobs it retried.
-- Counts the moves itself (pgqueue_count_moves; see the count_moves migration).
--
-- Both tables are walked from $7 in id order, side by side, as bulk_delete.sql walks them (which
-- says why, and what each reads): pgqueue_jobs by its primary key, the history by its id
-- indexes, 10 × $8 rows at most, and not at all when it cannot hold the filter's jobs; the batch
-- ends at edge. A job of the history (finished) is moved back into pgqueue_jobs as retry.sql
-- moves one (every column named): deleted from its partition, whose delete trigger subtracts it
-- from the counts, inserted counted, and added to the counts here, once; its 'reopened' end
-- recorded if it has dependents or is of a workflow, with a parent that gained dependents in the
-- history marked, as retry.sql does.
WITH target AS (
    SELECT id, queue, status, unique_key FROM pgqueue_jobs
    WHERE /*filter*/
      AND status IN ('scheduled', 'completed', 'failed', 'cancelled') AND id > $7
    ORDER BY id LIMIT $8 FOR UPDATE
), scanned AS MATERIALIZED (
    SELECT id, expires_at, queue, status, unique_key, created_at, finished_at FROM pgqueue_history
    WHERE id > $7 AND /*workflow*/
      AND $2::text[] && ARRAY['completed', 'failed', 'cancelled']
      AND (cardinality($1::text[]) = 0
           OR EXISTS (SELECT 1 FROM pgqueue_history AS x
                      WHERE x.queue = ANY ($1::text[]) AND x.status = ANY ($2::text[])
                        AND x.finished_at >= coalesce($5::timestamptz, '-infinity')
                        AND x.finished_at < coalesce($6::timestamptz, 'infinity')))
    ORDER BY id LIMIT 10 * $8::integer
), kept AS MATERIALIZED (
    SELECT id, expires_at, queue, status, unique_key FROM scanned WHERE /*filter*/ ORDER BY id LIMIT $8
), edge AS MATERIALIZED (
    SELECT least(CASE WHEN (SELECT count(*) FROM target) >= $8 THEN (SELECT id FROM target ORDER BY id DESC LIMIT 1) END,
                 CASE WHEN (SELECT count(*) FROM scanned) >= 10 * $8::integer
                      THEN (SELECT id FROM scanned ORDER BY id DESC LIMIT 1) END,
                 CASE WHEN (SELECT count(*) FROM kept) >= $8 THEN (SELECT id FROM kept ORDER BY id DESC LIMIT 1) END) AS id
), picked AS MATERIALIZED (
    SELECT u.*
    FROM (SELECT id, NULL::timestamptz AS expires_at, queue, status, unique_key FROM target
          UNION ALL
          SELECT id, expires_at, queue, status, unique_key FROM kept) AS u
    WHERE u.id <= coalesce((SELECT id FROM edge), u.id)
    ORDER BY u.id LIMIT $8
), free AS (
    SELECT t.* FROM picked AS t
    WHERE t.unique_key IS NULL OR t.status = 'scheduled'
       OR (NOT EXISTS (SELECT 1 FROM pgqueue_jobs AS l
                       WHERE l.queue = t.queue AND l.unique_key = t.unique_key
                         AND l.status IN ('scheduled', 'available', 'running'))
           AND NOT EXISTS (SELECT 1 FROM picked AS e
                           WHERE e.queue = t.queue AND e.unique_key = t.unique_key
                             AND e.status <> 'scheduled' AND e.id < t.id))
), retried AS (
    UPDATE pgqueue_jobs AS j
    SET counted = NOT j.counted, status = CASE WHEN j.waits_for > 0 THEN 'pending' ELSE 'available' END,
        run_at = now(), finished_at = NULL,
        attempt = CASE WHEN free.status = 'scheduled' THEN j.attempt ELSE 0 END,
        repeat_remaining = CASE WHEN free.status = 'completed' THEN 0 ELSE j.repeat_remaining END
    FROM free
    WHERE free.expires_at IS NULL AND j.id = free.id
    RETURNING j.queue, free.status AS from_status, j.status, j.priority, j.id
), moved AS (
    DELETE FROM pgqueue_history AS h
    USING free
    WHERE free.expires_at IS NOT NULL AND h.id = free.id AND h.expires_at = free.expires_at
    RETURNING h.id, h.queue, h.status, h.priority, h.attempt, h.max_attempts, h.run_at, h.created_at,
              h.attempted_at, h.finished_at, h.lock_until, h.lock_token, h.locked_by, h.retry_delay,
              h.payload, h.errors, h.unique_key, h.repeat_remaining, h.repeat_every, h.repeat_from,
              h.metadata, h.key, h.weight, h.ahead_lost, h.workflow, h.waits_for, h.has_dependents,
              h.result, h.parents_failed, h.run_when
), back AS (
    INSERT INTO pgqueue_jobs (id, queue, status, priority, attempt, max_attempts, run_at, created_at,
                              attempted_at, finished_at, lock_until, lock_token, locked_by, retry_delay,
                              payload, errors, unique_key, repeat_remaining, repeat_every, repeat_from,
                              metadata, counted, key, weight, ahead_lost, workflow, waits_for,
                              has_dependents, result, parents_failed, run_when)
    SELECT m.id, m.queue, CASE WHEN m.waits_for > 0 THEN 'pending' ELSE 'available' END, m.priority, 0,
           m.max_attempts, now(), m.created_at,
           m.attempted_at, NULL, m.lock_until, m.lock_token, m.locked_by, m.retry_delay,
           m.payload, m.errors, m.unique_key, CASE WHEN m.status = 'completed' THEN 0 ELSE m.repeat_remaining END,
           m.repeat_every, m.repeat_from,
           m.metadata, true, m.key, m.weight, m.ahead_lost, m.workflow, m.waits_for,
           m.has_dependents OR EXISTS (SELECT 1 FROM pgqueue_deps AS d WHERE d.parent = m.id AND d.state <> 'met'),
           m.result, m.parents_failed, m.run_when
    FROM moved AS m
    ORDER BY m.id
    RETURNING queue, status, priority, id, workflow, has_dependents
), recounted AS (
    INSERT INTO pgqueue_count_deltas (queue, status, n)
    SELECT queue, status, count(*) FROM back GROUP BY queue, status
), reopened AS (
    INSERT INTO pgqueue_ended (job, workflow, outcome)
    SELECT id, workflow, 'reopened' FROM back WHERE has_dependents OR workflow IS NOT NULL ORDER BY id
    RETURNING job
), moves AS (
    SELECT pgqueue_count_moves(array_agg(queue), array_agg(from_status), array_agg(status)) AS n FROM retried
), notified AS (
    SELECT pgqueue_notify('a ' || queue || ' ' || first)
    FROM (SELECT queue, min(pgqueue_line_place(priority, id) COLLATE "C") AS first
          FROM (SELECT queue, status, priority, id FROM retried UNION ALL SELECT queue, status, priority, id FROM back) AS r
          WHERE status = 'available' GROUP BY queue) AS q
    UNION ALL
    SELECT pgqueue_notify('e -') WHERE EXISTS (SELECT 1 FROM reopened)
)
SELECT CASE WHEN (SELECT count(*) FROM picked) >= $8 THEN (SELECT id FROM picked ORDER BY id DESC LIMIT 1)
            ELSE coalesce((SELECT id FROM edge),
                          greatest((SELECT id FROM target ORDER BY id DESC LIMIT 1),
                                   (SELECT id FROM scanned ORDER BY id DESC LIMIT 1))) END,
       (SELECT count(*) FROM retried) + (SELECT count(*) FROM back), (SELECT count(*) FROM notified)
FROM moves
