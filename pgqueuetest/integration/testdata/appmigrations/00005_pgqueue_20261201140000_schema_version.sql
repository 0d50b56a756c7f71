-- pgqueue: the schema states its own version. pgqueue_schema_version() returns the version of the
-- latest pgqueue migration applied to this schema, whichever tool applied it (pgqueue.Migrate, or
-- the application's own goose with pgqueue's files under other version numbers). A client
-- compares it with the version its code needs before it serves (Client.CheckSchema).
--
-- Every later pgqueue migration replaces the function, on the way up with its own version, and
-- on the way down with the version of the migration before it:
--   CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint
--       LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT <version>::bigint';
-- Schemas migrated before this migration have no such function: the client recognizes them by
-- the objects each earlier migration added.
--
-- STABLE, not IMMUTABLE: the value changes when a migration replaces the function, and must not
-- be folded into a plan cached before that. It runs with the caller's rights; Postgres grants
-- EXECUTE on new functions to PUBLIC unless default privileges revoke it.

-- +goose Up
CREATE FUNCTION pgqueue_schema_version() RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT 20261201140000::bigint';

COMMENT ON FUNCTION pgqueue_schema_version() IS 'pgqueue: the version of the latest pgqueue migration applied to this schema';

-- +goose Down
DROP FUNCTION pgqueue_schema_version();
