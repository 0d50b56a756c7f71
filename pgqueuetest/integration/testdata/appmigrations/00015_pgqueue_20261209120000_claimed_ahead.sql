-- pgqueue: what a job claimed ahead of a free slot is charged when its holder dies.
--
-- A worker may claim jobs ahead of its free slots: they wait in the worker for a slot a running
-- handler frees. The claim charges every job's attempt (attempt + 1) and sets attempted_at for
-- the jobs it claims for free slots, which start at once; for a job claimed ahead it leaves
-- attempted_at NULL: not started. The worker records the start of such a job when its handler
-- has run a moment (sql/record_starts.sql), or with its outcome, whichever comes first. The
-- rescue of a job whose lease ran out does not count the attempt of one whose start was never
-- recorded (its handler most likely never ran): it raises max_attempts by one, keeping the
-- attempt's number used, so that no attempt number runs twice; and it sets ahead_lost: from then
-- on every claim of the job records its start at once, even ahead of a slot. So a job whose
-- handler kills its process at every start is counted for every crash but one, and ends failed
-- after at most max_attempts + 1 crashes.
--
-- Adding a column with a constant default rewrites nothing (the default is kept in the
-- catalog), so this is quick on a table of any size. It needs the table's lock for that moment,
-- which waits for every transaction that uses the table, and holds up every one after it
-- meanwhile: it waits at most 10 s, then the migration fails, to be run again.

-- +goose Up
SET LOCAL lock_timeout = '10s';
ALTER TABLE pgqueue_jobs ADD COLUMN ahead_lost boolean NOT NULL DEFAULT false;

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261209120000::bigint';

-- +goose Down
ALTER TABLE pgqueue_jobs DROP COLUMN ahead_lost;

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261208120000::bigint';
