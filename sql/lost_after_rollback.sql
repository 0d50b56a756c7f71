-- lost_after_rollback: of running jobs ($1 id, $2 lock_token) that their handlers completed with
-- Job.CompleteTx in transaction $3 (pg_current_xact_id() as text), returns the ids of those whose
-- transaction rolled back and whose row no longer holds the token: another attempt has the job.
-- A plain read: it does not wait for rows other transactions lock. The heartbeat asks it of jobs
-- it could not extend; the completer, after its settle statements, of jobs they did not match.
-- A transaction id this server has not given out yet (at or past its snapshot's xmax) belongs to
-- a primary that failed over before the transaction reached its standby: on this server it never
-- happened, as if rolled back (pg_xact_status would fail: "transaction ID … is in the future").
-- CASE, not OR: it keeps pg_xact_status from being called on such an id.
SELECT h.id
FROM unnest($1::uuid[], $2::uuid[], $3::text[]) AS h(id, lock_token, xact)
WHERE CASE WHEN h.xact::xid8 >= pg_snapshot_xmax(pg_current_snapshot()) THEN true
           ELSE pg_xact_status(h.xact::xid8) = 'aborted' END
  AND NOT EXISTS (SELECT FROM pgqueue_jobs AS j WHERE j.id = h.id AND j.lock_token = h.lock_token)
