-- claim_lock: the statement before claim_limited.sql in a claim round trip that includes limited
-- queues (after claim_settings.sql): of the queues $1 (those the runtime found to have limits), those whose claim lock this
-- transaction takes, without waiting, are returned, and recorded in the transaction's setting
-- pgqueue.claim_locked, which claim_limited.sql reads. It reads no table.
--
-- The claim lock is a transaction-level advisory lock keyed by a hash of the schema's and the
-- queue's names (two queues that share a hash only share turns). It lets one claimer at a time
-- count a limited queue's running jobs and start more, so that two claimers cannot both take the
-- last free place. It is held for the claim's own transaction, a few milliseconds, and never
-- waited for: a claimer that finds it taken leaves that queue for a moment (fetch.go, claimSoon).
-- It is taken by a statement of its own, before the claim's: a statement sees the rows committed
-- before it started, and only a claim that starts after the lock is granted sees every earlier
-- claim of the queue.
SELECT set_config('pgqueue.claim_locked', l.names::text, true), l.names
FROM (SELECT coalesce(array_agg(q), '{}') AS names
      FROM unnest($1::text[]) AS q
      WHERE pg_try_advisory_xact_lock(hashtextextended('pgqueue claim ' || current_schema() || '.' || q, 0))) AS l
