-- pgqueue: validates the status check that 20261212120000 added NOT VALID. Apart from that
-- migration, so that its scan of the jobs table runs under a SHARE UPDATE EXCLUSIVE lock, which
-- lets reads and writes through, and not under the ACCESS EXCLUSIVE lock that swapping the
-- constraint took. Every row was checked by the former constraint already; this only records it.

-- +goose Up
ALTER TABLE pgqueue_jobs VALIDATE CONSTRAINT pgqueue_jobs_status_check;

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261212130000::bigint';

-- +goose Down
-- Back to the constraint as 20261212120000 left it: the same check, not validated.
SET LOCAL lock_timeout = '10s';
ALTER TABLE pgqueue_jobs
    DROP CONSTRAINT pgqueue_jobs_status_check,
    ADD CONSTRAINT pgqueue_jobs_status_check
        CHECK (status IN ('pending', 'scheduled', 'available', 'running', 'completed', 'failed', 'cancelled')) NOT VALID;

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261212120000::bigint';
