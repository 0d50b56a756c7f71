-- client_stats: per queue (every queue with jobs or settings): counts per status, age of the
-- oldest available job in µs and the paused flag; one sequential pass over the table.
SELECT coalesce(j.queue, q.name),
       coalesce(j.scheduled, 0), coalesce(j.available, 0), coalesce(j.running, 0),
       coalesce(j.completed, 0), coalesce(j.failed, 0), coalesce(j.cancelled, 0),
       (extract(epoch FROM now() - j.oldest) * 1e6)::bigint,
       coalesce(q.paused, false)
FROM (SELECT queue,
             count(*) FILTER (WHERE status = 'scheduled') AS scheduled,
             count(*) FILTER (WHERE status = 'available') AS available,
             count(*) FILTER (WHERE status = 'running')   AS running,
             count(*) FILTER (WHERE status = 'completed') AS completed,
             count(*) FILTER (WHERE status = 'failed')    AS failed,
             count(*) FILTER (WHERE status = 'cancelled') AS cancelled,
             min(run_at) FILTER (WHERE status = 'available') AS oldest
      FROM pgqueue_jobs
      GROUP BY queue) AS j
FULL JOIN pgqueue_queues AS q ON q.name = j.queue
ORDER BY 1
