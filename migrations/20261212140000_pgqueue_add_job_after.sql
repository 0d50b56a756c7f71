-- pgqueue: pgqueue_add_job takes dependencies: after, the ids of jobs the new job waits for, and
-- on_parent_failure, what it does if one of them fails, is cancelled or deleted ('cancel', the
-- default, 'run' or 'wait'; see migration 20261212120000). The new job is 'pending' while any of
-- them has not completed; one that has completed meets its dependency at once; one that does not
-- exist is refused (SQLSTATE 23503), as are a unique_key beside after (a pending job holds no
-- unique key) and a bad on_parent_failure (22023). The parents are locked in id order, and those
-- not completed marked as having dependents, by pgqueue_lock_parents, which the library's
-- workflows call too (sql/depend_lock.sql).
--
-- A function's arguments cannot be changed in place: the function is dropped and created anew
-- (the body is 20261211120000's with the dependencies added), and EXECUTE granted again as that
-- migration did. The down migration restores 20261211120000's function.

-- +goose Up
-- +goose StatementBegin
CREATE FUNCTION pgqueue_lock_parents(ids uuid[]) RETURNS TABLE (id uuid, status text)
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

COMMENT ON FUNCTION pgqueue_lock_parents(uuid[])
    IS 'pgqueue: lock jobs that new jobs will depend on, in id order; mark the unfinished ones; return their statuses';

DROP FUNCTION pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer);

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
    max_payload_bytes integer     DEFAULT 1048576,
    after             uuid[]      DEFAULT NULL,
    on_parent_failure text        DEFAULT 'cancel'
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
    waits  integer := 0; -- parents not completed
    found  integer := 0; -- parents that exist
    failed jsonb;        -- [[parent, status]] of parents that failed or were cancelled
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

    IF cardinality(after) > 0 THEN
        IF on_parent_failure IS NULL OR on_parent_failure NOT IN ('cancel', 'run', 'wait') THEN
            RAISE EXCEPTION 'pgqueue_add_job: on_parent_failure %: want cancel, run or wait',
                coalesce(quote_literal(on_parent_failure), 'NULL') USING ERRCODE = '22023';
        END IF;
        IF unique_key IS NOT NULL THEN
            RAISE EXCEPTION 'pgqueue_add_job: unique_key cannot be given with after' USING ERRCODE = '22023';
        END IF;
        IF array_position(after, NULL) IS NOT NULL OR cardinality(after) <> cardinality(ARRAY(SELECT DISTINCT unnest(after))) THEN
            RAISE EXCEPTION 'pgqueue_add_job: after holds NULL or a job twice' USING ERRCODE = '22023';
        END IF;
        SELECT count(*), count(*) FILTER (WHERE p.status <> 'completed'),
               jsonb_agg(jsonb_build_array(p.id, p.status)) FILTER (WHERE p.status IN ('failed', 'cancelled'))
        INTO found, waits, failed
        FROM pgqueue_lock_parents(after) AS p;
        IF found < cardinality(after) THEN
            RAISE EXCEPTION 'pgqueue_add_job: % of the jobs in after do not exist (a completed job is deleted at once unless it is kept)',
                cardinality(after) - found USING ERRCODE = '23503';
        END IF;
    END IF;

    INSERT INTO pgqueue_jobs AS j (id, queue, status, priority, payload, run_at, max_attempts, retry_delay,
                                   unique_key, metadata, key, weight, waits_for, counted)
    VALUES (new_id, pgqueue_add_job.queue, CASE WHEN waits > 0 THEN 'pending' WHEN due > now() THEN 'scheduled' ELSE 'available' END,
            pgqueue_add_job.priority, pgqueue_add_job.payload, due, pgqueue_add_job.max_attempts,
            nullif(pgqueue_add_job.retry_delay, interval '0'), pgqueue_add_job.unique_key, pgqueue_add_job.metadata,
            pgqueue_add_job.key, pgqueue_add_job.weight, waits, true)
    ON CONFLICT (queue, unique_key) WHERE unique_key IS NOT NULL AND status IN ('scheduled', 'available', 'running')
    DO NOTHING
    RETURNING j.status INTO added;
    IF added IS NULL THEN
        RETURN NULL; -- a live job of the queue has the unique key
    END IF;
    INSERT INTO pgqueue_count_deltas (queue, status, n) VALUES (pgqueue_add_job.queue, added, 1);
    IF cardinality(after) > 0 THEN
        INSERT INTO pgqueue_deps (parent, child, on_failure, state)
        SELECT p.id, new_id, on_parent_failure, CASE WHEN p.status = 'completed' THEN 'met' ELSE 'waiting' END
        FROM pgqueue_jobs AS p WHERE p.id = ANY (after);
        -- parents that failed or were cancelled already: the resolver applies the policy
        INSERT INTO pgqueue_ended (job, outcome)
        SELECT (f->>0)::uuid, f->>1 FROM jsonb_array_elements(failed) AS f;
        IF failed IS NOT NULL THEN
            PERFORM pgqueue_notify('e -');
        END IF;
    END IF;
    IF added <> 'pending' THEN
        PERFORM pgqueue_notify(left(added, 1) || ' ' || pgqueue_add_job.queue);
    END IF;
    RETURN new_id;
END
$fn$;
-- +goose StatementEnd

COMMENT ON FUNCTION pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer, uuid[], text)
    IS 'pgqueue: enqueue a job from SQL, optionally after other jobs; returns its id, or NULL when a live job of the queue has the unique key';

-- +goose StatementBegin
DO $$
DECLARE
    grantee text;
BEGIN
    FOR grantee IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                   FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
                   WHERE c.oid = 'pgqueue_jobs'::regclass AND a.privilege_type = 'INSERT' LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer, '
                       'uuid[], text), pgqueue_lock_parents(uuid[]) TO %s', grantee);
    END LOOP;
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261212140000::bigint';

-- +goose Down
DROP FUNCTION pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer, uuid[], text);
DROP FUNCTION pgqueue_lock_parents(uuid[]);

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
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer) TO %s', grantee);
    END LOOP;
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261212130000::bigint';
