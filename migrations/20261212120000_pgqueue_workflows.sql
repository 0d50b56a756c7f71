-- pgqueue: workflows — jobs that wait for other jobs to finish (a DAG), with a policy per
-- dependency for a parent that fails, is cancelled or is deleted, and a result per job.
--
-- A job that waits for its parents is 'pending': outside every index the claim reads, as a
-- scheduled job is, so that waiting jobs cost the claim nothing. pgqueue_deps holds the edges,
-- one row per parent and child, with the child's policy and the edge's state; the child's
-- waits_for counts its edges not yet met. Releasing dependents is not on the completion path:
-- the end of a job that has dependents (has_dependents) or belongs to a workflow (workflow) is
-- appended to pgqueue_ended by a row trigger, whose WHEN clause is all a plain job's completion
-- pays, and a resolver in every running client takes those rows in batches (sql/resolve.sql),
-- meets or breaks the edges, counts the children down under their row locks, in id order, and
-- releases, cancels or annotates them. A fan-in of many parents to one child so costs one update
-- of the child per batch, not one per parent in the parents' own transactions.
--
-- A completed job is usually deleted by sql/complete.sql; that statement says so to the trigger
-- with the transaction-local setting pgqueue.completing, which tells a completion of a running
-- job from its deletion by an operator. The jobs of a workflow are kept when they complete,
-- with their results, until the whole workflow has finished (pgqueue_workflows.unfinished,
-- counted down by the resolver); retention applies from then on.
--
-- Online on a large table: the columns are added with constant defaults or none (no rewrite),
-- the status check is swapped NOT VALID (no scan while the table's lock is held; the next
-- migration validates it under a lock that lets writers through), the triggers and the new
-- tables need no scan. The lock is waited for at most 10 s, then the migration fails, to be run
-- again.

