-- client_stats: per queue (every queue with jobs or settings): counts per status, age of the
-- oldest available job in µs and the paused flag. The counts are pgqueue_counts plus the deltas
-- not folded in yet, as in queue_stats; the oldest wait is one probe of
-- pgqueue_jobs_available_idx per queue.
WITH c AS (
    SELECT queue,
           coalesce(sum(n) FILTER (WHERE status = 'scheduled'), 0)::bigint AS scheduled,
           coalesce(sum(n) FILTER (WHERE status = 'available'), 0)::bigint AS available,
           coalesce(sum(n) FILTER (WHERE status = 'running'), 0)::bigint   AS running,
           coalesce(sum(n) FILTER (WHERE status = 'completed'), 0)::bigint AS completed,
           coalesce(sum(n) FILTER (WHERE status = 'failed'), 0)::bigint    AS failed,
           coalesce(sum(n) FILTER (WHERE status = 'cancelled'), 0)::bigint AS cancelled
    FROM (SELECT queue, status, n FROM pgqueue_counts
          UNION ALL
          SELECT queue, status, n FROM pgqueue_count_deltas) AS u
    GROUP BY queue
), j AS (
    SELECT * FROM c WHERE scheduled + available + running + completed + failed + cancelled > 0
)
SELECT coalesce(j.queue, q.name),
       coalesce(j.scheduled, 0), coalesce(j.available, 0), coalesce(j.running, 0),
       coalesce(j.completed, 0), coalesce(j.failed, 0), coalesce(j.cancelled, 0),
       (extract(epoch FROM now() - (SELECT min(a.run_at) FROM pgqueue_jobs AS a
                                    WHERE a.queue = j.queue AND a.status = 'available')) * 1e6)::bigint,
       coalesce(q.paused, false)
FROM j
FULL JOIN pgqueue_queues AS q ON q.name = j.queue
ORDER BY 1
