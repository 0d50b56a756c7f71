-- pgqueue: the mark that a queue's claims were held back by its MaxRunning moves out of
-- pgqueue_queues into a table of its own, pgqueue_claims_held, which only pgqueue_capped_take
-- and pgqueue_wake_held write. As a column of the queue's row, the mark was set and cleared by
-- UPDATEs that waited for the row's lock, which an application's transaction may hold for as long
-- as it likes (an open SetLimitsTx, PauseTx or ResumeTx): a settle of the queue waited there,
-- holding the queue's held lock shared, and the next claim held back by the limit waited for that
-- lock. A runtime settles and claims for all its queues together, so none of them got on until
-- the application's transaction ended.
--
-- pgqueue_claims_held: a row per queue one of whose claims took fewer jobs than it asked for
--   because of max_running, and whose workers no end of a job has woken since.
--
-- The handshake is the one of 20261206120000, with an insert for the UPDATE that set the mark and
-- a delete for the one that cleared it. Neither waits for a row lock an application could hold:
-- pgqueue_capped_take holds the queue's held lock exclusively, so no settle is deleting the row it
-- may insert and no other claim inserting it; two settles that delete the same row wait only for
-- each other's commit, as two settles did before. Both functions keep their signatures, so
-- processes of the previous version call the new bodies.
--
-- The functions run with their caller's rights, so every role that claims jobs needs the new
-- table: each role that may update pgqueue_jobs (PUBLIC too) is granted SELECT, INSERT and DELETE
-- on it here, so that a role given only the documented grants goes on claiming and settling
-- across the upgrade. Marks set when the migration runs are carried over.

-- +goose Up
CREATE TABLE pgqueue_claims_held (
    queue text PRIMARY KEY
);
INSERT INTO pgqueue_claims_held (queue) SELECT name FROM pgqueue_queues WHERE claims_held;

-- +goose StatementBegin
DO $$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                   FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
                   WHERE c.oid = 'pgqueue_jobs'::regclass AND a.privilege_type = 'UPDATE' LOOP
        EXECUTE format('GRANT SELECT, INSERT, DELETE ON pgqueue_claims_held TO %s', grantee);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
DO $$
DECLARE
    schema constant text := current_schema();
    -- The queue's held lock, for the variable queue_name of both functions (as 20261206120000's).
    held_lock constant text := format('pg_catalog.hashtextextended(%L || queue_name, 0)', 'pgqueue held ' || schema || '.');
BEGIN
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION pgqueue_capped_take(queue_name text, wanted integer) RETURNS integer
        LANGUAGE plpgsql VOLATILE AS %L
    $f$, format($b$
    DECLARE
        room bigint;
    BEGIN
        PERFORM pg_catalog.pg_advisory_xact_lock(%s);
        INSERT INTO %I.pgqueue_claims_held (queue) VALUES (queue_name) ON CONFLICT DO NOTHING;
        SELECT q.max_running - (SELECT pg_catalog.count(*) FROM %I.pgqueue_jobs AS r
                                WHERE r.queue = q.name AND r.status = 'running')
        INTO room FROM %I.pgqueue_queues AS q WHERE q.name = queue_name;
        RETURN greatest(0, least(wanted, coalesce(room, wanted)));
    END$b$, held_lock, schema, schema, schema));

    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION pgqueue_wake_held(queue_names text[]) RETURNS void
        LANGUAGE plpgsql VOLATILE AS %L
    $f$, format($b$
    DECLARE
        queue_name text;
    BEGIN
        FOR queue_name IN SELECT DISTINCT n FROM pg_catalog.unnest(queue_names) AS n ORDER BY n LOOP
            PERFORM pg_catalog.pg_advisory_xact_lock_shared(%s);
        END LOOP;
        FOR queue_name IN DELETE FROM %I.pgqueue_claims_held WHERE queue = ANY (queue_names) RETURNING queue LOOP
            PERFORM %I.pgqueue_notify('a ' || queue_name);
        END LOOP;
    END$b$, held_lock, schema, schema));
END
$$;
-- +goose StatementEnd

ALTER TABLE pgqueue_queues DROP COLUMN claims_held;

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261207120000::bigint';

-- +goose Down
ALTER TABLE pgqueue_queues ADD COLUMN claims_held boolean NOT NULL DEFAULT false;
UPDATE pgqueue_queues SET claims_held = true WHERE name IN (SELECT queue FROM pgqueue_claims_held);

-- +goose StatementBegin
DO $$
DECLARE
    schema constant text := current_schema();
    held_lock constant text := format('pg_catalog.hashtextextended(%L || queue_name, 0)', 'pgqueue held ' || schema || '.');
BEGIN
    EXECUTE format($f$
        CREATE OR REPLACE FUNCTION pgqueue_capped_take(queue_name text, wanted integer) RETURNS integer
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
        CREATE OR REPLACE FUNCTION pgqueue_wake_held(queue_names text[]) RETURNS void
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

DROP TABLE pgqueue_claims_held;

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261206120000::bigint';
