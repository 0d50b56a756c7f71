-- complete: deletes the succeeded jobs ($1 id, $2 lock_token) that are still held under their
-- token; returns the ids it deleted. A job missing from the result had lost its lock, and its
-- newer attempt stays untouched, or its row is locked by another transaction: the statement
-- skips such a row rather than wait for it (settle_skipped.sql tells the two apart). For jobs
-- that do not repeat and are no step of a workflow, when retention keeps no completed jobs: the
-- hot path. Reads the primary key.
-- It sets pgqueue.completing for the rest of the transaction: should a job another job depends
-- on be among these, the trigger that records its end reads it as completed, not deleted (see
-- migration 20261212120000), once per statement: an uncorrelated sub-select, an InitPlan. (As a
-- condition of each row it cost this statement 4.5 % of its rate.)
DELETE FROM pgqueue_jobs AS j
WHERE j.ctid = ANY (ARRAY(
          SELECT p.ctid
          FROM pgqueue_jobs AS p
          JOIN unnest($1::uuid[], $2::uuid[]) AS c(id, lock_token) ON p.id = c.id AND p.lock_token = c.lock_token
          WHERE (SELECT set_config('pgqueue.completing', 'on', true)) = 'on'
          FOR UPDATE OF p SKIP LOCKED))
RETURNING j.id
