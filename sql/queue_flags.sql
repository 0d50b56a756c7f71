-- queue_flags: of the queues $1, those that have limits, are being watched or are paused. For
-- limits: whether their claims take the claim lock (claim_lock.sql), whether those claims go
-- through claim_limited.sql (per-key limits, rates), and whether they have a rate limit, so that
-- rate_wait.sql follows. For a watch: for how many more ms it is recorded (watch.sql; null or not
-- above 0 when no watch is open), so that a worker that missed the watch's notification still
-- announces the outcomes of jobs it claimed before it. And whether it is paused, so that a worker
-- that missed the pause's notification starts none of its jobs. Reads pgqueue_queues' primary key.
SELECT name, limited, claim_limited, rate_limit IS NOT NULL OR key_rate_limit IS NOT NULL,
       ceil(extract(epoch FROM watched_until - now()) * 1000)::bigint, paused
FROM pgqueue_queues
WHERE name = ANY ($1::text[]) AND (limited OR watched_until > now() OR paused)
