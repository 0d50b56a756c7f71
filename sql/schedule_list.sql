-- schedule_list: every schedule's row, by queue and name, and the database's clock. Primary key.
SELECT queue, name, spec, handled_until, last_at, created_at, updated_at, now()
FROM pgqueue_schedules
ORDER BY queue, name
