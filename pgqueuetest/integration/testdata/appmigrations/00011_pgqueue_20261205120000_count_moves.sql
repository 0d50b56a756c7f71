-- pgqueue: counts that a claim does not write. Counting every update (20261202120000's
-- statement-level trigger, which copied each updated row, before and after, into transition
-- tables and added them up) cost a claim of 100 jobs ~6 % of its rate, on the claiming backend,
-- the busiest process of a drain.
--
-- Now available and running jobs are counted together: the counts of the two statuses are read
-- as one (sql/stats.sql), and the running jobs are counted apart, from pgqueue_jobs_running_idx
-- (a few times the handlers of the processes working the queue, however long the queue). So a
-- move between the two — a claim, a rescue or a requeue that puts a job back in line — changes no
-- count, and a claim writes none. Every other change of a job's queue or status is counted:
--
--   * by the statement itself, for pgqueue's statements that move many jobs (promotion, the
--     settles, rescue, bulk cancel and retry): it appends one delta row per queue and status to
--     pgqueue_count_deltas through pgqueue_count_moves, and says so by flipping the moved rows'
--     counted column;
--   * otherwise by the row-level trigger below, which appends a delta row for where the row left
--     and one for where it went — an UPDATE by hand, a migration's, a single-job operation's, or
--     an older pgqueue's. Its WHEN sees counted unchanged only on rows no statement counted, and
--     skips rows whose status stays (a heartbeat) without running a function.
--
-- The functions name the deltas table qualified by the schema they are created in, as those of
-- 20261202120000 do. The counts already there stay exact: the sum of the available and running
-- counts is what is read from now on, and the moves between them that go uncounted leave it as
-- it is. The down migration counts every job again (its triggers keep writers out until it
-- commits), since the available and running counts apart are no longer kept.

-- +goose Up
DROP TRIGGER pgqueue_count_updated ON pgqueue_jobs;
DROP FUNCTION pgqueue_count_updated();

-- +goose StatementBegin
DO $$
DECLARE
    deltas constant text := format('%I.pgqueue_count_deltas', current_schema());
BEGIN
    EXECUTE format($f$
        CREATE FUNCTION pgqueue_count_moved() RETURNS trigger LANGUAGE plpgsql AS %L
    $f$, format($b$BEGIN
        INSERT INTO %s (queue, status, n) VALUES (OLD.queue, OLD.status, -1), (NEW.queue, NEW.status, 1);
        RETURN NULL;
    END$b$, deltas));
    -- pgqueue_count_moves(queues, from, to): a statement moved one job of queues[i] from the
    -- status from[i] to to[i], for each i; appends the changes, one row per queue and status.
    EXECUTE format($f$
        CREATE FUNCTION pgqueue_count_moves(queues text[], from_status text[], to_status text[])
        RETURNS bigint LANGUAGE sql VOLATILE AS %L
    $f$, format($b$
        WITH appended AS (
            INSERT INTO %s (queue, status, n)
            SELECT c.queue, c.status, sum(c.n)
            FROM unnest(queues, from_status, to_status) AS m(queue, from_status, to_status),
                 LATERAL (VALUES (m.queue, m.from_status, -1), (m.queue, m.to_status, 1)) AS c(queue, status, n)
            GROUP BY c.queue, c.status
            HAVING sum(c.n) <> 0
            RETURNING 1
        )
        SELECT count(*) FROM appended
    $b$, deltas));
END
$$;
-- +goose StatementEnd

CREATE TRIGGER pgqueue_count_moved AFTER UPDATE ON pgqueue_jobs
    FOR EACH ROW
    WHEN (OLD.counted = NEW.counted
          AND (OLD.queue <> NEW.queue
               OR (OLD.status <> NEW.status
                   AND NOT (OLD.status IN ('available', 'running') AND NEW.status IN ('available', 'running')))))
    EXECUTE FUNCTION pgqueue_count_moved();

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261205120000::bigint';

-- +goose Down
CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261204120000::bigint';

DROP TRIGGER pgqueue_count_moved ON pgqueue_jobs;
DROP FUNCTION pgqueue_count_moves(text[], text[], text[]);
DROP FUNCTION pgqueue_count_moved();

-- +goose StatementBegin
DO $$
BEGIN
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
    END$b$, format('%I.pgqueue_count_deltas', current_schema())));
END
$$;
-- +goose StatementEnd

CREATE TRIGGER pgqueue_count_updated AFTER UPDATE ON pgqueue_jobs
    REFERENCING OLD TABLE AS pgqueue_old NEW TABLE AS pgqueue_new
    FOR EACH STATEMENT EXECUTE FUNCTION pgqueue_count_updated();

-- CREATE TRIGGER took a lock that keeps writers out until this migration commits.
DELETE FROM pgqueue_count_deltas;
DELETE FROM pgqueue_counts;
INSERT INTO pgqueue_counts (queue, status, n)
SELECT queue, status, count(*) FROM pgqueue_jobs GROUP BY queue, status;
