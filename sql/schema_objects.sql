-- schema_objects: what the catalog shows of pgqueue in the current schema (the first schema of
-- the search_path that exists; NULL if none does): the objects each migration added, so that a
-- schema migrated before it stated its version is recognized too. Reads only the catalog, which
-- every role may read.
SELECT current_setting('search_path')            AS search_path,
       coalesce(s.nspname::text, '')             AS schema,
       j.oid IS NOT NULL                         AS has_jobs,
       EXISTS (SELECT 1 FROM pg_catalog.pg_attribute AS a
               WHERE a.attrelid = j.oid AND a.attname = 'unique_key' AND NOT a.attisdropped)
                                                 AS has_unique_key,
       EXISTS (SELECT 1 FROM pg_catalog.pg_proc AS p
               WHERE p.pronamespace = s.oid AND p.proname = 'pgqueue_notify')
                                                 AS has_notify,
       EXISTS (SELECT 1 FROM pg_catalog.pg_proc AS p
               WHERE p.pronamespace = s.oid AND p.proname = 'pgqueue_schema_version')
                                                 AS has_version
FROM (SELECT current_schema() AS name) AS c
LEFT JOIN pg_catalog.pg_namespace AS s ON s.nspname = c.name
LEFT JOIN pg_catalog.pg_class AS j ON j.relnamespace = s.oid AND j.relname = 'pgqueue_jobs' AND j.relkind IN ('r', 'p')
