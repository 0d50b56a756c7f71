-- schema_version: the version the schema states, maintained by pgqueue's migrations since
-- 20261201140000 (ask schema_objects first: older schemas have no such function).
SELECT pgqueue_schema_version()
