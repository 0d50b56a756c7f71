-- delete: deletes job $1, unless it is running and $3 (cancel it) is false; $2 names its queue, or
-- is NULL for a job of any queue. Deleting a running job clears its lock and tells its worker to
-- stop ('c <queue> <id>'; in a transaction: once it commits). Returns the status the job had,
-- whether it was deleted, and its queue; no row if there is no such job. Reads the primary key.
-- Clears pgqueue.completing, which a completion earlier in the transaction may have set
-- (complete.sql): a running job deleted here ends 'deleted' for the jobs that depend on it.
-- A job not in pgqueue_jobs may be in the history (migration 20261214120000), finished: it is
-- deleted there, as a finished job here is, and announced 'd <queue> <id>'; the history's delete
-- trigger subtracts it from the counts. It is found by pgqueue_history_job (the partitions from
-- the id's time on, each by its id index), which runs only when pgqueue_jobs has no such job, and
-- deleted from its own partition (the row's expires_at, pruned at run time).
WITH target AS (
    SELECT id, queue, status FROM pgqueue_jobs
    WHERE id = $1 AND ($2::text IS NULL OR queue = $2) AND (SELECT set_config('pgqueue.completing', '', true)) = ''
    FOR UPDATE
), deleted AS (
    DELETE FROM pgqueue_jobs AS j
    USING target
    WHERE j.id = target.id AND (target.status <> 'running' OR $3::boolean)
    RETURNING j.id, j.queue, target.status
), kept AS MATERIALIZED (
    SELECT h.id, h.expires_at FROM pgqueue_history_job($1) AS h
    WHERE ($2::text IS NULL OR h.queue = $2) AND NOT EXISTS (SELECT 1 FROM target)
), dropped AS (
    DELETE FROM pgqueue_history AS h
    USING kept
    WHERE h.id = kept.id AND h.expires_at = kept.expires_at
    RETURNING h.id, h.queue, h.status
), notified AS (
    SELECT pgqueue_notify(CASE WHEN status = 'running' THEN 'c ' ELSE 'd ' END || queue || ' ' || encode(uuid_send(id), 'hex'))
    FROM (SELECT id, queue, status FROM deleted UNION ALL SELECT id, queue, status FROM dropped) AS d
)
SELECT target.status, EXISTS (SELECT 1 FROM deleted), target.queue, (SELECT count(*) FROM notified) FROM target
UNION ALL
SELECT dropped.status, true, dropped.queue, (SELECT count(*) FROM notified) FROM dropped
