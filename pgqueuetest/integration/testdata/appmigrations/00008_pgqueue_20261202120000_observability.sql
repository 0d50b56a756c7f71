-- pgqueue: what observability needs of the schema: metadata carried with each job, and counts of
-- jobs per queue and status that cost the same to read at 10⁷ jobs as at 10³.
--
-- metadata: a JSON object of string values set at enqueue (EnqueueOptions.Metadata, and enqueue
-- middleware such as the OpenTelemetry integration, which writes a trace context there). NULL
-- when empty. It is in no index, and a repeat of a job inherits it.
--
-- Counts. Counting rows is linear in the rows: ~90 ms for a queue of 10⁶ jobs. Instead every
-- statement that writes pgqueue_jobs appends what it changed to pgqueue_count_deltas: one row per
-- (queue, status) whose count it moved, with the signed change. Updates and deletes are counted
-- by the statement-level triggers below, from the statement's transition tables. Inserts are
-- counted by pgqueue's own insert statements, in the same statement (a trigger's query costs
-- ~25 µs a statement, too much for the single-row enqueue); they set counted, and a row inserted
-- any other way (counted false) is counted by a row-level trigger, so hand-made inserts are
-- counted too. Appends never contend: no row is updated by two writers, so a count costs
-- enqueues and claims no lock wait. A running worker
-- folds the deltas into pgqueue_counts every second (sql/counts_fold.sql); a count is the sum
-- of the two tables' rows of its queue and status, so it is exact and transactional: a reader
-- sees the counts of the transactions committed before its snapshot, as a count(*) would.
-- Whatever writes the table — pgqueue, a migration, an operator's UPDATE in psql — is counted; a
-- TRUNCATE empties both tables (it waits for every writer, so no change of a live transaction is
-- lost).
--
-- The trigger functions name the deltas table qualified by the schema they are created in (the
-- first schema of the search_path, as for the tables), computed here once and quoted by
-- format's %I, so that the caller's search_path plays no part. Transition tables need PL/pgSQL.

-- +goose Up
ALTER TABLE pgqueue_jobs
    ADD COLUMN metadata jsonb,
    ADD COLUMN counted boolean NOT NULL DEFAULT false; -- the inserting statement counted the row itself

CREATE TABLE pgqueue_counts (
    queue  text   NOT NULL,
    status text   NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (queue, status)
);

CREATE TABLE pgqueue_count_deltas (
    queue  text   NOT NULL,
    status text   NOT NULL,
    n      bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

COMMENT ON TABLE pgqueue_counts IS 'pgqueue: jobs per queue and status, up to the deltas not yet folded in';
COMMENT ON TABLE pgqueue_count_deltas IS 'pgqueue: changes of pgqueue_counts, one row per statement and (queue, status)';

-- +goose StatementBegin
DO $$
DECLARE
    deltas constant text := format('%I.pgqueue_count_deltas', current_schema());
BEGIN
    EXECUTE format($f$
        CREATE FUNCTION pgqueue_count_inserted() RETURNS trigger LANGUAGE plpgsql AS %L
    $f$, format($b$BEGIN
        INSERT INTO %s (queue, status, n) VALUES (NEW.queue, NEW.status, 1);
        RETURN NULL;
    END$b$, deltas));
    EXECUTE format($f$
        CREATE FUNCTION pgqueue_count_deleted() RETURNS trigger LANGUAGE plpgsql AS %L
    $f$, format($b$BEGIN
        INSERT INTO %s (queue, status, n)
        SELECT queue, status, -count(*) FROM pgqueue_old GROUP BY queue, status;
        RETURN NULL;
    END$b$, deltas));
    EXECUTE format($f$
        CREATE FUNCTION pgqueue_count_truncated() RETURNS trigger LANGUAGE plpgsql AS %L
    $f$, format($b$BEGIN
        DELETE FROM %s;
        DELETE FROM %s;
        RETURN NULL;
    END$b$, deltas, format('%I.pgqueue_counts', current_schema())));
    EXECUTE format($f$
        CREATE FUNCTION pgqueue_count_updated() RETURNS trigger LANGUAGE plpgsql AS %L
    $f$, format($b$BEGIN
        INSERT INTO %s (queue, status, n)
        SELECT queue, status, sum(n)
        FROM (SELECT queue, status, 1 AS n FROM pgqueue_new
              UNION ALL
              SELECT queue, status, -1 FROM pgqueue_old) AS d
        GROUP BY queue, status
        HAVING sum(n) <> 0;
        RETURN NULL;
    END$b$, deltas));
END
$$;
-- +goose StatementEnd

CREATE TRIGGER pgqueue_count_inserted AFTER INSERT ON pgqueue_jobs
    FOR EACH ROW WHEN (NOT NEW.counted) EXECUTE FUNCTION pgqueue_count_inserted();
CREATE TRIGGER pgqueue_count_deleted AFTER DELETE ON pgqueue_jobs
    REFERENCING OLD TABLE AS pgqueue_old
    FOR EACH STATEMENT EXECUTE FUNCTION pgqueue_count_deleted();
CREATE TRIGGER pgqueue_count_updated AFTER UPDATE ON pgqueue_jobs
    REFERENCING OLD TABLE AS pgqueue_old NEW TABLE AS pgqueue_new
    FOR EACH STATEMENT EXECUTE FUNCTION pgqueue_count_updated();
CREATE TRIGGER pgqueue_count_truncated AFTER TRUNCATE ON pgqueue_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION pgqueue_count_truncated();

-- The counts of the jobs already there. CREATE TRIGGER took a lock that keeps writers out until
-- this migration commits, so no change falls between this count and the triggers.
INSERT INTO pgqueue_counts (queue, status, n)
SELECT queue, status, count(*) FROM pgqueue_jobs GROUP BY queue, status;

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261202120000::bigint';

-- +goose Down
CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261201180000::bigint';

DROP TRIGGER pgqueue_count_truncated ON pgqueue_jobs;
DROP TRIGGER pgqueue_count_updated ON pgqueue_jobs;
DROP TRIGGER pgqueue_count_deleted ON pgqueue_jobs;
DROP TRIGGER pgqueue_count_inserted ON pgqueue_jobs;
DROP FUNCTION pgqueue_count_truncated();
DROP FUNCTION pgqueue_count_updated();
DROP FUNCTION pgqueue_count_deleted();
DROP FUNCTION pgqueue_count_inserted();
DROP TABLE pgqueue_count_deltas;
DROP TABLE pgqueue_counts;
ALTER TABLE pgqueue_jobs DROP COLUMN counted, DROP COLUMN metadata;
