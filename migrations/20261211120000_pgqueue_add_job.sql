-- pgqueue: pgqueue_add_job, to enqueue a job from SQL — a trigger, a migration, psql, or a service
-- written in another language — with what Queue.EnqueueTx promises: the job exists if and only if
-- the calling transaction commits, and its queue's workers are woken on commit.
--
-- It checks its arguments as the library's EnqueueOptions do and refuses bad ones with SQLSTATE
-- 22023 (invalid_parameter_value) and a message that names the argument; a payload over
-- max_payload_bytes (the library's Config.MaxPayloadBytes default, 1 MiB, measured on the jsonb's
-- text) with 54000 (program_limit_exceeded). Nothing is written then.
--
-- The id is a ULID, as the library makes them: the database clock's millisecond, then random
-- bits (from gen_random_uuid, 74 of them): jobs enqueued from SQL and from Go line up by the
-- millisecond of their enqueue, ties in random order.
--
-- The function runs with the caller's rights. Its search_path is the one the migration ran
-- with, so that it finds pgqueue's tables whatever the caller's (a trigger of another schema).
-- Every role that may insert into pgqueue_jobs (PUBLIC too) is granted EXECUTE on it, so that a
-- role given the documented grants may call it where PUBLIC's EXECUTE is revoked.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION pgqueue_add_job(
    queue             text,
    payload           jsonb,
    run_at            timestamptz DEFAULT NULL,
    priority          integer     DEFAULT 0,
    max_attempts      integer     DEFAULT 25,
    key               text        DEFAULT NULL,
    unique_key        text        DEFAULT NULL,
    weight            integer     DEFAULT 1,
    metadata          jsonb       DEFAULT NULL,
    retry_delay       interval    DEFAULT NULL,
    max_payload_bytes integer     DEFAULT 1048576
) RETURNS uuid
    LANGUAGE plpgsql VOLATILE
    SET search_path FROM CURRENT
AS $fn$
#variable_conflict use_column
DECLARE
    ms     bigint := floor(extract(epoch FROM clock_timestamp()) * 1000);
    new_id uuid   := encode(substring(int8send(ms) FROM 3) || substring(uuid_send(gen_random_uuid()) FROM 7), 'hex')::uuid;
    due    timestamptz := coalesce(run_at, now());
    size   integer;
    added  text; -- the new job's status
BEGIN
    IF queue IS NULL OR queue !~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$' THEN
        RAISE EXCEPTION 'pgqueue_add_job: queue name %: want 1 to 128 of A-Z a-z 0-9 _ . : -, starting with a letter or digit',
            coalesce(quote_literal(queue), 'NULL') USING ERRCODE = '22023';
    END IF;
    IF payload IS NULL THEN
        RAISE EXCEPTION 'pgqueue_add_job: payload is NULL; give a JSON value (''null''::jsonb for a JSON null)'
            USING ERRCODE = '22023';
    END IF;
    size := octet_length(payload::text);
    IF size > max_payload_bytes THEN
        RAISE EXCEPTION 'pgqueue_add_job: payload too large: % bytes, limit % (max_payload_bytes)', size, max_payload_bytes
            USING ERRCODE = '54000';
    END IF;
    IF priority IS NULL OR priority = -2147483648 THEN
        RAISE EXCEPTION 'pgqueue_add_job: priority % is out of range -2^31+1 .. 2^31-1', coalesce(priority::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF max_attempts IS NULL OR max_attempts < 1 THEN
        RAISE EXCEPTION 'pgqueue_add_job: max_attempts % is out of range 1 .. 2^31-1', coalesce(max_attempts::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF due < '0001-01-01 00:00:00+00' OR due >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'pgqueue_add_job: run_at % is outside years 1 to 9999', due USING ERRCODE = '22023';
    END IF;
    IF octet_length(key) > 255 THEN
        RAISE EXCEPTION 'pgqueue_add_job: key is % bytes long, more than 255', octet_length(key) USING ERRCODE = '22023';
    END IF;
    IF octet_length(unique_key) > 255 THEN
        RAISE EXCEPTION 'pgqueue_add_job: unique_key is % bytes long, more than 255', octet_length(unique_key)
            USING ERRCODE = '22023';
    END IF;
    IF weight IS NULL OR weight < 1 OR weight > 1000000 THEN
        RAISE EXCEPTION 'pgqueue_add_job: weight % is out of range 1 .. 1000000', coalesce(weight::text, 'NULL')
            USING ERRCODE = '22023';
    END IF;
    IF metadata IS NOT NULL AND (jsonb_typeof(metadata) <> 'object' OR EXISTS (
            SELECT FROM jsonb_each(metadata) AS m WHERE jsonb_typeof(m.value) <> 'string')) THEN
        RAISE EXCEPTION 'pgqueue_add_job: metadata must be a JSON object of strings' USING ERRCODE = '22023';
    END IF;
    IF retry_delay < interval '0' THEN
        RAISE EXCEPTION 'pgqueue_add_job: retry_delay % is negative', retry_delay USING ERRCODE = '22023';
    END IF;

    INSERT INTO pgqueue_jobs AS j (id, queue, status, priority, payload, run_at, max_attempts, retry_delay,
                                   unique_key, metadata, key, weight, counted)
    VALUES (new_id, pgqueue_add_job.queue, CASE WHEN due > now() THEN 'scheduled' ELSE 'available' END,
            pgqueue_add_job.priority, pgqueue_add_job.payload, due, pgqueue_add_job.max_attempts,
            nullif(pgqueue_add_job.retry_delay, interval '0'), pgqueue_add_job.unique_key, pgqueue_add_job.metadata,
            pgqueue_add_job.key, pgqueue_add_job.weight, true)
    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND status IN ('scheduled', 'available', 'running')
    DO NOTHING
    RETURNING j.status INTO added;
    IF added IS NULL THEN
        RETURN NULL; -- a live job of the queue has the unique key
    END IF;
    INSERT INTO pgqueue_count_deltas (queue, status, n) VALUES (pgqueue_add_job.queue, added, 1);
    PERFORM pgqueue_notify(left(added, 1) || ' ' || pgqueue_add_job.queue);
    RETURN new_id;
END
$fn$;
-- +goose StatementEnd

COMMENT ON FUNCTION pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer)
    IS 'pgqueue: enqueue a job from SQL; returns its id, or NULL when a live job of the queue has the unique key';

-- +goose StatementBegin
DO $$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                   FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
                   WHERE c.oid = 'pgqueue_jobs'::regclass AND a.privilege_type = 'INSERT' LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, '
                       'integer, jsonb, interval, integer) TO %s', grantee);
    END LOOP;
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261211120000::bigint';

-- +goose Down
DROP FUNCTION pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer);

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261210120000::bigint';
