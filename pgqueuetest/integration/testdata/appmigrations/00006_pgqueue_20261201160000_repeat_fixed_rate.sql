-- pgqueue: repeats at a fixed rate. repeat_from is set on a job that repeats at a fixed rate
-- (EnqueueOptions.RepeatFixedRate): the time this run was due, from which the next run's due time
-- is counted on the grid repeat_from + k * repeat_every. NULL: the next run is due repeat_every
-- after this run ends, as before. Retries move run_at but never repeat_from, so a run that failed
-- a few times does not shift the grid. It is in no index.

-- +goose Up
ALTER TABLE pgqueue_jobs ADD COLUMN repeat_from timestamptz;

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261201160000::bigint';

-- +goose Down
CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261201140000::bigint';

ALTER TABLE pgqueue_jobs DROP COLUMN repeat_from;
