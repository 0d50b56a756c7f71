-- pgqueue: the history — finished jobs kept by retention, apart from the jobs still to run.
--
-- pgqueue_jobs holds what is pending, scheduled, available or running, and the jobs that finished
-- moments ago; the maintenance loop moves each finished job kept by retention into
-- pgqueue_history once it has been finished a while (sql/history_move.sql), and deletes the ones
-- whose retention has already run out. A history row carries expires_at, the time its queue's
-- retention lets it go (finished_at + the retention of its status; 'infinity' for one kept for
-- ever, never before the time its id was made), and the history is partitioned by it: one
-- partition per day (UTC) of expiry, pgqueue_history_YYYYMMDD, and pgqueue_history_forever.
-- Retention is then a DROP of the partitions whose day has passed (pgqueue_history_drop), not a
-- DELETE of each row: no dead row, no vacuum, seconds for a day of 10⁷ jobs. The partitions are
-- made ahead by whichever process's maintenance gets there first (pgqueue_history_extend), with
-- no cron and no leader: an advisory lock keeps two processes from doing it at once. Both
-- functions are SECURITY DEFINER, owned by the role that migrates, so that the roles that run
-- workers need no right to create tables: each does only that, in this schema.
--
-- The counts (pgqueue_counts) keep counting a finished job wherever it is: the move keeps them as
-- they are, a delete from the history is counted by the same triggers as one from pgqueue_jobs,
-- and a dropped partition's rows are subtracted before it goes.
--
-- pgqueue_all_jobs is both tables as one, for psql and for the reads that look at every job.
-- A column added to pgqueue_jobs is added to pgqueue_history too (at its end, after expires_at)
-- and to the statements that move rows between the two (CONTRIBUTING.md); the view is made again.
--
-- Online: creates tables, functions and a view; pgqueue_jobs is only read for its columns (LIKE,
-- ACCESS SHARE). The finished jobs already in pgqueue_jobs are moved by the maintenance loops
-- afterwards, in batches, as any others.

-- +goose Up
SET LOCAL lock_timeout = '500ms';

CREATE TABLE pgqueue_history (
    LIKE pgqueue_jobs,
    expires_at timestamptz NOT NULL -- when retention lets the job go; 'infinity': never
) PARTITION BY RANGE (expires_at);

COMMENT ON TABLE pgqueue_history
    IS 'pgqueue: finished jobs kept by retention, by day of expiry (see migration 20261214120000)';

-- Job(id) and the operations by id; a lookup names the earliest expiry the id allows
-- (pgqueue_ulid_time), so that only the partitions from the job's creation on are read.
CREATE INDEX pgqueue_history_id_idx ON pgqueue_history (id);
-- Listings by queue and status in finished order, and the bulk operations' filters.
CREATE INDEX pgqueue_history_finished_idx ON pgqueue_history (queue, status, finished_at, id);

CREATE TABLE pgqueue_history_forever PARTITION OF pgqueue_history FOR VALUES FROM ('infinity') TO (MAXVALUE);

-- The time a job id was made: a ULID's first 48 bits are milliseconds since the Unix epoch.
CREATE FUNCTION pgqueue_ulid_time(id uuid) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT to_timestamp(('x' || substr(encode(uuid_send(id), 'hex'), 1, 12))::bit(48)::bigint / 1000.0) $$;

-- pgqueue_history_job(id): the job of that id in the history, if it is there. A job's expiry is
-- never before it finished, which is after its id was made (a ULID's time, give or take a day
-- for clocks that disagree): only the partitions from then on are read, unless the job is not
-- found there (an id that is no ULID, made by hand), when the others are. Every read by id of
-- the history goes through it.
-- +goose StatementBegin
CREATE FUNCTION pgqueue_history_job(job uuid) RETURNS SETOF pgqueue_history
    LANGUAGE plpgsql STABLE
    SET search_path FROM CURRENT
AS $fn$
BEGIN
    RETURN QUERY SELECT * FROM pgqueue_history AS h
                 WHERE h.id = job AND h.expires_at >= pgqueue_ulid_time(job) - interval '1 day';
    IF NOT FOUND THEN
        RETURN QUERY SELECT * FROM pgqueue_history AS h
                     WHERE h.id = job AND h.expires_at < pgqueue_ulid_time(job) - interval '1 day';
    END IF;
END
$fn$;
-- +goose StatementEnd

CREATE VIEW pgqueue_all_jobs AS
    SELECT *, NULL::timestamptz AS expires_at FROM pgqueue_jobs
    UNION ALL
    SELECT * FROM pgqueue_history;

COMMENT ON VIEW pgqueue_all_jobs IS 'pgqueue: every job, still to run (expires_at NULL) or in the history';

-- The counting triggers of pgqueue_jobs, on the history: a delete (an operator's, a retry's move
-- back) is counted, so is a row inserted by hand (counted false), and a TRUNCATE (see below).
CREATE TRIGGER pgqueue_count_inserted AFTER INSERT ON pgqueue_history
    FOR EACH ROW WHEN (NOT NEW.counted) EXECUTE FUNCTION pgqueue_count_inserted();
