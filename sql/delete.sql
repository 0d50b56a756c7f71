-- delete: deletes job $1 of queue $2, unless it is running and $3 (cancel it) is false. Deleting
-- a running job clears its lock and tells its worker to stop ('c <queue> <id>'). Returns the
-- status the job had and whether it was deleted; no row if the queue has no such job.
-- Reads the primary key.
WITH target AS (
    SELECT id, status FROM pgqueue_jobs WHERE id = $1 AND queue = $2 FOR UPDATE
), deleted AS (
    DELETE FROM pgqueue_jobs AS j
    USING target
    WHERE j.id = target.id AND (target.status <> 'running' OR $3::boolean)
    RETURNING j.id, target.status
), notified AS (
    SELECT pgqueue_notify(CASE WHEN status = 'running' THEN 'c ' ELSE 'd ' END || $2 || ' ' || encode(uuid_send(id), 'hex'))
    FROM deleted
)
SELECT target.status, EXISTS (SELECT 1 FROM deleted), (SELECT count(*) FROM notified) FROM target
