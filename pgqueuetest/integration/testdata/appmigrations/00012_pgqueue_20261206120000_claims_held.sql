-- pgqueue: a queue with only a MaxRunning wakes its workers when a job of it ends only if one of
-- its claims was held back by the limit. Until now every settle of such a queue sent a
-- notification, since a place may have freed for a claim waiting in some process, so a drain
-- whose MaxRunning is never reached paid for one on every settle batch: the NOTIFY at commit, and
-- the wake-up of every process's listener. Three clients draining one such queue ran 8 % faster
-- without them (BenchmarkDrain100kThreeClients).
--
-- claims_held: a claim of the queue took fewer jobs than it asked for because of max_running,
--   and no end of a job has woken the queue's workers since. Set by pgqueue_capped_take,
--   cleared by pgqueue_wake_held.
--
-- pgqueue_capped_take(queue_name, wanted): what claim.sql calls, holding the queue's claim lock,
--   when its count of the running jobs leaves fewer places than wanted: sets claims_held, counts
--   the running jobs again, and returns how many jobs the claim may take.
-- pgqueue_wake_held(queue_names): what a settle of such queues calls, after its statements, in
--   its transaction: for each queue whose claims_held is set, clears it and sends the wake-up
--   ('a <queue>', delivered when the settle commits).
--
-- No wake-up is lost between the two: a claim held back and the end of a job that it counted as
-- running meet at the queue's held lock, a transaction-level advisory lock that the claim takes
-- exclusively before it sets claims_held and counts again, and a settle takes shared before it
-- reads claims_held, both until they commit. If the settle reads first, the claim waits for its
-- commit and its second count (a new snapshot: the function is VOLATILE) no longer sees the job
-- running; if the claim goes first, the settle waits for its commit and sees claims_held. Settles
-- share the lock, so they never wait on each other for it, and only a claim held back takes it.
-- Both take the locks of several queues in name order, so they cannot wait on each other in a
-- circle (claim.sql is sent its queues in name order). A claim held back while a settle of the
-- queue clears the flag waits at most for that settle's commit.
--
-- During an upgrade, processes still running an older pgqueue neither set claims_held nor wait
-- for it: their settles wake the queue on every end as before, and their claims, when held back,
-- are woken by their own poll if no settle of an upgraded process does.
--
-- The functions name the tables qualified by the schema they are created in, and pg_catalog's
-- functions qualified, so that no search_path can redirect them (as 20261202120000's do).

-- +goose Up
ALTER TABLE pgqueue_queues ADD COLUMN claims_held boolean NOT NULL DEFAULT false;

-- +goose StatementBegin
DO $$
DECLARE
    schema constant text := current_schema();
    -- The queue's held lock, for the variable queue_name of both functions.
    held_lock constant text := format('pg_catalog.hashtextextended(%L || queue_name, 0)', 'pgqueue held ' || schema || '.');
BEGIN
    EXECUTE format($f$
        CREATE FUNCTION pgqueue_capped_take(queue_name text, wanted integer) RETURNS integer
        LANGUAGE plpgsql VOLATILE AS %L
    $f$, format($b$
    DECLARE
        room bigint;
    BEGIN
        PERFORM pg_catalog.pg_advisory_xact_lock(%s);
        UPDATE %I.pgqueue_queues SET claims_held = true WHERE name = queue_name AND NOT claims_held;
        SELECT q.max_running - (SELECT pg_catalog.count(*) FROM %I.pgqueue_jobs AS r
                                WHERE r.queue = q.name AND r.status = 'running')
        INTO room FROM %I.pgqueue_queues AS q WHERE q.name = queue_name;
        RETURN greatest(0, least(wanted, coalesce(room, wanted)));
    END$b$, held_lock, schema, schema, schema));

    EXECUTE format($f$
        CREATE FUNCTION pgqueue_wake_held(queue_names text[]) RETURNS void
        LANGUAGE plpgsql VOLATILE AS %L
    $f$, format($b$
    DECLARE
        queue_name text;
    BEGIN
        FOR queue_name IN SELECT DISTINCT n FROM pg_catalog.unnest(queue_names) AS n ORDER BY n LOOP
            PERFORM pg_catalog.pg_advisory_xact_lock_shared(%s);
        END LOOP;
        FOR queue_name IN UPDATE %I.pgqueue_queues SET claims_held = false
                          WHERE name = ANY (queue_names) AND claims_held RETURNING name LOOP
            PERFORM %I.pgqueue_notify('a ' || queue_name);
        END LOOP;
    END$b$, held_lock, schema, schema));
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261206120000::bigint';

-- +goose Down
CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261205120000::bigint';

DROP FUNCTION pgqueue_wake_held(text[]);
DROP FUNCTION pgqueue_capped_take(text, integer);
ALTER TABLE pgqueue_queues DROP COLUMN claims_held;
