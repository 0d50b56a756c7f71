-- rate_wait: sent after claim_limited.sql: of the queues $1 that have a rate limit and available
-- jobs, how many ms until their claim may find room the rate left none of: with the queue's
-- window too full for its next job (the weights of the starts that hold a place in it and of that
-- job adding up to more than rate_limit), until the oldest of those starts leaves the window, a
-- period after its handler was reported started (exact for jobs of weight 1; a heavier job may
-- need more to leave, and the claim then waits again), or 5 ms if none was reported yet (the
-- report comes within a few ms); with a per-key rate, the average gap its rate allows between a
-- key's starts, at least 10 ms (whichever key frees first, a claim then takes its turn). The
-- claim loop looks at such a queue again after that long if its claim came back short; a queue
-- whose claim was full, or that has nothing available, waits for no clock. Reads
-- pgqueue_starts_queue_idx (about rate_limit rows) and the claim index.
SELECT p.name,
       CASE WHEN p.rate_limit IS NOT NULL AND w.used > 0 AND w.used + a.weight > p.rate_limit
            THEN coalesce(greatest(1, ceil(extract(epoch FROM w.oldest + p.rate_period - clock_timestamp()) * 1000)), 5)
            ELSE greatest(10, ceil(extract(epoch FROM p.key_rate_period) * 1000 / p.key_rate_limit))
       END::bigint
FROM pgqueue_queues AS p,
     LATERAL (SELECT coalesce(sum(s.weight), 0) AS used,
                     min(greatest(s.started_at, s.recorded_at)) FILTER (WHERE s.job_id IS NULL OR s.recorded_at IS NOT NULL)
                         AS oldest
              FROM pgqueue_starts AS s
              WHERE s.queue = p.name AND pgqueue_start_holds(s, clock_timestamp() - p.rate_period)) AS w,
     LATERAL (SELECT greatest(j.weight, 1) AS weight FROM pgqueue_jobs AS j
              WHERE j.queue = p.name AND j.status = 'available'
              ORDER BY -j.priority, j.id LIMIT 1) AS a
WHERE p.name = ANY ($1::text[])
  AND ((p.rate_limit IS NOT NULL AND w.used > 0 AND w.used + a.weight > p.rate_limit) OR p.key_rate_limit IS NOT NULL)
