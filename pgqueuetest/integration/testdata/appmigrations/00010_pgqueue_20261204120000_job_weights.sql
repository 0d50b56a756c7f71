-- pgqueue: job weights for rate limits. A job's weight (EnqueueOptions.Weight, 1 unless set) is
-- how much of its queue's rate limits its start uses: a rate of R starts per period lets jobs
-- whose weights add up to at most R start in any window of that length (a job heavier than R
-- starts alone, in an empty window). Each logged start (pgqueue_starts) carries the weight of
-- the job that started. The columns default to 1 and hold no constraint: adding them to a big
-- table rewrites and scans nothing, pgqueue validates the weights it writes, and the claims read
-- a weight below 1 written by hand as 1.

-- +goose Up
ALTER TABLE pgqueue_jobs ADD COLUMN weight integer NOT NULL DEFAULT 1;
ALTER TABLE pgqueue_starts ADD COLUMN weight integer NOT NULL DEFAULT 1;

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261204120000::bigint';

-- +goose Down
CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261203120000::bigint';

ALTER TABLE pgqueue_starts DROP COLUMN weight;
ALTER TABLE pgqueue_jobs DROP COLUMN weight;
