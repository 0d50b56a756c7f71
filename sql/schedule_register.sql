-- schedule_register: records the declared schedules ($1 queues, $2 names, $3 specs, in step) that
-- have no row yet, handled up to now (an occurrence before its declaration is not a missed one),
-- and updates the spec of those whose declaration changed. Primary key.
INSERT INTO pgqueue_schedules (queue, name, spec, handled_until)
SELECT d.queue, d.name, d.spec, now()
FROM unnest($1::text[], $2::text[], $3::text[]) AS d (queue, name, spec)
ON CONFLICT (queue, name) DO UPDATE SET spec = EXCLUDED.spec, updated_at = now()
    WHERE pgqueue_schedules.spec <> EXCLUDED.spec
