-- heartbeat: extends the lease of every job in ($1 id, $2 lock_token, $3 lease ms) that is still
-- held under that token to now + its lease, in one statement for all the running jobs of a
-- runtime, whatever their queues. It never waits for a row another transaction locks (the
-- completer settling it, a handler's Job.Update or Job.CompleteTx, an application's CancelTx
-- still open, a rescue): such a row is skipped, and a heartbeat stuck behind one would let every
-- other job's lease run out. Returns, for each job still held under its token, its id and
-- whether its lease was extended (false: its row was locked, try again at the next beat); a job
-- missing from the result lost its lock. Reads the primary key; lock_until is in no index, so
-- the update can stay HOT.
WITH held AS (
    SELECT p.ctid, h.lease_ms
    FROM pgqueue_jobs AS p
    JOIN unnest($1::uuid[], $2::uuid[], $3::bigint[]) AS h(id, lock_token, lease_ms)
      ON p.id = h.id AND p.lock_token = h.lock_token
    FOR UPDATE OF p SKIP LOCKED
), extended AS (
    UPDATE pgqueue_jobs AS j
    SET lock_until = now() + e.lease_ms * interval '1 millisecond'
    FROM held AS e
    WHERE j.ctid = e.ctid
    RETURNING j.id
)
SELECT id, true FROM extended
UNION ALL
-- The rows skipped as locked, read as last committed: still held under the token.
SELECT p.id, false
FROM pgqueue_jobs AS p
JOIN unnest($1::uuid[], $2::uuid[]) AS h(id, lock_token) ON p.id = h.id AND p.lock_token = h.lock_token
WHERE h.id NOT IN (SELECT id FROM extended)
