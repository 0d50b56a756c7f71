-- heartbeat_unlocked: extends the lease of every job in ($1 id, $2 lock_token, $3 lease ms) still held
-- under that token whose row no transaction locks, skipping locked rows instead of waiting for
-- them. For jobs a handler completed in its own transaction (Job.CompleteTx): while that
-- transaction is open it locks the row; once committed, the row is gone or holds no token; once
-- rolled back, the job is the handler's again and its lease must be kept. Returns the ids
-- extended. Reads the primary key; lock_until is in no index, so the update can stay HOT.
WITH extended AS (
    SELECT p.ctid, h.lease_ms
    FROM pgqueue_jobs AS p
    JOIN unnest($1::uuid[], $2::uuid[], $3::bigint[]) AS h(id, lock_token, lease_ms)
      ON p.id = h.id AND p.lock_token = h.lock_token
    FOR UPDATE OF p SKIP LOCKED
)
UPDATE pgqueue_jobs AS j
SET lock_until = now() + e.lease_ms * interval '1 millisecond'
FROM extended AS e
WHERE j.ctid = e.ctid
RETURNING j.id
