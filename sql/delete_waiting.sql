-- delete_waiting: deletes, in one statement, every job of queue $1 that is waiting (scheduled or
-- available); running and finished jobs stay. Rows a claim has locked are skipped once it commits
-- (they are running by then). Returns how many it deleted. Reads pgqueue_jobs_claim_idx and
-- pgqueue_jobs_scheduled_idx.
WITH deleted AS (
    DELETE FROM pgqueue_jobs WHERE queue = $1 AND status IN ('scheduled', 'available') RETURNING 1
), counted AS (
    SELECT count(*) AS n FROM deleted
), notified AS (
    SELECT pgqueue_notify('d ' || $1) FROM counted WHERE n > 0
)
SELECT counted.n, (SELECT count(*) FROM notified) FROM counted
