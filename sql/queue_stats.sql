-- queue_stats: counts of queue $1's jobs per status, how long its oldest available job has waited
-- (by the database clock; NULL if none) and whether it is paused. The counts are pgqueue_counts
-- plus the deltas not folded in yet (see the observability migration), so they cost the same at
-- 10⁷ jobs as at 10³; the oldest wait is the first entry of pgqueue_jobs_available_idx.
SELECT coalesce(sum(n) FILTER (WHERE status = 'scheduled'), 0)::bigint,
       coalesce(sum(n) FILTER (WHERE status = 'available'), 0)::bigint,
       coalesce(sum(n) FILTER (WHERE status = 'running'), 0)::bigint,
       coalesce(sum(n) FILTER (WHERE status = 'completed'), 0)::bigint,
       coalesce(sum(n) FILTER (WHERE status = 'failed'), 0)::bigint,
       coalesce(sum(n) FILTER (WHERE status = 'cancelled'), 0)::bigint,
       (extract(epoch FROM now() - (SELECT min(run_at) FROM pgqueue_jobs
                                    WHERE queue = $1 AND status = 'available')) * 1e6)::bigint,
       coalesce((SELECT paused FROM pgqueue_queues WHERE name = $1), false)
FROM (SELECT status, n FROM pgqueue_counts WHERE queue = $1
      UNION ALL
      SELECT status, n FROM pgqueue_count_deltas WHERE queue = $1) AS c
