-- settle_skipped: of jobs a settle did not settle ($1 id, $2 lock_token), those still held under
-- their token: the settle statements skip a row another transaction locks (an application's
-- CancelTx or Update left open, a handler's Job.CompleteTx transaction not yet ended, a
-- heartbeat), and these are such rows, read as last committed, for the completer to settle again
-- later; the others had lost their locks. Sent in the settle's batch for the jobs completed with
-- Job.CompleteTx (before lost_after_rollback.sql), after it for the others it did not settle.
-- Reads the primary key.
SELECT j.id
FROM pgqueue_jobs AS j
JOIN unnest($1::uuid[], $2::uuid[]) AS h(id, lock_token) ON j.id = h.id AND j.lock_token = h.lock_token
