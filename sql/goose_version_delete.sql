-- goose_version_delete: takes version $1 out of a goose version table ({table}: its quoted name),
-- as goose does when it migrates that version down.
DELETE FROM {table} WHERE version_id = $1
