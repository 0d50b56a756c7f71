-- schedule_state: for each schedule ($1 queues, $2 names, in step), in that order, the occurrence
-- up to which it is handled (NULL: no row), and the database's clock. Primary key.
SELECT d.queue, d.name, s.handled_until, now()
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS d (queue, name, i)
LEFT JOIN pgqueue_schedules s ON s.queue = d.queue AND s.name = d.name
ORDER BY d.i
