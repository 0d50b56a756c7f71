-- pgqueue: a start logged for a rate limit holds its place until the worker reports that its
-- handler started.
--
-- A claim logs each start of a rated queue in pgqueue_starts at the instant it reads the queue,
-- which is also the job's attempted_at; its handler starts a moment later, once the claim has
-- committed and reached the worker. A start now names its job (job_id) and holds its place in
-- the rate's windows until the worker reports that its handler started (recorded_at), and for
-- the period after that: so the handlers of a later claim, which took the places of earlier
-- starts, start at least a period after those starts' handlers, and no window of handler starts
-- holds more than the rate, as no window of attempted_at does. pgqueue_start_holds says whether a
-- start holds a place in the window after since. A start whose worker died before its report is
-- taken as reported by the rescue that finds its lease run out; the starts logged before this
-- migration carry no job and count from started_at, as before. Every role that may update
-- pgqueue_jobs (PUBLIC too) is granted EXECUTE on the new function, as 20261207120000 does for
-- its table, so that a role given only the documented grants goes on claiming across the
-- upgrade.
--
-- Adding columns without a default rewrites nothing, so this is quick on a table of any size. It
-- needs the table's lock for that moment, which waits for every transaction that uses it, and
-- holds up every one after it meanwhile: it waits at most 10 s, then the migration fails, to be
-- run again.

-- +goose Up
SET LOCAL lock_timeout = '10s';
ALTER TABLE pgqueue_starts ADD COLUMN job_id uuid, ADD COLUMN recorded_at timestamptz;
CREATE INDEX pgqueue_starts_pending_idx ON pgqueue_starts (job_id) WHERE job_id IS NOT NULL AND recorded_at IS NULL;

CREATE FUNCTION pgqueue_start_holds(s pgqueue_starts, since timestamptz) RETURNS boolean
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS 'SELECT (s.job_id IS NOT NULL AND s.recorded_at IS NULL) OR greatest(s.started_at, s.recorded_at) > since';

-- +goose StatementBegin
DO $$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                   FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
                   WHERE c.oid = 'pgqueue_jobs'::regclass AND a.privilege_type = 'UPDATE' LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgqueue_start_holds(pgqueue_starts, timestamptz) TO %s', grantee);
    END LOOP;
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261210120000::bigint';

-- +goose Down
DROP FUNCTION pgqueue_start_holds(pgqueue_starts, timestamptz);
DROP INDEX pgqueue_starts_pending_idx;
ALTER TABLE pgqueue_starts DROP COLUMN job_id, DROP COLUMN recorded_at;

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261209120000::bigint';