-- +goose Up
SET LOCAL lock_timeout = '10s';
ALTER TABLE pgqueue_jobs
    ADD COLUMN workflow uuid,                                  -- the workflow the job is a step of
    ADD COLUMN waits_for integer NOT NULL DEFAULT 0,           -- edges to parents not yet met
    ADD COLUMN has_dependents boolean NOT NULL DEFAULT false,  -- some job depends on this one
    ADD COLUMN result jsonb,                                   -- what the handler recorded
    ADD COLUMN parents_failed integer NOT NULL DEFAULT 0,      -- edges broken: parents failed, cancelled, deleted
    -- NULL: released once no edge waits; 'some_failed' (a batch's callback on failure): released
    -- only if some parent failed, was cancelled or deleted, and cancelled otherwise
    ADD COLUMN run_when text,  -- no CHECK: adding one would scan the table under its lock
    DROP CONSTRAINT pgqueue_jobs_status_check,
    ADD CONSTRAINT pgqueue_jobs_status_check
        CHECK (status IN ('pending', 'scheduled', 'available', 'running', 'completed', 'failed', 'cancelled')) NOT VALID;

CREATE TABLE pgqueue_workflows (
    id          uuid        PRIMARY KEY,              -- a ULID, as job ids
    name        text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,                          -- when its last job completed, failed or was cancelled
    jobs        integer     NOT NULL,                 -- how many jobs it has
    unfinished  integer     NOT NULL,                 -- how many have not finished (kept by the resolver)
    metadata    jsonb
);
-- The workflows not yet finished, newest first, for listings.
CREATE INDEX pgqueue_workflows_unfinished_idx ON pgqueue_workflows (id DESC) WHERE finished_at IS NULL;

-- The jobs of each workflow, with their step names.
CREATE TABLE pgqueue_workflow_jobs (
    workflow uuid NOT NULL,
    job      uuid NOT NULL,
    step     text NOT NULL,
    PRIMARY KEY (workflow, job)
);

CREATE TABLE pgqueue_deps (
    parent     uuid NOT NULL,
    child      uuid NOT NULL,
    -- what the child does when the parent fails, is cancelled or is deleted: is cancelled with
    -- it, runs anyway, or waits for the parent to be retried by hand
    on_failure text NOT NULL DEFAULT 'cancel' CHECK (on_failure IN ('cancel', 'run', 'wait')),
    -- waiting: the parent has not finished; met: it completed (or failed, for 'run'); broken:
    -- it failed, was cancelled or deleted, and the child's policy was applied
    state      text NOT NULL DEFAULT 'waiting' CHECK (state IN ('waiting', 'met', 'broken')),
    PRIMARY KEY (parent, child)
);
-- A child's parents, for the workflow view and for a retry of the child.
CREATE INDEX pgqueue_deps_child_idx ON pgqueue_deps (child);

-- Ends (and re-openings, by a retry) of jobs that have dependents or belong to a workflow, in
-- the order they were recorded, for the resolver.
CREATE TABLE pgqueue_ended (
    seq      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job      uuid   NOT NULL,
    workflow uuid,
    outcome  text   NOT NULL  -- completed, failed, cancelled, deleted, or reopened
);

-- A job id as the library prints it: the ULID's 26 characters of Crockford's base 32, for the
-- messages the resolver writes into a job's errors, and for psql.
CREATE FUNCTION pgqueue_ulid(id uuid) RETURNS text
    LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
    SELECT string_agg(substr('0123456789ABCDEFGHJKMNPQRSTVWXYZ',
                             substring(s.b FROM i * 5 + 1 FOR 5)::bit(5)::integer + 1, 1), '' ORDER BY i)
    FROM (SELECT B'00' || ('x' || encode(uuid_send(id), 'hex'))::bit(128) AS b) AS s,
         generate_series(0, 25) AS i
$fn$;

-- +goose StatementBegin
DO $$
DECLARE
    schema constant text := current_schema();
BEGIN
    -- Named qualified by the schema it is created in, as the counting triggers are: a trigger
    -- runs with the search_path of whoever changed the row.
    EXECUTE format($f$
        CREATE FUNCTION pgqueue_job_ended() RETURNS trigger LANGUAGE plpgsql AS %L
    $f$, format($b$BEGIN
        IF TG_OP = 'DELETE' THEN
            INSERT INTO %1$I.pgqueue_ended (job, workflow, outcome)
            VALUES (OLD.id, OLD.workflow,
                    CASE WHEN OLD.status = 'running' AND current_setting('pgqueue.completing', true) = 'on'
                         THEN 'completed' ELSE 'deleted' END);
        ELSE
            INSERT INTO %1$I.pgqueue_ended (job, workflow, outcome)
            VALUES (NEW.id, NEW.workflow,
                    CASE WHEN NEW.status IN ('completed', 'failed', 'cancelled') THEN NEW.status ELSE 'reopened' END);
        END IF;
        PERFORM %1$I.pgqueue_notify('e -');
        RETURN NULL;
    END$b$, schema));
END
$$;
-- +goose StatementEnd

-- A job taking part in a dependency or a workflow crossed the line between unfinished and
-- finished. A plain job pays the WHEN clause alone, and only in an UPDATE that sets status (a
-- claim, a settle): not in a heartbeat's.
CREATE TRIGGER pgqueue_job_ended AFTER UPDATE OF status ON pgqueue_jobs
    FOR EACH ROW
    WHEN ((OLD.has_dependents OR OLD.workflow IS NOT NULL)
          AND (OLD.status IN ('completed', 'failed', 'cancelled')) <> (NEW.status IN ('completed', 'failed', 'cancelled')))
    EXECUTE FUNCTION pgqueue_job_ended();

CREATE TRIGGER pgqueue_job_deleted AFTER DELETE ON pgqueue_jobs
    FOR EACH ROW
    WHEN ((OLD.has_dependents OR OLD.workflow IS NOT NULL)
          AND OLD.status NOT IN ('completed', 'failed', 'cancelled'))
    EXECUTE FUNCTION pgqueue_job_ended();

-- +goose StatementBegin
DO $$
DECLARE
    grantee text;
BEGIN
    -- Every role that may change jobs (PUBLIC too) may add workflows and dependencies, record
    -- and resolve jobs' ends, and name jobs in the resolver's messages.
    FOR grantee IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                   FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
                   WHERE c.oid = 'pgqueue_jobs'::regclass AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE') LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON pgqueue_workflows, pgqueue_workflow_jobs, '
                       'pgqueue_deps, pgqueue_ended TO %s', grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgqueue_ulid(uuid) TO %s', grantee);
    END LOOP;
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261212120000::bigint';

-- +goose Down
SET LOCAL lock_timeout = '10s';
DROP TRIGGER pgqueue_job_deleted ON pgqueue_jobs;
DROP TRIGGER pgqueue_job_ended ON pgqueue_jobs;
DROP FUNCTION pgqueue_job_ended();
DROP FUNCTION pgqueue_ulid(uuid);
DROP TABLE pgqueue_ended, pgqueue_deps, pgqueue_workflow_jobs, pgqueue_workflows;
-- Pending jobs have no status to go back to: they are cancelled, as their parents' ends can no
-- longer release them.
UPDATE pgqueue_jobs SET status = 'cancelled', finished_at = now() WHERE status = 'pending';
ALTER TABLE pgqueue_jobs
    DROP CONSTRAINT pgqueue_jobs_status_check,
    ADD CONSTRAINT pgqueue_jobs_status_check
        CHECK (status IN ('scheduled', 'available', 'running', 'completed', 'failed', 'cancelled')),
    DROP COLUMN run_when,
    DROP COLUMN parents_failed,
    DROP COLUMN result,
    DROP COLUMN has_dependents,
    DROP COLUMN waits_for,
    DROP COLUMN workflow;

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261211120000::bigint';
