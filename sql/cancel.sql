-- cancel: cancels job $1 of queue $2 unless it has finished: it ends 'cancelled', its lock is
-- cleared (so a worker running it is fenced off) and the queue's channel carries 'c <queue>
-- <id>', on which the worker running it cancels the handler's context. Returns the status the
-- job had; no row if the queue has no such job. Reads the primary key.
WITH target AS (
    SELECT id, status FROM pgqueue_jobs WHERE id = $1 AND queue = $2 FOR UPDATE
), cancelled AS (
    UPDATE pgqueue_jobs AS j
    SET status = 'cancelled', finished_at = now(), lock_until = NULL, lock_token = NULL, locked_by = NULL
    FROM target
    WHERE j.id = target.id AND target.status IN ('scheduled', 'available', 'running')
    RETURNING j.id
), notified AS (
    SELECT pgqueue_notify('c ' || $2 || ' ' || encode(uuid_send(id), 'hex'))
    FROM cancelled
)
SELECT target.status, (SELECT count(*) FROM notified) FROM target
