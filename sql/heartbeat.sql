-- heartbeat: extends the lease of every job in ($1 id, $2 lock_token, $3 lease ms) that is still
-- held under that token to now + its lease, in one statement for all the running jobs of a
-- runtime, whatever their queues. Returns the ids still held; an id missing from the result lost
-- its lock. Reads the primary key; lock_until is in no
-- index, so the update can stay HOT.
UPDATE pgqueue_jobs AS j
SET lock_until = now() + h.lease_ms * interval '1 millisecond'
FROM unnest($1::uuid[], $2::uuid[], $3::bigint[]) AS h(id, lock_token, lease_ms)
WHERE j.id = h.id AND j.lock_token = h.lock_token
RETURNING j.id
