-- hold_row: locks the row of job $1 if it is still held under lock token $2, waiting for a
-- transaction that locks it (a heartbeat, for a moment). Job.CompleteTx sends it before
-- complete_repeat.sql, which skips rows other transactions lock. Reads the primary key.
SELECT FROM pgqueue_jobs WHERE id = $1 AND lock_token = $2 FOR UPDATE
