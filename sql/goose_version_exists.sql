-- goose_version_exists: whether a goose version table exists, as goose's Postgres dialect looks
-- for it: $1 its schema ('': the current schema), $2 its name. Reads only the catalog.
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables
               WHERE schemaname = coalesce(nullif($1::text, ''), current_schema()) AND tablename = $2::text)