CREATE TRIGGER pgqueue_count_deleted AFTER DELETE ON pgqueue_history
    REFERENCING OLD TABLE AS pgqueue_old FOR EACH STATEMENT EXECUTE FUNCTION pgqueue_count_deleted();
CREATE TRIGGER pgqueue_count_truncated AFTER TRUNCATE ON pgqueue_history
    FOR EACH STATEMENT EXECUTE FUNCTION pgqueue_count_truncated();

-- +goose StatementBegin
DO $$
DECLARE
    schema constant text := current_schema();
    lock   constant text := current_schema() || '.pgqueue_history'; -- the advisory lock's key
    grantee text;
BEGIN
    -- pgqueue_history_extend(upto): makes the daily partitions from today (UTC) to upto's day
    -- that do not exist yet (at most ten years ahead), and returns the end of the last: every
    -- expiry before it has a partition. NULL if another transaction is making or dropping them.
    EXECUTE format($f$
        CREATE FUNCTION pgqueue_history_extend(upto timestamptz) RETURNS timestamptz
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = %1$I, pg_temp AS %2$L
    $f$, schema, format($b$
    DECLARE
        day  timestamptz := date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
        last constant timestamptz := least(upto, now() + interval '3660 days');
        part text;
    BEGIN
        IF NOT pg_try_advisory_xact_lock(hashtext(%1$L)) THEN
            RETURN NULL;
        END IF;
        WHILE day <= last LOOP
            part := 'pgqueue_history_' || to_char(day AT TIME ZONE 'UTC', 'YYYYMMDD');
            IF to_regclass(format('%%I.%%I', %2$L, part)) IS NULL THEN
                -- made apart and attached, which lets the history's readers and writers through
                -- (CREATE TABLE … PARTITION OF would lock them out while it runs)
                EXECUTE format('CREATE TABLE %%I.%%I (LIKE %%I.pgqueue_history)', %2$L, part, %2$L);
                EXECUTE format('ALTER TABLE %%I.pgqueue_history ATTACH PARTITION %%I.%%I FOR VALUES FROM (%%L) TO (%%L)',
                               %2$L, %2$L, part, day, day + interval '1 day');
            END IF;
            day := day + interval '1 day';
        END LOOP;
        RETURN day;
    END$b$, lock, schema));

    -- pgqueue_history_drop(): drops the oldest partition whose day has passed, after subtracting
    -- its jobs from the counts, and returns how many jobs went (-1: none had passed; the caller
    -- calls again until then, one transaction each). NULL if another transaction is making or
    -- dropping partitions. While its jobs are counted (seconds at 10⁷), the partition is locked
    -- against writers (an operator's delete or retry of one of its jobs waits); the history is
    -- not: the moves into it never go to a partition whose day has passed, and its readers pass.
    -- The drop then holds the history itself for a moment, until the caller commits.
    EXECUTE format($f$
        CREATE FUNCTION pgqueue_history_drop() RETURNS bigint
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = %1$I, pg_temp AS %2$L
    $f$, schema, format($b$
    DECLARE
        part text;
        n    bigint;
    BEGIN
        IF NOT pg_try_advisory_xact_lock(hashtext(%1$L)) THEN
            RETURN NULL;
        END IF;
        SELECT c.relname INTO part FROM pg_catalog.pg_inherits AS i
        JOIN pg_catalog.pg_class AS c ON c.oid = i.inhrelid
        WHERE i.inhparent = format('%%I.pgqueue_history', %2$L)::regclass
          AND c.relname ~ '^pgqueue_history_[0-9]{8}$'
          AND (to_date(substr(c.relname, 17), 'YYYYMMDD') + 1)::timestamp AT TIME ZONE 'UTC' <= now()
        ORDER BY c.relname
        LIMIT 1;
        IF part IS NULL THEN
            RETURN -1;
        END IF;
        EXECUTE format('LOCK TABLE %%I.%%I IN SHARE MODE', %2$L, part);
        EXECUTE format('WITH c AS (INSERT INTO %%I.pgqueue_count_deltas (queue, status, n) '
                       'SELECT queue, status, -count(*) FROM %%I.%%I GROUP BY queue, status RETURNING n) '
                       'SELECT coalesce(-sum(n), 0) FROM c', %2$L, %2$L, part) INTO n;
        EXECUTE format('DROP TABLE %%I.%%I', %2$L, part);
        RETURN n;
    END$b$, lock, schema));

    -- A TRUNCATE of either table counts what is left in both (20261202120000's function emptied
    -- the counts: all there was then). After a TRUNCATE of pgqueue_jobs that is a scan of the
    -- history, under the lock the TRUNCATE holds until it commits.
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION pgqueue_count_truncated() RETURNS trigger LANGUAGE plpgsql AS %L
    $f$, format($b$BEGIN
        DELETE FROM %1$I.pgqueue_count_deltas;
        DELETE FROM %1$I.pgqueue_counts;
        INSERT INTO %1$I.pgqueue_counts (queue, status, n)
        SELECT queue, status, count(*) FROM %1$I.pgqueue_all_jobs GROUP BY queue, status;
        RETURN NULL;
    END$b$, schema));

    REVOKE ALL ON FUNCTION pgqueue_history_extend(timestamptz), pgqueue_history_drop() FROM PUBLIC;

    -- Every role that may change jobs (PUBLIC too) may move them into the history and out, and
    -- keep its partitions.
    FOR grantee IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                   FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
                   WHERE c.oid = 'pgqueue_jobs'::regclass AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE') LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON pgqueue_history TO %s', grantee);
        EXECUTE format('GRANT SELECT ON pgqueue_all_jobs TO %s', grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgqueue_ulid_time(uuid), pgqueue_history_job(uuid), '
                       'pgqueue_history_extend(timestamptz), pgqueue_history_drop() TO %s', grantee);
    END LOOP;
    -- Every role that may read jobs may read the history.
    FOR grantee IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                   FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
                   WHERE c.oid = 'pgqueue_jobs'::regclass AND a.privilege_type = 'SELECT' LOOP
        EXECUTE format('GRANT SELECT ON pgqueue_history, pgqueue_all_jobs TO %s', grantee);
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgqueue_ulid_time(uuid), pgqueue_history_job(uuid) TO %s', grantee);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- pgqueue_lock_parents as 20261212140000 made it, and the parents found in the history: finished,
-- so not marked, and held (FOR KEY SHARE) against a retry that would move them back meanwhile.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgqueue_lock_parents(ids uuid[]) RETURNS TABLE (id uuid, status text)
    LANGUAGE sql VOLATILE
    SET search_path FROM CURRENT
