-- pgqueue: the schema's LISTEN/NOTIFY channel, defined once. Every statement that notifies calls
-- pgqueue_notify(message); the listener LISTENs on pgqueue_channel().
--
-- The channel is 'pgqueue.' and the name of the schema the functions are created in (the first
-- schema of the search_path, as for the tables), cast to name: cut to the 63 bytes a channel may
-- have without splitting a character (left(…, 63) counts characters, and a longer channel makes
-- pg_notify fail); names that fit are unchanged. It is computed here, once, and written into both
-- functions as a constant, so that it is always the channel of the schema the functions live in:
--   * A call resolves pgqueue_notify through the caller's search_path, as it resolves the tables,
--     but the caller's current_schema() plays no part in the channel it notifies.
--   * The bodies name nothing but the schema-qualified pg_catalog.pg_notify, so no search_path,
--     however hostile, can redirect them. (SET search_path on the functions was the alternative:
--     it would keep the planner from inlining them and cost a settings change on every call,
--     and SET … FROM CURRENT would capture "$user", which resolves afresh for each caller.)
--   * The schema name reaches the bodies only as a literal quoted by format's %L, never as an
--     identifier.
-- Renaming the schema leaves notifier and listener on the old channel alike.
--
-- LANGUAGE sql: a single SELECT that the planner inlines into the calling statement, so a
-- notification costs what the bare pg_notify call did. (A SQL-standard body, RETURN …, bound at
-- creation, would need Postgres 14.) pgqueue_notify is VOLATILE, for it has a side effect (the
-- notification, delivered on commit), and not STRICT: a NULL message goes out empty, as with
-- pg_notify. pgqueue_channel returns a constant: IMMUTABLE. Both run with the caller's rights;
-- Postgres grants EXECUTE on new functions to PUBLIC unless default privileges revoke it.

-- +goose Up
-- +goose StatementBegin
DO $$
DECLARE
    channel constant text := ('pgqueue.' || current_schema())::name::text;
BEGIN
    EXECUTE format('CREATE FUNCTION pgqueue_channel() RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE AS %L',
                   format('SELECT %L::text', channel));
    EXECUTE format('CREATE FUNCTION pgqueue_notify(message text) RETURNS void LANGUAGE sql VOLATILE AS %L',
                   format('SELECT pg_catalog.pg_notify(%L, message)', channel));
END
$$;
-- +goose StatementEnd

COMMENT ON FUNCTION pgqueue_channel() IS 'pgqueue: the LISTEN/NOTIFY channel of this schema';
COMMENT ON FUNCTION pgqueue_notify(text) IS 'pgqueue: sends a message on this schema''s channel, on commit';

-- +goose Down
DROP FUNCTION pgqueue_notify(text);
DROP FUNCTION pgqueue_channel();
