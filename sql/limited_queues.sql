-- limited_queues: which of the queues $1 have limits, so that their claims take the claim lock
-- (claim_lock.sql); whether those claims go through claim_limited.sql (per-key limits, rates);
-- and whether they have a rate limit, so that rate_wait.sql follows. Reads pgqueue_queues'
-- primary key.
SELECT name, claim_limited, rate_limit IS NOT NULL OR key_rate_limit IS NOT NULL FROM pgqueue_queues
WHERE name = ANY ($1::text[]) AND limited