AS $fn$
    WITH locked AS MATERIALIZED (
        SELECT j.id, j.status FROM pgqueue_jobs AS j
        WHERE j.id = ANY (ids)
        ORDER BY j.id
        FOR NO KEY UPDATE
    ), marked AS (
        UPDATE pgqueue_jobs AS j SET has_dependents = true
        FROM locked AS l
        WHERE j.id = ANY (ARRAY(SELECT l.id FROM locked AS l WHERE l.status <> 'completed'))
          AND j.id = l.id AND NOT j.has_dependents
    ), kept AS MATERIALIZED (
        SELECT h.id, h.status
        FROM unnest(ids) AS p(id), LATERAL pgqueue_history_job(p.id) AS h
        WHERE p.id NOT IN (SELECT l.id FROM locked AS l)
    ), held AS (
        SELECT 1 FROM pgqueue_history AS h
        WHERE h.id = ANY (ARRAY(SELECT k.id FROM kept AS k))
        FOR KEY SHARE
    )
    SELECT id, status FROM locked
    UNION ALL
    SELECT id, status FROM kept WHERE (SELECT count(*) FROM held) >= 0
$fn$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261214120000::bigint';

-- +goose Down
SET LOCAL lock_timeout = '500ms';
CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261213120000::bigint';

-- The history goes back into pgqueue_jobs, counted already (the insert trigger skips it, and
-- dropping the history subtracts nothing).
INSERT INTO pgqueue_jobs
SELECT id, queue, status, priority, attempt, max_attempts, run_at, created_at, attempted_at, finished_at,
       lock_until, lock_token, locked_by, retry_delay, payload, errors, unique_key, repeat_remaining,
       repeat_every, repeat_from, metadata, true, key, weight, ahead_lost, workflow, waits_for,
       has_dependents, result, parents_failed, run_when
FROM pgqueue_history;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION pgqueue_lock_parents(ids uuid[]) RETURNS TABLE (id uuid, status text)
    LANGUAGE sql VOLATILE
    SET search_path FROM CURRENT
AS $fn$
    WITH locked AS MATERIALIZED (
        SELECT j.id, j.status FROM pgqueue_jobs AS j
        WHERE j.id = ANY (ids)
        ORDER BY j.id
        FOR NO KEY UPDATE
    ), marked AS (
        UPDATE pgqueue_jobs AS j SET has_dependents = true
        FROM locked AS l
        WHERE j.id = ANY (ARRAY(SELECT l.id FROM locked AS l WHERE l.status <> 'completed'))
          AND j.id = l.id AND NOT j.has_dependents
    )
    SELECT id, status FROM locked
$fn$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION pgqueue_count_truncated() RETURNS trigger LANGUAGE plpgsql AS %L
    $f$, format($b$BEGIN
        DELETE FROM %1$I.pgqueue_count_deltas;
        DELETE FROM %1$I.pgqueue_counts;
        RETURN NULL;
    END$b$, current_schema()));
END
$$;
-- +goose StatementEnd

DROP VIEW pgqueue_all_jobs;
DROP FUNCTION pgqueue_history_job(uuid);
DROP FUNCTION pgqueue_history_drop();
DROP FUNCTION pgqueue_history_extend(timestamptz);
DROP FUNCTION pgqueue_ulid_time(uuid);
DROP TABLE pgqueue_history;
