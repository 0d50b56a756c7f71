-- migrate_lock: waits for the session advisory lock that serializes migrations of the current
-- schema ($1 is pgqueue's lock class; the second key hashes the schema name).
SELECT pg_advisory_lock($1, hashtext(current_schema()))
