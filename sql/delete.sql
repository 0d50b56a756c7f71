-- delete: deletes job $1, unless it is running and $3 (cancel it) is false; $2 names its queue, or
-- is NULL for a job of any queue. Deleting a running job clears its lock and tells its worker to
-- stop ('c <queue> <id>'; in a transaction: once it commits). Returns the status the job had,
-- whether it was deleted, and its queue; no row if there is no such job. Reads the primary key.
-- Clears pgqueue.completing, which a completion earlier in the transaction may have set
-- (complete.sql): a running job deleted here ends 'deleted' for the jobs that depend on it.
WITH target AS (
    SELECT id, queue, status FROM pgqueue_jobs
    WHERE id = $1 AND ($2::text IS NULL OR queue = $2) AND (SELECT set_config('pgqueue.completing', '', true)) = ''
    FOR UPDATE
), deleted AS (
    DELETE FROM pgqueue_jobs AS j
    USING target
    WHERE j.id = target.id AND (target.status <> 'running' OR $3::boolean)
    RETURNING j.id, j.queue, target.status
), notified AS (
    SELECT pgqueue_notify(CASE WHEN status = 'running' THEN 'c ' ELSE 'd ' END || queue || ' ' || encode(uuid_send(id), 'hex'))
    FROM deleted
)
SELECT target.status, EXISTS (SELECT 1 FROM deleted), target.queue, (SELECT count(*) FROM notified) FROM target
