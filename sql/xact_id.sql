-- xact_id: the id of the current transaction, as text (see lost_after_rollback.sql).
SELECT pg_current_xact_id()::text
