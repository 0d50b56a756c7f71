-- goose_version_list: the rows of a goose version table ({table}: its quoted name), newest first,
-- as goose lists them; tstamp, a local time without zone, is read in the session's time zone.
SELECT version_id, is_applied, tstamp AT TIME ZONE current_setting('TimeZone')
FROM {table}
ORDER BY id DESC
