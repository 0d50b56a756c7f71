-- pgqueue: what operating a queue needs: unique and repeating jobs, per-queue settings (pause,
-- watchers), listing in run order with keyset pagination, and retention of finished jobs.

-- +goose Up
ALTER TABLE pgqueue_jobs
    ADD COLUMN unique_key       text,                       -- at most one live job per (queue, unique_key)
    ADD COLUMN repeat_remaining integer NOT NULL DEFAULT 0, -- runs still to come after this one; -1: forever
    ADD COLUMN repeat_every     interval,                   -- delay before each repeat
    ADD CONSTRAINT pgqueue_jobs_repeat_check CHECK (repeat_remaining >= -1);

-- One live (scheduled, available or running) job per unique key and queue.
CREATE UNIQUE INDEX pgqueue_jobs_unique_idx ON pgqueue_jobs (queue, unique_key)
    WHERE unique_key IS NOT NULL AND status IN ('scheduled', 'available', 'running');

-- Run order as one ascending key, (-priority, id): a place in line is then a single range of the
-- claim index (a keyset page is one row comparison), and no other index can serve that order, so
-- the planner never walks the primary key instead. The index carries run_at, so the age of the
-- oldest waiting job is an index-only read. (Priorities range over -2^31+1 .. 2^31-1.)
DROP INDEX pgqueue_jobs_claim_idx;
CREATE INDEX pgqueue_jobs_claim_idx ON pgqueue_jobs (queue, (-priority), id) INCLUDE (run_at)
    WHERE status = 'available';

-- Scheduled jobs in (run_at, id) order: promotion, and listing page by page.
DROP INDEX pgqueue_jobs_scheduled_idx;
CREATE INDEX pgqueue_jobs_scheduled_idx ON pgqueue_jobs (queue, run_at, id) WHERE status = 'scheduled';

-- Running jobs in id order, for listing (with only the queue as key, a listing of running jobs
-- could be planned as a walk of the primary key through every row). Heartbeats change neither
-- column.
DROP INDEX pgqueue_jobs_running_idx;
CREATE INDEX pgqueue_jobs_running_idx ON pgqueue_jobs (queue, id) WHERE status = 'running';

-- Finished jobs kept by retention: listing, and pruning by finished_at.
CREATE INDEX pgqueue_jobs_finished_idx ON pgqueue_jobs (queue, status, finished_at, id)
    WHERE status IN ('completed', 'failed', 'cancelled');

-- Per-queue state shared by every process. A queue without a row is running and unwatched.
CREATE TABLE pgqueue_queues (
    name          text        PRIMARY KEY,
    paused        boolean     NOT NULL DEFAULT false,
    watched_until timestamptz,  -- a Watch is open until then: workers announce starts and outcomes
    updated_at    timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE pgqueue_queues;
DROP INDEX pgqueue_jobs_finished_idx;
DROP INDEX pgqueue_jobs_running_idx;
CREATE INDEX pgqueue_jobs_running_idx ON pgqueue_jobs (queue) WHERE status = 'running';
DROP INDEX pgqueue_jobs_scheduled_idx;
CREATE INDEX pgqueue_jobs_scheduled_idx ON pgqueue_jobs (queue, run_at) WHERE status = 'scheduled';
DROP INDEX pgqueue_jobs_claim_idx;
CREATE INDEX pgqueue_jobs_claim_idx ON pgqueue_jobs (queue, priority DESC, id) WHERE status = 'available';
DROP INDEX pgqueue_jobs_unique_idx;
ALTER TABLE pgqueue_jobs
    DROP CONSTRAINT pgqueue_jobs_repeat_check,
    DROP COLUMN repeat_every,
    DROP COLUMN repeat_remaining,
    DROP COLUMN unique_key;
