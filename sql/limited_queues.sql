-- limited_queues: which of the queues $1 have limits, so that their claims go through
-- claim_lock.sql and claim_limited.sql. Reads pgqueue_queues' primary key.
SELECT name FROM pgqueue_queues
WHERE name = ANY ($1::text[]) AND limited
