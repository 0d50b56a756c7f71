-- bulk_delete: one batch of a bulk delete. Of the jobs the filter keeps ($1–$6, see
-- job_filter.sql) with ids above $7, it locks up to $8 in id order and deletes them as
-- delete.sql does with cancel set: running ones are announced 'c <queue> <ids>' (their workers
-- stop), the others 'd <queue> <ids>' (up to 200 ids a message). Returns the greatest id it looked
-- at (NULL when none: the bulk is done) and how many jobs it deleted. Reads the primary key from
-- $7 on. Clears pgqueue.completing, as delete.sql does.
WITH target AS (
    SELECT id FROM pgqueue_jobs
    WHERE /*filter*/ AND id > $7 AND (SELECT set_config('pgqueue.completing', '', true)) = ''
    ORDER BY id LIMIT $8 FOR UPDATE
), deleted AS (
    DELETE FROM pgqueue_jobs AS j
    USING target
    WHERE j.id = target.id
    RETURNING j.id, j.queue, CASE WHEN j.status = 'running' THEN 'c ' ELSE 'd ' END AS kind
), notified AS (
    SELECT pgqueue_notify(kind || queue || ' ' || string_agg(encode(uuid_send(id), 'hex'), ','))
    FROM (SELECT id, queue, kind, (row_number() OVER (PARTITION BY queue, kind ORDER BY id) - 1) / 200 AS part
          FROM deleted) AS d
    GROUP BY queue, kind, part
)
SELECT (SELECT id FROM target ORDER BY id DESC LIMIT 1), (SELECT count(*) FROM deleted), (SELECT count(*) FROM notified)
