-- heartbeat: extends by $3 ms the lease of every job in ($1 id, $2 lock_token) that is still held
-- under that token, in one statement for all of a worker's running jobs. Returns the ids still
-- held; an id missing from the result lost its lock. Reads the primary key; lock_until is in no
-- index, so the update can stay HOT.
UPDATE pgqueue_jobs AS j
SET lock_until = now() + $3::bigint * interval '1 millisecond'
FROM unnest($1::uuid[], $2::uuid[]) AS h(id, lock_token)
WHERE j.id = h.id AND j.lock_token = h.lock_token
RETURNING j.id
