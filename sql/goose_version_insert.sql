-- goose_version_insert: records version $1 as applied in a goose version table ({table}: its
-- quoted name), as goose does; tstamp takes the server's local time, as goose's does.
INSERT INTO {table} (version_id, is_applied) VALUES ($1, true)
