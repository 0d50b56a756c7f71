-- claim_lock: the statement before claim.sql and claim_limited.sql in a claim round trip that
-- includes limited queues (after claim_settings.sql). It takes, without waiting, the claim lock of
-- each queue of $1 exclusively, and of each queue of $2 shared together with one of its $3
-- tickets; returns the queues of each kind it got, and records them, and $3, in the
-- transaction's settings pgqueue.claim_locked, pgqueue.claim_shared and pgqueue.claim_tickets,
-- which claim.sql and claim_limited.sql read. It reads no table.
--
-- The claim lock is a transaction-level advisory lock keyed by a hash of the schema's and the
-- queue's names (two queues that share a hash only share turns). It is held for the claim's own
-- transaction, a few milliseconds, and never waited for: a claimer that does not get it leaves
-- that queue for a moment (claimer.go, lockedOutWait). It is taken by a statement of its own,
-- before the claim's: a statement sees the rows committed before it started, and only a claim
-- that starts after the lock is granted sees every earlier claim of the queue.
--
-- Held exclusively (queues with per-key limits or rates, and a MaxRunning-only queue near its
-- limit), it lets one claimer at a time count the queue's running jobs and start more, so that
-- two claimers cannot both take its last free place. Held shared (a MaxRunning-only queue far
-- from its limit), claimers of the queue run side by side, at most one per ticket (an
-- exclusive advisory lock of its own, tried from a random one on), and each takes no more than
-- a ticket's share of the limit leaves (claim.sql): however their claims interleave, the running
-- jobs stay within the limit. An exclusive claimer waits for no shared one: it finds the lock
-- taken and comes back.
SELECT set_config('pgqueue.claim_locked', g.locked::text, true), g.locked,
       set_config('pgqueue.claim_shared', g.shared::text, true), g.shared,
       set_config('pgqueue.claim_tickets', $3::int::text, true)
FROM (SELECT coalesce(array_agg(w.q) FILTER (WHERE w.exclusive), '{}') AS locked,
             coalesce(array_agg(w.q) FILTER (WHERE NOT w.exclusive), '{}') AS shared
      FROM (SELECT q, true AS exclusive FROM unnest($1::text[]) AS q
            UNION ALL
            SELECT q, false FROM unnest($2::text[]) AS q) AS w,
           LATERAL (SELECT hashtextextended('pgqueue claim ' || current_schema() || '.' || w.q, 0) AS key) AS k
      WHERE CASE WHEN w.exclusive THEN pg_try_advisory_xact_lock(k.key)
                 WHEN pg_try_advisory_xact_lock_shared(k.key)
                 THEN EXISTS (SELECT FROM (SELECT floor(random() * $3::int)::int AS first) AS r,
                                          generate_series(0, $3::int - 1) AS i
                              WHERE pg_try_advisory_xact_lock(hashtextextended(
                                        'pgqueue ticket ' || ((r.first + i) % $3::int) || ' ' || current_schema() || '.' || w.q, 0)))
                 ELSE false END) AS g
