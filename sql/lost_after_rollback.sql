-- lost_after_rollback: of running jobs ($1 id, $2 lock_token) that their handlers completed with
-- Job.CompleteTx in transaction $3 (pg_current_xact_id() as text), returns the ids of those whose
-- transaction rolled back and whose row no longer holds the token: another attempt has the job.
-- A plain read: it does not wait for rows other transactions lock. The heartbeat asks it of jobs
-- it could not extend; the completer, after its settle statements, of jobs they did not match.
SELECT h.id
FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS h(id, lock_token, xact)
WHERE pg_xact_status(h.xact::xid8) = 'aborted'
  AND NOT EXISTS (SELECT FROM pgqueue_jobs AS j WHERE j.id = h.id AND j.lock_token = h.lock_token)
