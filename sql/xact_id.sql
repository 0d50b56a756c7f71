-- xact_id: the id of the current transaction, as text (see xact_rolled_back.sql).
SELECT pg_current_xact_id()::text
