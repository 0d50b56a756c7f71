-- schedule_advance: moves schedule $1/$2 from handled_until $3 to $4, recording $5 (if not NULL)
-- as the latest occurrence enqueued. No row when another process has moved it first: that
-- process enqueues the occurrences, and the caller rolls back. Primary key.
UPDATE pgqueue_schedules
SET handled_until = $4, last_at = coalesce($5, last_at), updated_at = now()
WHERE queue = $1 AND name = $2 AND handled_until = $3
