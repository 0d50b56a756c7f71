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
--
-- A job not in pgqueue_jobs may be in the history (migration 20261214120000), finished: it is
-- moved back into pgqueue_jobs, changed as the UPDATE below changes a finished job (every column
-- named, as history_move.sql names them). It is found by pgqueue_history_job, which runs only when
-- pgqueue_jobs has no such job, and deleted from its own partition (pruned at run time). Counts:
-- the history's delete trigger subtracts it where it was; it is inserted counted false, so that
-- pgqueue_jobs' insert trigger adds it where it goes — once each. The UPDATE's triggers do not
-- run on an insert, so the end that pgqueue_job_ended (migration 20261212120000) records for a
-- job with dependents or of a workflow that is reopened is recorded here: 'reopened', and the
-- resolver told ('e -'). A parent that gained dependents while in the history was not marked
-- (pgqueue_lock_parents marks only the parents in pgqueue_jobs): one with an edge not met is
-- marked now, as it would have been there, so that its next end reaches them (one probe of
-- pgqueue_deps' primary key).
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
), kept AS MATERIALIZED (
    SELECT h.id, h.expires_at FROM pgqueue_history_job($1) AS h
    WHERE ($2::text IS NULL OR h.queue = $2) AND NOT EXISTS (SELECT 1 FROM target)
), moved AS (
    DELETE FROM pgqueue_history AS h
    USING kept
    WHERE h.id = kept.id AND h.expires_at = kept.expires_at
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
           m.metadata, false, m.key, m.weight, m.ahead_lost, m.workflow, m.waits_for,
           m.has_dependents OR EXISTS (SELECT 1 FROM pgqueue_deps AS d WHERE d.parent = m.id AND d.state <> 'met'),
           m.result, m.parents_failed, m.run_when
    FROM moved AS m
    RETURNING queue, status, priority, id, workflow, has_dependents
), reopened AS (
    INSERT INTO pgqueue_ended (job, workflow, outcome)
    SELECT id, workflow, 'reopened' FROM back WHERE has_dependents OR workflow IS NOT NULL
    RETURNING job
), notified AS (
    SELECT pgqueue_notify('a ' || queue || ' ' || pgqueue_line_place(priority, id))
    FROM (SELECT queue, status, priority, id FROM retried UNION ALL SELECT queue, status, priority, id FROM back) AS r
    WHERE status = 'available'
    UNION ALL
    SELECT pgqueue_notify('e -') WHERE EXISTS (SELECT 1 FROM reopened)
)
SELECT target.status, target.queue, (SELECT count(*) FROM notified) FROM target
UNION ALL
SELECT moved.status, moved.queue, (SELECT count(*) FROM notified) FROM moved
