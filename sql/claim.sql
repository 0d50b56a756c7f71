-- claim: leases available jobs of several queues in one statement: of each queue $1[i], up to
-- $2[i] jobs, highest priority first, then oldest id, for $3[i] ms, to worker $4, of which the
-- first $5[i] start at once and the rest are claimed ahead of a free slot, scanning its line
-- from the place ($6[i] priority, $7[i] id) of its claim floor on (floor.go). Each claimed job gets
-- one more attempt (taken back if it goes back unstarted: requeue.sql, rescue.sql) and its start
-- time in attempted_at, but a job claimed ahead gets NULL there, which says it has not started
-- (the worker records its start later: record_starts.sql), unless a hold of it ahead was lost
-- before (ahead_lost: see migration 20261209120000). Each also gets the statement's fresh lock
-- token: one for all the jobs it claims
-- (an InitPlan, evaluated once), since each fence matches on (id, lock_token) and gen_random_uuid
-- costs 3-4 us a call, 0.3-0.4 ms a claim of 100. A paused queue yields nothing. Each row also
-- names its queue and says whether the queue is being watched, so that the worker announces the
-- jobs' starts and outcomes.
-- A queue with only a MaxRunning is claimed here too, after claim_lock.sql in the same
-- transaction, once its running jobs are counted (pgqueue_jobs_running_idx):
--   * if this transaction holds its claim lock exclusively, at most what max_running leaves.
--     When that is fewer than asked for, pgqueue_capped_take decides instead: it marks the
--     queue's claims held back, so that the ends of its jobs wake its workers, and counts again
--     (migration 20261206120000). The queues come in name order, the order in which it takes
--     their held locks;
--   * if it holds the lock shared, with a ticket, at most max_running / pgqueue.claim_tickets
--     (the number of tickets) less the running jobs, and none ahead of a free slot while a claim
--     of the queue is held back by the limit (pgqueue_claims_held): a job waiting here for a slot
--     would keep that claim's place. At most that many such claims run at once, none sees the
--     others' jobs, and each takes no more than a ticket's share would leave if the others took
--     theirs: the running jobs never pass max_running. A claim that gets fewer than it asked for
--     comes back at once for the exclusive lock, which counts exactly (claimer.go);
--   * otherwise nothing (so a claim that has not heard of a new limit cannot pass it).
-- A queue with per-key limits or rates yields nothing here: claim_limited.sql claims for it (and
-- counts the running jobs in the same way).
-- Each queue's jobs are picked by a range scan of its own part of pgqueue_jobs_claim_idx
-- (queue, (-priority), id) WHERE status = 'available' (a LATERAL sub-select per queue), which
-- begins at the floor (the row comparison is a bound of the scan: the entries of jobs claimed
-- before it, which a held MVCC horizon keeps in the index, are not read), and locked there,
-- skipping rows others hold; the update then reaches them by their physical address
-- (ctid), which the row locks keep stable for the statement: no second lookup through the
-- primary key. One statement for all queues costs little more than one for a single queue; a
-- batch of one statement per queue cost 2.5 times as much at 20 queues.
-- The claim commits without waiting for its WAL to reach the disk (synchronous_commit off for
-- this transaction only, set where the queues are read). Nothing acknowledged depends on it: a
-- claim lost in a server crash puts its jobs back as they were, as a lost lease would, and every
-- settle, heartbeat or CompleteTx that follows commits synchronously and so flushes the WAL up
-- to and past the claim first.
WITH picked AS MATERIALIZED (
    SELECT c.ctid, c.rn > x.m AS ahead
    FROM (SELECT * FROM unnest($1::text[], $2::int[], $5::int[], $6::int[], $7::uuid[]) AS u(queue, n, m, from_priority, from_id)
          WHERE set_config('synchronous_commit', 'off', true) = 'off') AS x,
         LATERAL (SELECT coalesce((SELECT CASE
                      WHEN p.paused OR p.claim_limited THEN 0
                      WHEN NOT p.limited THEN x.n
                      ELSE (SELECT CASE WHEN l.mode IS NULL THEN 0
                                        WHEN l.mode = 'shared'
                                        THEN greatest(0, least(CASE WHEN EXISTS (SELECT FROM pgqueue_claims_held AS h WHERE h.queue = x.queue)
                                                                    THEN x.m ELSE x.n END,
                                                               p.max_running
                                                               / current_setting('pgqueue.claim_tickets')::int - r.n))
                                        WHEN p.max_running - r.n >= x.n THEN x.n
                                        ELSE pgqueue_capped_take(x.queue, x.n) END
                            FROM (SELECT CASE WHEN x.queue = ANY (coalesce(nullif(current_setting('pgqueue.claim_locked', true), ''),
                                                                            '{}')::text[]) THEN 'exclusive'
                                              WHEN x.queue = ANY (coalesce(nullif(current_setting('pgqueue.claim_shared', true), ''),
                                                                            '{}')::text[]) THEN 'shared' END AS mode) AS l,
                                 -- not counted without the lock (the one-time filter on l.mode)
                                 LATERAL (SELECT count(*) AS n FROM pgqueue_jobs AS r
                                          WHERE l.mode IS NOT NULL AND r.queue = x.queue AND r.status = 'running') AS r)
                      END
                    FROM pgqueue_queues AS p WHERE p.name = x.queue), x.n) AS n) AS b,
         LATERAL (SELECT a.ctid, row_number() OVER (ORDER BY a.p, a.id) AS rn
                  FROM (SELECT a.ctid, -a.priority AS p, a.id
                        FROM pgqueue_jobs AS a
                        WHERE a.queue = x.queue AND a.status = 'available'
                          AND (-a.priority, a.id) >= (-x.from_priority, x.from_id)
                        ORDER BY -a.priority, a.id
                        LIMIT b.n
                        FOR UPDATE SKIP LOCKED) AS a) AS c
)
UPDATE pgqueue_jobs AS j
SET status       = 'running',
    attempt      = j.attempt + 1,
    lock_token   = (SELECT gen_random_uuid()),
    lock_until   = now() + ($3::bigint[])[array_position($1::text[], j.queue)] * interval '1 millisecond',
    locked_by    = $4,
    attempted_at = CASE WHEN NOT j.ahead_lost AND j.ctid = ANY (ARRAY(SELECT ctid FROM picked WHERE ahead))
                        THEN NULL ELSE now() END
WHERE j.ctid = ANY (ARRAY(SELECT ctid FROM picked))
RETURNING j.queue, j.id, j.priority, j.attempt, j.max_attempts, j.run_at, j.created_at, j.lock_token,
          j.payload, j.errors, j.unique_key, j.repeat_remaining,
          (extract(epoch FROM j.repeat_every) * 1e6)::bigint, j.metadata, j.key, j.weight, j.workflow,
          EXISTS (SELECT 1 FROM pgqueue_queues AS q WHERE q.name = j.queue AND q.watched_until > now())
