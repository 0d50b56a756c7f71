-- record_rate_starts: records that the handlers of the jobs $1, of queues with a rate limit, have
-- started: from now on their starts, logged by claim_limited.sql, hold their places in the rate's
-- windows for the period (pgqueue_start_holds). A start logged for an attempt whose handler did
-- not start (a job handed back unstarted) is recorded as well, so holds its place as a start.
-- Reads pgqueue_starts_pending_idx: the starts not recorded yet.
UPDATE pgqueue_starts
SET recorded_at = now()
WHERE job_id = ANY ($1::uuid[]) AND recorded_at IS NULL
