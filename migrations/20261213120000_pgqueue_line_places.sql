-- pgqueue: a wake-up says where in line the jobs it announces begin. pgqueue_line_place(priority,
-- id) writes a job's place as text that sorts in line order (higher priorities first, then lower
-- ids): 8 hex digits of 2^31-1 - priority, then the id's 32. A notification that makes jobs
-- available ('a <queue>') carries the first of their places ('a <queue> <place>'), and one that
-- only frees places under a queue's limits says so ('a <queue> -'), so that each worker's claims
-- can scan a queue's line from where its available jobs begin instead of from the start, through
-- every job claimed before (see the claim floor, floor.go). pgqueue_add_job and pgqueue_wake_held
-- send theirs so: each is rewritten from its own definition with one statement changed, and
-- restored so by the down migration. pgqueue_add_job announces the place of the first possible
-- job of the millisecond and priority of the job it adds, once per transaction unless a later
-- job comes ahead of it, so that a transaction that adds many jobs still sends few
-- notifications.
--
-- Online: creates and replaces functions only; no lock on a table.

-- +goose Up
SET LOCAL lock_timeout = '500ms';

CREATE FUNCTION pgqueue_line_place(priority integer, id uuid) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$ SELECT lpad(to_hex(2147483647::bigint - priority), 8, '0') || encode(uuid_send(id), 'hex') $$;

COMMENT ON FUNCTION pgqueue_line_place(integer, uuid)
    IS 'pgqueue: a job''s place in its queue''s line, as text that sorts in line order';

-- +goose StatementBegin
DO $$
DECLARE
    grantee text;
    def     text;
    changed text;
    -- each function, the call it makes, and that call with the place
    fns constant text[][] := ARRAY[
        ARRAY['pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer, uuid[], text)',
              $c$PERFORM pgqueue_notify(left(added, 1) || ' ' || pgqueue_add_job.queue);$c$,
              $c$DECLARE
        -- The place of the first of this millisecond's jobs of its priority, so that the jobs a
        -- transaction adds share a notification (NOTIFY sends a payload once per transaction), and
        -- one is sent again only for a job ahead of those announced (mark: the first place sent).
        place text := CASE WHEN added = 'available' THEN pgqueue_line_place(pgqueue_add_job.priority,
                          encode(substring(uuid_send(new_id) FROM 1 FOR 6) || '\x00000000000000000000'::bytea, 'hex')::uuid) END;
        mark  text := 'pgqueue.announced_' || md5(pgqueue_add_job.queue);
        sent  text := nullif(current_setting(mark, true), '');
    BEGIN
        IF place IS NULL OR sent IS NULL OR place < sent COLLATE "C" THEN
            PERFORM pgqueue_notify(left(added, 1) || ' ' || pgqueue_add_job.queue || coalesce(' ' || place, ''));
            IF place IS NOT NULL THEN
                PERFORM set_config(mark, place, true);
            END IF;
        END IF;
    END;$c$],
        ARRAY['pgqueue_wake_held(text[])',
              $c$pgqueue_notify('a ' || queue_name)$c$,
              $c$pgqueue_notify('a ' || queue_name || ' -')$c$]];
BEGIN
    FOR i IN 1 .. array_length(fns, 1) LOOP
        def := pg_get_functiondef(fns[i][1]::regprocedure);
        changed := replace(def, fns[i][2], fns[i][3]);
        IF changed = def THEN
            RAISE EXCEPTION 'pgqueue: % does not call %', fns[i][1], fns[i][2];
        END IF;
        EXECUTE changed;
    END LOOP;
    -- Every role that may change jobs may write their places, as it may notify.
    FOR grantee IN SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END
                   FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
                   WHERE c.oid = 'pgqueue_jobs'::regclass AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE') LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION pgqueue_line_place(integer, uuid) TO %s', grantee);
    END LOOP;
END
$$;
-- +goose StatementEnd

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261213120000::bigint';

-- +goose Down
SET LOCAL lock_timeout = '500ms';

-- +goose StatementBegin
DO $$
DECLARE
    def     text;
    changed text;
    fns constant text[][] := ARRAY[
        ARRAY['pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer, uuid[], text)',
              $c$DECLARE
        -- The place of the first of this millisecond's jobs of its priority, so that the jobs a
        -- transaction adds share a notification (NOTIFY sends a payload once per transaction), and
        -- one is sent again only for a job ahead of those announced (mark: the first place sent).
        place text := CASE WHEN added = 'available' THEN pgqueue_line_place(pgqueue_add_job.priority,
                          encode(substring(uuid_send(new_id) FROM 1 FOR 6) || '\x00000000000000000000'::bytea, 'hex')::uuid) END;
        mark  text := 'pgqueue.announced_' || md5(pgqueue_add_job.queue);
        sent  text := nullif(current_setting(mark, true), '');
    BEGIN
        IF place IS NULL OR sent IS NULL OR place < sent COLLATE "C" THEN
            PERFORM pgqueue_notify(left(added, 1) || ' ' || pgqueue_add_job.queue || coalesce(' ' || place, ''));
            IF place IS NOT NULL THEN
                PERFORM set_config(mark, place, true);
            END IF;
        END IF;
    END;$c$,
              $c$PERFORM pgqueue_notify(left(added, 1) || ' ' || pgqueue_add_job.queue);$c$],
        ARRAY['pgqueue_wake_held(text[])',
              $c$pgqueue_notify('a ' || queue_name || ' -')$c$,
              $c$pgqueue_notify('a ' || queue_name)$c$]];
BEGIN
    FOR i IN 1 .. array_length(fns, 1) LOOP
        def := pg_get_functiondef(fns[i][1]::regprocedure);
        changed := replace(def, fns[i][2], fns[i][3]);
        IF changed = def THEN
            RAISE EXCEPTION 'pgqueue: % does not call %', fns[i][1], fns[i][2];
        END IF;
        EXECUTE changed;
    END LOOP;
END
$$;
-- +goose StatementEnd

DROP FUNCTION pgqueue_line_place(integer, uuid);

CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261212140000::bigint';
