-- claim_limited: claim.sql for queues with per-key limits or rates (pgqueue_queues.claim_limited),
-- sent after claim_lock.sql in the same transaction: of each queue $1[i], up to $2[i] jobs for
-- $3[i] ms, to worker $4, within the queue's limits. A limited queue whose claim lock this
-- transaction does not hold yields nothing; a queue found to have fewer limits (they were just
-- changed) is claimed as claim.sql would. The running-jobs count is claim.sql's.
--
-- What each queue may start (its budget): what was asked, at most what max_running leaves once
-- the queue's running jobs are counted (pgqueue_jobs_running_idx), and at most as many jobs as
-- rate_limit leaves weight for once the weights of the queue's starts that hold a place in the
-- last rate_period are added up (pgqueue_starts_queue_idx). Time is the clock when the statement
-- reads the queue (at), after the claim lock was granted, so the starts of every earlier claim of
-- the queue are older; and at is the start of the jobs it claims: what is logged, and their
-- attempted_at (not now(), the transaction's start, up to tens of ms earlier under load: a claim
-- whose transaction began before a start left the window, and that read the queue after, put its
-- jobs' attempted_at in a window that was already full).
--
-- A start holds its place until its worker reports that its handler started (recorded_at), and
-- for the period after (pgqueue_start_holds, migration 20261210120000): a handler starts after
-- its claim commits, so the handlers of a later claim, which starts after at least a period has
-- passed since the handlers of the claims whose places it takes were reported started, start at
-- least a period after them.
--
-- Weights (EnqueueOptions.Weight; a weight below 1 counts as 1): the jobs picked are taken in
-- their order for as long as their weights, added up, fit in what the rate leaves (fits): per key
-- (key_rate_limit) in the key's order, then for the queue (rate_limit) in the claim's order,
-- keys' jobs first. The first job that does not fit ends its line: no lighter job after it
-- passes it. A job heavier than a whole rate starts when that window is empty, alone.
--
-- Without a per-key limit or rate the budget is taken in the queue's order, as claim.sql does.
--
-- With one, the claim walks the keys that have available jobs, from the key after key_cursor
-- round to it again (the recursive walk: one probe of pgqueue_jobs_key_idx per key, which lands
-- on the key's first job in run order), and takes of each key its first jobs, as many as
-- key_max_running leaves once the key's held jobs are counted (pgqueue_jobs_key_held_idx) and
-- key_rate_limit leaves weight for once the weights of the key's starts that hold a place in the
-- last key_rate_period are added up (pgqueue_starts_key_idx), until
-- the budget is spent; key_cursor moves to the last key served. So every key with jobs waiting
-- gets its turn within one lap: a key waits at most (keys waiting ÷ budget) claims, however many
-- jobs another key has. The walk is read lazily: it visits the keys it takes jobs from and the
-- full keys between them, no more. Jobs without a key are taken from the first jobs in the
-- queue's line (as many as the budget), with what the keys left of it.
--
-- The starts of queues with a rate limit are logged in pgqueue_starts at at, the jobs'
-- attempted_at, with their jobs and weights (at least 1, so that the sums over the log need not
-- check), and those that hold no place in the queue's longest period any more are deleted.
WITH claimable AS (
    SELECT x.queue, t.at, p.key_max_running, p.key_rate_limit, p.key_rate_period,
           p.rate_limit IS NOT NULL OR p.key_rate_limit IS NOT NULL AS rated,
           greatest(p.rate_period, p.key_rate_period) AS longest_period,
           coalesce(p.key_cursor, '') AS cursor,
           p.key_max_running IS NOT NULL OR p.key_rate_limit IS NOT NULL AS keyed,
           p.rate_limit - u.used AS room, u.used,
           CASE WHEN NOT p.limited THEN x.n
                WHEN NOT t.locked THEN 0
                ELSE greatest(0, least(
                    x.n,
                    p.max_running - CASE WHEN p.max_running IS NOT NULL THEN
                        (SELECT count(*) FROM pgqueue_jobs AS r WHERE r.queue = x.queue AND r.status = 'running') END,
                    -- As many jobs as the weight left allows (each weighs at least 1), or one
                    -- in an empty window.
                    CASE WHEN u.used = 0 THEN greatest(p.rate_limit, 1) ELSE p.rate_limit - u.used END))
           END AS budget,
           p.limited AND t.locked AS locked
    FROM unnest($1::text[], $2::int[]) AS x(queue, n)
    JOIN pgqueue_queues AS p ON p.name = x.queue AND NOT p.paused
    CROSS JOIN LATERAL (SELECT clock_timestamp() AS at,
                               x.queue = ANY (coalesce(nullif(current_setting('pgqueue.claim_locked', true), ''),
                                                       '{}')::text[]) AS locked) AS t
    CROSS JOIN LATERAL (SELECT CASE WHEN p.rate_limit IS NOT NULL THEN
                                   (SELECT coalesce(sum(s.weight), 0) FROM pgqueue_starts AS s
                                    WHERE s.queue = x.queue AND pgqueue_start_holds(s, t.at - p.rate_period)) END AS used) AS u
    WHERE set_config('synchronous_commit', 'off', true) = 'off' -- as in claim.sql
), plain AS (
    SELECT c.queue, a.ctid, NULL::text AS key, 0 AS lap, 0 AS step, a.p, a.id, a.w,
           NULL::bigint AS key_room, NULL::bigint AS key_used
    FROM claimable AS c,
         LATERAL (SELECT a.ctid, -a.priority AS p, a.id, greatest(a.weight, 1) AS w FROM pgqueue_jobs AS a
                  WHERE a.queue = c.queue AND a.status = 'available'
                  ORDER BY -a.priority, a.id
                  LIMIT c.budget
                  FOR UPDATE SKIP LOCKED) AS a
    WHERE NOT c.keyed AND c.budget > 0
), keyed AS (
    SELECT c.queue, k.ctid, k.key, k.lap, k.step, k.p, k.id, k.w, k.key_room, k.key_used
    FROM claimable AS c,
         LATERAL (
             WITH RECURSIVE walk (key, lap, step, head, p, id) AS (
                 (SELECT s.key, s.lap, 1, s.ctid, s.p, s.id
                  FROM ((SELECT a.key, 0 AS lap, a.ctid, -a.priority AS p, a.id FROM pgqueue_jobs AS a
                         WHERE a.queue = c.queue AND a.status = 'available' AND a.key IS NOT NULL
                           AND a.key > c.cursor
                         ORDER BY a.key, -a.priority, a.id LIMIT 1)
                        UNION ALL
                        (SELECT a.key, 1, a.ctid, -a.priority, a.id FROM pgqueue_jobs AS a
                         WHERE a.queue = c.queue AND a.status = 'available' AND a.key IS NOT NULL
                         ORDER BY a.key, -a.priority, a.id LIMIT 1)
                        LIMIT 1) AS s)
                 UNION ALL
                 (SELECT n.key, n.lap, w.step + 1, n.ctid, n.p, n.id
                  FROM walk AS w,
                       LATERAL ((SELECT a.key, w.lap AS lap, a.ctid, -a.priority AS p, a.id FROM pgqueue_jobs AS a
                                 WHERE a.queue = c.queue AND a.status = 'available' AND a.key IS NOT NULL
                                   AND a.key > w.key
                                 ORDER BY a.key, -a.priority, a.id LIMIT 1)
                                UNION ALL
                                (SELECT a.key, 1, a.ctid, -a.priority, a.id FROM pgqueue_jobs AS a
                                 WHERE w.lap = 0 AND a.queue = c.queue AND a.status = 'available'
                                   AND a.key IS NOT NULL
                                 ORDER BY a.key, -a.priority, a.id LIMIT 1)
                                LIMIT 1) AS n
                  WHERE n.lap = 0 OR n.key <= c.cursor)
             )
             SELECT w.key, w.lap, w.step, j.ctid, j.p, j.id, j.w, r.key_room, r.key_used
             FROM walk AS w,
                  LATERAL (SELECT c.key_rate_limit - u.used AS key_room, u.used AS key_used,
                                  least(c.key_max_running - CASE WHEN c.key_max_running IS NOT NULL THEN
                                            (SELECT count(*) FROM pgqueue_jobs AS h
                                             WHERE h.queue = c.queue AND h.key = w.key AND h.key IS NOT NULL
                                               AND (h.status = 'running' OR (h.status = 'scheduled' AND h.attempted_at IS NOT NULL))) END,
                                        -- As for the queue's budget: jobs the weight left allows.
                                        CASE WHEN u.used = 0 THEN greatest(c.key_rate_limit, 1)
                                             ELSE c.key_rate_limit - u.used END) AS room
                           FROM (SELECT CASE WHEN c.key_rate_limit IS NOT NULL THEN
                                            (SELECT coalesce(sum(s.weight), 0) FROM pgqueue_starts AS s
                                             WHERE s.queue = c.queue AND s.key = w.key AND s.key IS NOT NULL
                                               AND pgqueue_start_holds(s, c.at - c.key_rate_period)) END AS used) AS u) AS r,
                  -- The key's head, found by the walk itself, then (with room for more) the jobs
                  -- after it in the key's order.
                  LATERAL (SELECT h.ctid, w.p, w.id, h.w
                           FROM (SELECT a.ctid, greatest(a.weight, 1) AS w FROM pgqueue_jobs AS a
                                 WHERE a.ctid = w.head AND r.room >= 1 AND a.status = 'available'
                                 FOR UPDATE SKIP LOCKED) AS h
                           UNION ALL
                           SELECT m.ctid, m.p, m.id, m.w
                           FROM (SELECT a.ctid, -a.priority AS p, a.id, greatest(a.weight, 1) AS w FROM pgqueue_jobs AS a
                                 WHERE r.room > 1 AND a.queue = c.queue AND a.key = w.key
                                   AND a.status = 'available' AND a.key IS NOT NULL
                                   AND (-a.priority, a.id) > (w.p, w.id)
                                 ORDER BY -a.priority, a.id
                                 LIMIT greatest(r.room - 1, 0)
                                 FOR UPDATE SKIP LOCKED) AS m) AS j
             LIMIT c.budget) AS k
    WHERE c.keyed AND c.budget > 0
), unkeyed AS (
    SELECT c.queue, u.ctid, NULL::text AS key, 2 AS lap, 0 AS step, u.p, u.id, u.w,
           NULL::bigint AS key_room, NULL::bigint AS key_used
    FROM claimable AS c,
         LATERAL (SELECT h.ctid, h.p, h.id, h.w
                  FROM (SELECT a.ctid, a.key, -a.priority AS p, a.id, greatest(a.weight, 1) AS w FROM pgqueue_jobs AS a
                        WHERE a.queue = c.queue AND a.status = 'available'
                        ORDER BY -a.priority, a.id
                        LIMIT c.budget
                        FOR UPDATE SKIP LOCKED) AS h
                  WHERE h.key IS NULL
                  LIMIT c.budget - (SELECT count(*) FROM keyed WHERE keyed.queue = c.queue)) AS u
    WHERE c.keyed AND c.budget > 0
), picked AS (
    SELECT * FROM plain UNION ALL SELECT * FROM keyed UNION ALL SELECT * FROM unkeyed
), fits AS (
    -- The picked jobs whose weights fit: first in what each key's rate leaves, then in what the
    -- queue's rate leaves. Queues without a rate take what they picked.
    SELECT d.queue, d.ctid, d.key, d.lap, d.step
    FROM picked AS d JOIN claimable AS c ON c.queue = d.queue
    WHERE NOT c.rated
    UNION ALL
    SELECT q.queue, q.ctid, q.key, q.lap, q.step
    FROM (SELECT k.*, sum(k.w) OVER (PARTITION BY k.queue ORDER BY k.lap, k.step, k.p, k.id) AS total
          FROM (SELECT d.*, sum(d.w) OVER (PARTITION BY d.queue, d.key ORDER BY d.p, d.id) AS key_total
                FROM picked AS d JOIN claimable AS c ON c.queue = d.queue
                WHERE c.rated) AS k
          WHERE k.key_room IS NULL OR k.key_total <= k.key_room OR (k.key_used = 0 AND k.key_total = k.w)) AS q
    JOIN claimable AS c ON c.queue = q.queue
    WHERE c.room IS NULL OR q.total <= c.room OR (c.used = 0 AND q.total = q.w)
), served AS (
    -- A queue row locked by an open transaction (PauseTx, SetLimitsTx) keeps its cursor this
    -- once rather than make the claim wait for that transaction.
    UPDATE pgqueue_queues AS p
    SET key_cursor = last.key
    FROM (SELECT DISTINCT ON (queue) queue, key FROM fits WHERE lap < 2 AND key IS NOT NULL
          ORDER BY queue, lap DESC, step DESC) AS last
    WHERE p.name = last.queue
      AND p.name IN (SELECT l.name FROM pgqueue_queues AS l WHERE l.name = last.queue FOR UPDATE SKIP LOCKED)
), claimed AS (
    UPDATE pgqueue_jobs AS j
    SET status       = 'running',
        attempt      = j.attempt + 1,
        lock_token   = (SELECT gen_random_uuid()), -- once for the statement, as in claim.sql
        lock_until   = now() + ($3::bigint[])[array_position($1::text[], j.queue)] * interval '1 millisecond',
        locked_by    = $4,
        attempted_at = (SELECT c.at FROM claimable AS c WHERE c.queue = j.queue) -- the logged start
    WHERE j.ctid = ANY (ARRAY(SELECT ctid FROM fits))
    RETURNING j.queue, j.id, j.priority, j.attempt, j.max_attempts, j.run_at, j.created_at, j.lock_token,
              j.payload, j.errors, j.unique_key, j.repeat_remaining,
              (extract(epoch FROM j.repeat_every) * 1e6)::bigint, j.metadata, j.key, j.weight, j.workflow,
              EXISTS (SELECT 1 FROM pgqueue_queues AS q WHERE q.name = j.queue AND q.watched_until > now())
                  AS watched
), logged AS (
    INSERT INTO pgqueue_starts (queue, key, started_at, weight, job_id)
    SELECT d.queue, d.key, c.at, greatest(d.weight, 1), d.id
    FROM claimed AS d JOIN claimable AS c ON c.queue = d.queue
    WHERE c.rated
), forgotten AS (
    DELETE FROM pgqueue_starts AS s
    USING claimable AS c
    WHERE c.locked AND c.rated AND s.queue = c.queue
      AND NOT pgqueue_start_holds(s, c.at - c.longest_period)
)
SELECT * FROM claimed
