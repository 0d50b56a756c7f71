-- bulk_delete: one batch of a bulk delete. Of the jobs the filter keeps ($1–$6, see
-- job_filter.sql) with ids above $7, it deletes up to $8 in id order, as delete.sql does with
-- cancel set: running ones are announced 'c <queue> <ids>' (their workers stop), the others
-- 'd <queue> <ids>' (up to 200 ids a message). Returns the greatest id it looked at (NULL when
-- none: the bulk is done) and how many jobs it deleted. Clears pgqueue.completing, as delete.sql
-- does.
--
-- Both tables are walked from $7 in id order, side by side (migration 20261214120000):
--   * pgqueue_jobs by its primary key, the first $8 jobs the filter keeps, locked in id order;
--   * the history by its id indexes (one merge of the partitions' in id order), the next
--     10 × $8 rows whatever they are (a partition walked for the first row the filter keeps,
--     one that holds none of them, would be read whole in every batch: the history's partitions
--     are days of expiry, and each holds mostly one status), of which the filter keeps at most
--     $8. A batch so reads a bounded stretch of each. The history is not read at all when the
--     filter names no finished status, nor when it names queues of which the history has no
--     finished job of those statuses from $7 on (pgqueue_history_finished_idx, an equality on
--     queue and status and a range of finished_at: a look-up per queue, status and partition) —
--     which also ends the walk at the last such job instead of the history's end. A filter that
--     names a workflow reads the history by its jobs' ids (/*workflow*/).
-- The batch ends at edge, the least id up to which each walk has seen everything (a walk that
-- stopped at its limit); the jobs past it are left to the next batch. A job of the history is
-- deleted from its partition (its expires_at, pruned at run time); the history's delete
-- trigger subtracts it from the counts.
WITH target AS (
    SELECT id FROM pgqueue_jobs
    WHERE /*filter*/ AND id > $7 AND (SELECT set_config('pgqueue.completing', '', true)) = ''
    ORDER BY id LIMIT $8 FOR UPDATE
), scanned AS MATERIALIZED (
    SELECT id, expires_at, queue, status, created_at, finished_at FROM pgqueue_history
    WHERE id > $7 AND /*workflow*/
      AND $2::text[] && ARRAY['completed', 'failed', 'cancelled']
      AND (cardinality($1::text[]) = 0
           OR EXISTS (SELECT 1 FROM pgqueue_history AS x
                      WHERE x.queue = ANY ($1::text[]) AND x.status = ANY ($2::text[])
                        AND x.finished_at >= coalesce($5::timestamptz, '-infinity')
                        AND x.finished_at < coalesce($6::timestamptz, 'infinity')))
    ORDER BY id LIMIT 10 * $8::integer
), kept AS MATERIALIZED (
    SELECT id, expires_at FROM scanned WHERE /*filter*/ ORDER BY id LIMIT $8
), edge AS MATERIALIZED (
    SELECT least(CASE WHEN (SELECT count(*) FROM target) >= $8 THEN (SELECT id FROM target ORDER BY id DESC LIMIT 1) END,
                 CASE WHEN (SELECT count(*) FROM scanned) >= 10 * $8::integer
                      THEN (SELECT id FROM scanned ORDER BY id DESC LIMIT 1) END,
                 CASE WHEN (SELECT count(*) FROM kept) >= $8 THEN (SELECT id FROM kept ORDER BY id DESC LIMIT 1) END) AS id
), picked AS MATERIALIZED (
    SELECT u.id, u.expires_at
    FROM (SELECT id, NULL::timestamptz AS expires_at FROM target UNION ALL SELECT id, expires_at FROM kept) AS u
    WHERE u.id <= coalesce((SELECT id FROM edge), u.id)
    ORDER BY u.id LIMIT $8
), deleted AS (
    DELETE FROM pgqueue_jobs AS j
    USING picked AS p
    WHERE p.expires_at IS NULL AND j.id = p.id
    RETURNING j.id, j.queue, CASE WHEN j.status = 'running' THEN 'c ' ELSE 'd ' END AS kind
), dropped AS (
    DELETE FROM pgqueue_history AS h
    USING picked AS p
    WHERE p.expires_at IS NOT NULL AND h.id = p.id AND h.expires_at = p.expires_at
    RETURNING h.id, h.queue, 'd ' AS kind
), notified AS (
    SELECT pgqueue_notify(kind || queue || ' ' || string_agg(encode(uuid_send(id), 'hex'), ','))
    FROM (SELECT id, queue, kind, (row_number() OVER (PARTITION BY queue, kind ORDER BY id) - 1) / 200 AS part
          FROM (SELECT id, queue, kind FROM deleted UNION ALL SELECT id, queue, kind FROM dropped) AS a) AS d
    GROUP BY queue, kind, part
)
SELECT CASE WHEN (SELECT count(*) FROM picked) >= $8 THEN (SELECT id FROM picked ORDER BY id DESC LIMIT 1)
            ELSE coalesce((SELECT id FROM edge),
                          greatest((SELECT id FROM target ORDER BY id DESC LIMIT 1),
                                   (SELECT id FROM scanned ORDER BY id DESC LIMIT 1))) END,
       (SELECT count(*) FROM deleted) + (SELECT count(*) FROM dropped), (SELECT count(*) FROM notified)
