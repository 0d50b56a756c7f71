-- claim_lock: the statement before claim_limited.sql in a claim round trip that includes limited
-- queues: of the queues $1, those with limits whose claim lock this transaction takes, without
-- waiting, are returned, and recorded in the transaction's setting pgqueue.claim_locked, which
-- claim_limited.sql reads.
--
-- The claim lock is a transaction-level advisory lock keyed by a hash of the schema's and the
-- queue's names (two queues that share a hash only share turns). It lets one claimer at a time
-- count a limited queue's running jobs and start more, so that two claimers cannot both take the
-- last free place. It is held for the claim's own transaction, a few milliseconds, and never
-- waited for: a claimer that finds it taken leaves that queue for a moment (fetch.go, claimSoon).
-- It is taken by a statement of its own, before the claim's: a statement sees the rows committed
-- before it started, and only a claim that starts after the lock is granted sees every earlier
-- claim of the queue.
--
-- It also turns JIT compilation off for the rest of the transaction: the planner's estimate of
-- claim_limited.sql's walk over keys (paid only when it runs, and lazily) can pass
-- jit_above_cost, and compiling the statement then cost ~40 ms on every claim.
WITH locked AS (
    SELECT q.name
    FROM pgqueue_queues AS q
    WHERE q.name = ANY ($1::text[])
      AND CASE WHEN q.limited
               THEN pg_try_advisory_xact_lock(hashtextextended('pgqueue claim ' || current_schema() || '.' || q.name, 0))
               ELSE false END
)
SELECT set_config('pgqueue.claim_locked', coalesce((SELECT array_agg(name) FROM locked)::text, '{}'), true),
       coalesce((SELECT array_agg(name) FROM locked), '{}'),
       set_config('jit', 'off', true)
