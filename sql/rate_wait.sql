-- rate_wait: sent after claim_limited.sql: of the queues $1 that have a rate limit and available
-- jobs, how many ms until their claim may find room the rate left none of: with the queue's
-- window (its period and claim_limited.sql's margin, $2 ms) too full for its next job (the
-- weights of its starts and of that job adding up to more than rate_limit), until its oldest
-- start leaves the window (exact for jobs of weight 1; a heavier job may need more to leave, and
-- the claim then waits again); with a per-key rate, the average gap its rate allows between a
-- key's starts, at least 10 ms (whichever key frees first, a claim then takes its turn). The
-- claim loop looks at such a queue again after that long if its claim came back short; a queue
-- whose claim was full, or that has nothing available, waits for no clock. Reads
-- pgqueue_starts_queue_idx (at most rate_limit rows) and the claim index.
SELECT p.name,
       CASE WHEN p.rate_limit IS NOT NULL AND w.used > 0 AND w.used + a.weight > p.rate_limit
            THEN greatest(1, ceil(extract(epoch FROM w.oldest + p.rate_period + m.margin - clock_timestamp()) * 1000))
            ELSE greatest(10, ceil(extract(epoch FROM p.key_rate_period + m.margin) * 1000 / p.key_rate_limit))
       END::bigint
FROM (SELECT $2::bigint * interval '1 millisecond' AS margin) AS m,
     pgqueue_queues AS p,
     LATERAL (SELECT coalesce(sum(s.weight), 0) AS used, min(s.started_at) AS oldest
              FROM pgqueue_starts AS s
              WHERE s.queue = p.name AND s.started_at > clock_timestamp() - p.rate_period - m.margin) AS w,
     LATERAL (SELECT greatest(j.weight, 1) AS weight FROM pgqueue_jobs AS j
              WHERE j.queue = p.name AND j.status = 'available'
              ORDER BY -j.priority, j.id LIMIT 1) AS a
WHERE p.name = ANY ($1::text[])
  AND ((p.rate_limit IS NOT NULL AND w.used > 0 AND w.used + a.weight > p.rate_limit) OR p.key_rate_limit IS NOT NULL)
