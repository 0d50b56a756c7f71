-- rate_wait: sent after claim_limited.sql: of the queues $1 that have a rate limit and available
-- jobs, how many ms until their claim may find room the rate left none of: with the queue's
-- window full, until its oldest start leaves the window (exact); with a per-key rate, the average
-- gap its rate allows between a key's starts, at least 10 ms (whichever key frees first, a claim
-- then takes its turn). The claim loop looks at such a queue again after that long if its claim
-- came back short; a queue whose claim was full, or that has nothing available, waits for no
-- clock. Reads pgqueue_starts_queue_idx (at most rate_limit rows) and the claim index.
SELECT p.name,
       CASE WHEN p.rate_limit IS NOT NULL AND w.n >= p.rate_limit
            THEN greatest(1, ceil(extract(epoch FROM w.oldest + p.rate_period - clock_timestamp()) * 1000))
            ELSE greatest(10, ceil(extract(epoch FROM p.key_rate_period) * 1000 / p.key_rate_limit))
       END::bigint
FROM pgqueue_queues AS p,
     LATERAL (SELECT count(*) AS n, min(s.started_at) AS oldest FROM pgqueue_starts AS s
              WHERE s.queue = p.name AND s.started_at > clock_timestamp() - p.rate_period) AS w
WHERE p.name = ANY ($1::text[])
  AND ((p.rate_limit IS NOT NULL AND w.n >= p.rate_limit) OR p.key_rate_limit IS NOT NULL)
  AND EXISTS (SELECT 1 FROM pgqueue_jobs AS a WHERE a.queue = p.name AND a.status = 'available')
