-- pgqueue: flow control. A queue's limits live in its pgqueue_queues row, so that every process
-- applies the same ones and an operator can change them while workers run; a job may carry a key
-- (a tenant, a customer, a resource) that per-key limits count by.
--
-- max_running: at most this many jobs of the queue running at once, across every process.
-- key_max_running: at most this many jobs of one key running at once; a job of the key that has
--   run and waits to run again (a retry's back-off, a snooze) holds its place too, so 1 gives
--   strict FIFO per key. Jobs without a key are not limited by it.
-- rate_limit per rate_period: at most this many of the queue's jobs start in any window of that
--   length (a sliding window over the starts logged in pgqueue_starts).
-- key_rate_limit per key_rate_period: the same for the jobs of one key.
-- limited: whether any limit is set; claims of such a queue take its claim lock first.
-- claim_limited: whether a per-key limit or a rate is set; claims of such a queue go through
--   claim_limited.sql (a queue with only max_running is claimed by claim.sql).
-- key_cursor: where the round-robin between keys stands: the key the latest claim served last.
--
-- Nothing in use is counted ahead: running and held jobs are counted from the job rows when a
-- claim needs them (pgqueue_jobs_running_idx for the queue, pgqueue_jobs_key_held_idx for a key),
-- so a worker that dies holding jobs leaks nothing once its leases run out and its jobs are taken
-- back; starts are rows of pgqueue_starts, one per start of a queue with a rate limit, deleted by
-- the claims once they are older than the queue's longest period.
--
-- pgqueue_jobs_key_idx lines up the available jobs of each key in run order, for the claim's
-- walk from key to key; pgqueue_jobs_key_held_idx finds the jobs holding a key's places. Both
-- cover keyed jobs only: queues that use no keys pay nothing for them.

-- +goose Up
ALTER TABLE pgqueue_queues
    ADD COLUMN max_running     integer CHECK (max_running > 0),
    ADD COLUMN key_max_running integer CHECK (key_max_running > 0),
    ADD COLUMN rate_limit      integer CHECK (rate_limit > 0),
    ADD COLUMN rate_period     interval CHECK (rate_period > interval '0'),
    ADD COLUMN key_rate_limit  integer CHECK (key_rate_limit > 0),
    ADD COLUMN key_rate_period interval CHECK (key_rate_period > interval '0'),
    ADD COLUMN limited         boolean NOT NULL GENERATED ALWAYS AS (
        max_running IS NOT NULL OR key_max_running IS NOT NULL
        OR rate_limit IS NOT NULL OR key_rate_limit IS NOT NULL) STORED,
    ADD COLUMN claim_limited   boolean NOT NULL GENERATED ALWAYS AS (
        key_max_running IS NOT NULL OR rate_limit IS NOT NULL OR key_rate_limit IS NOT NULL) STORED,
    ADD COLUMN key_cursor      text,
    ADD CHECK ((rate_limit IS NULL) = (rate_period IS NULL)),
    ADD CHECK ((key_rate_limit IS NULL) = (key_rate_period IS NULL));

CREATE TABLE pgqueue_starts (
    queue      text        NOT NULL,
    key        text,
    started_at timestamptz NOT NULL
);
CREATE INDEX pgqueue_starts_queue_idx ON pgqueue_starts (queue, started_at);
CREATE INDEX pgqueue_starts_key_idx ON pgqueue_starts (queue, key, started_at) WHERE key IS NOT NULL;

ALTER TABLE pgqueue_jobs ADD COLUMN key text;

CREATE INDEX pgqueue_jobs_key_idx ON pgqueue_jobs (queue, key, (-priority), id)
    WHERE status = 'available' AND key IS NOT NULL;
CREATE INDEX pgqueue_jobs_key_held_idx ON pgqueue_jobs (queue, key)
    WHERE key IS NOT NULL AND (status = 'running' OR (status = 'scheduled' AND attempted_at IS NOT NULL));

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261203120000::bigint';

-- +goose Down
CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261202120000::bigint';

DROP TABLE pgqueue_starts;
DROP INDEX pgqueue_jobs_key_held_idx;
DROP INDEX pgqueue_jobs_key_idx;
ALTER TABLE pgqueue_jobs DROP COLUMN key;
ALTER TABLE pgqueue_queues
    DROP COLUMN key_cursor,
    DROP COLUMN claim_limited,
    DROP COLUMN limited,
    DROP COLUMN key_rate_period,
    DROP COLUMN key_rate_limit,
    DROP COLUMN rate_period,
    DROP COLUMN rate_limit,
    DROP COLUMN key_max_running,
    DROP COLUMN max_running;
