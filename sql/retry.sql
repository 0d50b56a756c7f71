-- retry: makes job $1 available now; $2 names its queue, or is NULL for a job of any queue. A
-- failed, cancelled or kept completed job gets a fresh set of attempts (its errors stay), a
-- scheduled one runs ahead of its time. A completed run of a repeating job has enqueued its next
-- run already, so it runs once more without repeats (repeat_remaining 0): the chain is never
-- doubled; a failed or cancelled one had ended its chain, which it continues if it succeeds.
-- A job that still waits for jobs it depends on (waits_for: a dependent cancelled because its
-- parent failed, retried before that parent) goes back to 'pending' instead, until they complete.
-- Pending, running and available jobs are left alone. Wakes the queue's workers (in a transaction: once
-- it commits). Returns the status the job had and its queue; no row if there is no such job.
-- Reads the primary key.
WITH target AS (
    SELECT id, queue, status FROM pgqueue_jobs WHERE id = $1 AND ($2::text IS NULL OR queue = $2) FOR UPDATE
), retried AS (
    UPDATE pgqueue_jobs AS j
    SET status = CASE WHEN j.waits_for > 0 THEN 'pending' ELSE 'available' END, run_at = now(), finished_at = NULL,
        attempt = CASE WHEN target.status = 'scheduled' THEN j.attempt ELSE 0 END,
        repeat_remaining = CASE WHEN target.status = 'completed' THEN 0 ELSE j.repeat_remaining END
    FROM target
    WHERE j.id = target.id AND target.status IN ('scheduled', 'completed', 'failed', 'cancelled')
    RETURNING j.queue, j.status, j.priority, j.id
), notified AS (
    SELECT pgqueue_notify('a ' || queue || ' ' || pgqueue_line_place(priority, id)) FROM retried WHERE status = 'available'
)
SELECT target.status, target.queue, (SELECT count(*) FROM notified) FROM target
