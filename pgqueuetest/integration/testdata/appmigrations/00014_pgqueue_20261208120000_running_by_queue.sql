-- pgqueue: the running-jobs index keyed by the queue alone, as migration 20261129120000 made it,
-- in place of (queue, id).
--
-- Every claim of a queue with a MaxRunning counts the queue's running jobs through this index.
-- Keyed by (queue, id), its entries are in id order, and a queue's jobs run roughly in id order:
-- each claim adds its entries at the right end of the queue's range, and the entries of settled
-- jobs stay behind at its left end, on leaf pages no insert comes back to, until VACUUM. So the
-- count walked, before the running jobs, every page of entries left by the jobs run since the
-- last VACUUM: during a drain of 10⁵ jobs (autovacuum off) from 63 to 623 buffers a count, while
-- it found up to 1,100 running jobs. Keyed by the queue alone, a queue's entries are in the order
-- of their rows' physical addresses, and a claim's new row versions go where a settle freed room
-- (heap pages are pruned without VACUUM), so its entries land among the dead ones, which the
-- insert clears from the page before it would split it: in the same drain the count read 17-105
-- buffers throughout.
--
-- Listing the running jobs in id order (sql/list_running.sql) now sorts them: the running jobs
-- of a queue, a few times its processes' slots.
--
-- Building the index reads the table once, under a lock that keeps writers out meanwhile (as
-- every CREATE INDEX of pgqueue's migrations): at millions of jobs, run it when the queue is
-- quiet.

-- +goose Up
DROP INDEX pgqueue_jobs_running_idx;
CREATE INDEX pgqueue_jobs_running_idx ON pgqueue_jobs (queue) WHERE status = 'running';

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261208120000::bigint';

-- +goose Down
DROP INDEX pgqueue_jobs_running_idx;
CREATE INDEX pgqueue_jobs_running_idx ON pgqueue_jobs (queue, id) WHERE status = 'running';

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261207120000::bigint';
