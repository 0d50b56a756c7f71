-- claim: leases up to $2 available jobs of queue $1, highest priority first, then oldest id, to
-- worker $4 for $3 ms; each claimed job gets a fresh lock token and one more attempt. A paused
-- queue yields nothing. Each row also says whether the queue is being watched, so that the
-- worker announces the jobs' starts and outcomes.
-- Reads pgqueue_jobs_claim_idx (queue, (-priority), id) WHERE status = 'available' to pick and
-- lock the rows, then updates them by their physical address (ctid), which the row locks keep
-- stable for the statement: no second lookup through the primary key.
UPDATE pgqueue_jobs AS j
SET status       = 'running',
    attempt      = j.attempt + 1,
    lock_token   = gen_random_uuid(),
    lock_until   = now() + $3::bigint * interval '1 millisecond',
    locked_by    = $4,
    attempted_at = now()
WHERE j.ctid = ANY (ARRAY(
          SELECT ctid
          FROM pgqueue_jobs
          WHERE queue = $1 AND status = 'available'
            AND NOT EXISTS (SELECT 1 FROM pgqueue_queues AS q WHERE q.name = $1 AND q.paused)
          ORDER BY -priority, id
          LIMIT $2
          FOR UPDATE SKIP LOCKED))
  AND j.queue = $1
RETURNING j.id, j.priority, j.attempt, j.max_attempts, j.run_at, j.created_at, j.lock_token,
          j.payload, j.errors, j.unique_key, j.repeat_remaining,
          (extract(epoch FROM j.repeat_every) * 1e6)::bigint,
          EXISTS (SELECT 1 FROM pgqueue_queues AS q WHERE q.name = $1 AND q.watched_until > now())
