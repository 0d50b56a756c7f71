-- record_starts: records the start of jobs ($1 id, $2 lock_token) claimed ahead of a free slot
-- whose handlers have started since (claim.sql left their attempted_at NULL), still held under
-- their token: from then on the attempt they were charged at claim stays charged if their holder
-- dies (rescue.sql). Skips a row another transaction locks (a heartbeat, a settle): its start is
-- recorded with the next batch, or by its outcome. Returns the ids recorded. Reads the primary
-- key; attempted_at is in the predicate of pgqueue_jobs_key_held_idx, so the update is not HOT.
UPDATE pgqueue_jobs AS j
SET attempted_at = now()
WHERE j.ctid = ANY (ARRAY(
          SELECT p.ctid
          FROM pgqueue_jobs AS p
          JOIN unnest($1::uuid[], $2::uuid[]) AS s(id, lock_token) ON p.id = s.id AND p.lock_token = s.lock_token
          WHERE p.status = 'running' AND p.attempted_at IS NULL
          FOR UPDATE OF p SKIP LOCKED))
RETURNING j.id
