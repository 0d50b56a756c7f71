-- claim_limited: claim.sql for queues with limits, sent after claim_lock.sql in the same
-- transaction: of each queue $1[i], up to $2[i] jobs for $3[i] ms, to worker $4, within the
-- queue's limits. A limited queue whose claim lock this transaction does not hold yields nothing;
-- a queue found to have no limits (they were just removed) is claimed as claim.sql would.
--
-- What each queue may start (its budget): what was asked, less what max_running leaves once the
-- queue's running jobs are counted (pgqueue_jobs_running_idx).
--
-- Without a per-key limit the budget is taken in the queue's order, as claim.sql does.
--
-- With one, the claim walks the keys that have available jobs, from the key after key_cursor
-- round to it again (the recursive walk: one probe of pgqueue_jobs_key_idx per key), and takes of
-- each key its first jobs in run order, as many as key_max_running leaves once the key's held
-- jobs are counted (pgqueue_jobs_key_held_idx), until the budget is spent; key_cursor moves to
-- the last key served. So every key with jobs waiting gets its turn within one lap: a key waits
-- at most (keys waiting ÷ budget) claims, however many jobs another key has. The walk is read
-- lazily: it visits the keys it takes jobs from and the full keys between them, no more. Jobs
-- without a key are taken from the first jobs in the queue's line (as many as the budget),
-- with what the keys left of it.
WITH claimable AS (
    SELECT x.queue, x.n, p.key_max_running, coalesce(p.key_cursor, '') AS cursor,
           CASE WHEN p.max_running IS NULL AND p.key_max_running IS NULL THEN x.n
                WHEN x.queue <> ALL (coalesce(nullif(current_setting('pgqueue.claim_locked', true), ''), '{}')::text[]) THEN 0
                WHEN p.max_running IS NULL THEN x.n
                ELSE greatest(0, least(x.n, p.max_running - (SELECT count(*) FROM pgqueue_jobs AS r
                                                            WHERE r.queue = x.queue AND r.status = 'running')))
           END AS budget
    FROM unnest($1::text[], $2::int[]) AS x(queue, n)
    JOIN pgqueue_queues AS p ON p.name = x.queue AND NOT p.paused
    WHERE set_config('synchronous_commit', 'off', true) = 'off' -- as in claim.sql
), plain AS (
    SELECT c.queue, a.ctid
    FROM claimable AS c,
         LATERAL (SELECT a.ctid FROM pgqueue_jobs AS a
                  WHERE a.queue = c.queue AND a.status = 'available'
                  ORDER BY -a.priority, a.id
                  LIMIT c.budget
                  FOR UPDATE SKIP LOCKED) AS a
    WHERE c.key_max_running IS NULL AND c.budget > 0
), keyed AS (
    SELECT c.queue, k.ctid, k.key, k.lap, k.step
    FROM claimable AS c,
         LATERAL (
             WITH RECURSIVE walk (key, lap, step) AS (
                 (SELECT s.key, s.lap, 1
                  FROM ((SELECT a.key, 0 AS lap FROM pgqueue_jobs AS a
                         WHERE a.queue = c.queue AND a.status = 'available' AND a.key IS NOT NULL
                           AND a.key > c.cursor
                         ORDER BY a.key LIMIT 1)
                        UNION ALL
                        (SELECT a.key, 1 FROM pgqueue_jobs AS a
                         WHERE a.queue = c.queue AND a.status = 'available' AND a.key IS NOT NULL
                         ORDER BY a.key LIMIT 1)
                        LIMIT 1) AS s)
                 UNION ALL
                 (SELECT n.key, n.lap, w.step + 1
                  FROM walk AS w,
                       LATERAL ((SELECT a.key, w.lap AS lap FROM pgqueue_jobs AS a
                                 WHERE a.queue = c.queue AND a.status = 'available' AND a.key IS NOT NULL
                                   AND a.key > w.key
                                 ORDER BY a.key LIMIT 1)
                                UNION ALL
                                (SELECT a.key, 1 FROM pgqueue_jobs AS a
                                 WHERE w.lap = 0 AND a.queue = c.queue AND a.status = 'available'
                                   AND a.key IS NOT NULL
                                 ORDER BY a.key LIMIT 1)
                                LIMIT 1) AS n
                  WHERE n.lap = 0 OR n.key <= c.cursor)
             )
             SELECT w.key, w.lap, w.step, j.ctid
             FROM walk AS w,
                  LATERAL (SELECT c.key_max_running - count(*) AS room FROM pgqueue_jobs AS h
                           WHERE h.queue = c.queue AND h.key = w.key AND h.key IS NOT NULL
                             AND (h.status = 'running' OR (h.status = 'scheduled' AND h.attempt > 0))) AS r,
                  LATERAL (SELECT a.ctid FROM pgqueue_jobs AS a
                           WHERE a.queue = c.queue AND a.key = w.key AND a.status = 'available'
                             AND a.key IS NOT NULL
                           ORDER BY -a.priority, a.id
                           LIMIT greatest(r.room, 0)
                           FOR UPDATE SKIP LOCKED) AS j
             LIMIT c.budget) AS k
    WHERE c.key_max_running IS NOT NULL AND c.budget > 0
), unkeyed AS (
    SELECT c.queue, u.ctid
    FROM claimable AS c,
         LATERAL (SELECT h.ctid
                  FROM (SELECT a.ctid, a.key FROM pgqueue_jobs AS a
                        WHERE a.queue = c.queue AND a.status = 'available'
                        ORDER BY -a.priority, a.id
                        LIMIT c.budget) AS h
                  WHERE h.key IS NULL
                  LIMIT c.budget - (SELECT count(*) FROM keyed WHERE keyed.queue = c.queue)) AS u
    WHERE c.key_max_running IS NOT NULL AND c.budget > 0
), served AS (
    UPDATE pgqueue_queues AS p
    SET key_cursor = last.key
    FROM (SELECT DISTINCT ON (queue) queue, key FROM keyed ORDER BY queue, lap DESC, step DESC) AS last
    WHERE p.name = last.queue
)
UPDATE pgqueue_jobs AS j
SET status       = 'running',
    attempt      = j.attempt + 1,
    lock_token   = gen_random_uuid(),
    lock_until   = now() + ($3::bigint[])[array_position($1::text[], j.queue)] * interval '1 millisecond',
    locked_by    = $4,
    attempted_at = now()
WHERE j.ctid = ANY (ARRAY(SELECT ctid FROM plain UNION ALL SELECT ctid FROM keyed
                          UNION ALL SELECT ctid FROM unkeyed))
RETURNING j.queue, j.id, j.priority, j.attempt, j.max_attempts, j.run_at, j.created_at, j.lock_token,
          j.payload, j.errors, j.unique_key, j.repeat_remaining,
          (extract(epoch FROM j.repeat_every) * 1e6)::bigint, j.metadata, j.key,
          EXISTS (SELECT 1 FROM pgqueue_queues AS q WHERE q.name = j.queue AND q.watched_until > now())
