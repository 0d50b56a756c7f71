-- cancel: cancels job $1 unless it has finished; $2 names its queue, or is NULL for a job of any
-- queue. The job ends 'cancelled', its lock is cleared (so a worker running it is fenced off) and
-- its queue's channel carries 'c <queue> <id>', on which the worker running it cancels the
-- handler's context (in a transaction: once it commits). Returns the status the job had and its
-- queue; no row if there is no such job. Reads the primary key.
-- A job not in pgqueue_jobs may be in the history (migration 20261214120000): it has finished,
-- and is reported with its status, unchanged, as a finished job here is. It is read by
-- pgqueue_history_job, which runs only when pgqueue_jobs has no such job.
WITH target AS (
    SELECT id, queue, status FROM pgqueue_jobs WHERE id = $1 AND ($2::text IS NULL OR queue = $2) FOR UPDATE
), cancelled AS (
    UPDATE pgqueue_jobs AS j
    SET status = 'cancelled', finished_at = now(), lock_until = NULL, lock_token = NULL, locked_by = NULL
    FROM target
    WHERE j.id = target.id AND target.status IN ('pending', 'scheduled', 'available', 'running')
    RETURNING j.id, j.queue
), notified AS (
    SELECT pgqueue_notify('c ' || queue || ' ' || encode(uuid_send(id), 'hex'))
    FROM cancelled
), kept AS (
    SELECT h.status, h.queue FROM pgqueue_history_job($1) AS h
    WHERE ($2::text IS NULL OR h.queue = $2) AND NOT EXISTS (SELECT 1 FROM target)
)
SELECT target.status, target.queue, (SELECT count(*) FROM notified) FROM target
UNION ALL
SELECT kept.status, kept.queue, 0 FROM kept
