-- stats: per queue — queue $1, or, when $1 is NULL, every queue with jobs or settings — its counts
-- per status, the wait in µs of the jobs first in line (NULL if none is available), the paused
-- flag, its limits (0: none; periods in µs), with a per-key limit how many keys are at it (counted
-- over pgqueue_jobs_key_held_idx: as many rows as the queue's running and retry-waiting keyed
-- jobs), and with a rate limit how much of it the starts within its period use, their weights
-- added up (pgqueue_starts_queue_idx: at most as many rows as the limit).
--
-- The counts are pgqueue_counts plus the deltas not folded in yet (see the observability
-- migration): a few rows per queue, whatever the number of jobs. Available and running jobs are
-- counted together there (a claim moves a job between them without counting it; see the
-- count_moves migration): the running ones are counted apart, from pgqueue_jobs_running_idx (a
-- few times the queue's handlers at most), and the available ones are the rest.
--
-- The wait is the longest of the waits (now - run_at) of the jobs first in line at each
-- priority: one probe of pgqueue_jobs_claim_idx (queue, (-priority), id) INCLUDE (run_at) per
-- priority in use, found by skipping from one priority to the next (the recursive heads). Where
-- jobs become runnable in the order they were enqueued, that is the wait of the oldest available
-- job; a job made runnable after it was enqueued (delayed, retried) lines up by its id, ahead of
-- later jobs that may have waited longer. The exact min(run_at) reads every available job.
WITH RECURSIVE counted AS (
    SELECT queue,
           coalesce(sum(n) FILTER (WHERE status = 'pending'), 0)::bigint   AS pending,
           coalesce(sum(n) FILTER (WHERE status = 'scheduled'), 0)::bigint AS scheduled,
           coalesce(sum(n) FILTER (WHERE status IN ('available', 'running')), 0)::bigint AS ready,
           coalesce(sum(n) FILTER (WHERE status = 'completed'), 0)::bigint AS completed,
           coalesce(sum(n) FILTER (WHERE status = 'failed'), 0)::bigint    AS failed,
           coalesce(sum(n) FILTER (WHERE status = 'cancelled'), 0)::bigint AS cancelled
    FROM (SELECT queue, status, n FROM pgqueue_counts WHERE $1::text IS NULL OR queue = $1
          UNION ALL
          SELECT queue, status, n FROM pgqueue_count_deltas WHERE $1::text IS NULL OR queue = $1) AS u
    GROUP BY queue
), j AS (
    SELECT c.queue, c.pending, c.scheduled, c.ready - r.running AS available, r.running, c.completed, c.failed, c.cancelled
    FROM counted AS c,
         LATERAL (SELECT count(*) AS running FROM pgqueue_jobs AS x
                  WHERE x.queue = c.queue AND x.status = 'running') AS r
    WHERE c.pending + c.scheduled + c.ready + c.completed + c.failed + c.cancelled > 0
), heads (queue, p, run_at) AS (
    SELECT j.queue, h.p, h.run_at
    FROM j, LATERAL (SELECT -a.priority AS p, a.run_at FROM pgqueue_jobs AS a
                     WHERE a.queue = j.queue AND a.status = 'available'
                     ORDER BY -a.priority, a.id LIMIT 1) AS h
    WHERE j.available > 0
    UNION ALL
    SELECT heads.queue, h.p, h.run_at
    FROM heads, LATERAL (SELECT -a.priority AS p, a.run_at FROM pgqueue_jobs AS a
                         WHERE a.queue = heads.queue AND a.status = 'available' AND -a.priority > heads.p
                         ORDER BY -a.priority, a.id LIMIT 1) AS h
)
SELECT coalesce(j.queue, q.name),
       coalesce(j.scheduled, 0), coalesce(j.available, 0), coalesce(j.running, 0),
       coalesce(j.completed, 0), coalesce(j.failed, 0), coalesce(j.cancelled, 0),
       (extract(epoch FROM now() - (SELECT min(heads.run_at) FROM heads WHERE heads.queue = j.queue)) * 1e6)::bigint,
       coalesce(j.pending, 0),
       coalesce(q.paused, false), coalesce(q.max_running, 0), coalesce(q.key_max_running, 0),
       coalesce(q.rate_limit, 0), coalesce((extract(epoch FROM q.rate_period) * 1e6)::bigint, 0),
       coalesce(q.key_rate_limit, 0), coalesce((extract(epoch FROM q.key_rate_period) * 1e6)::bigint, 0),
       CASE WHEN q.key_max_running IS NOT NULL THEN
           (SELECT count(*) FROM (SELECT 1 FROM pgqueue_jobs AS h
                                  WHERE h.queue = q.name AND h.key IS NOT NULL
                                    AND (h.status = 'running' OR (h.status = 'scheduled' AND h.attempted_at IS NOT NULL))
                                  GROUP BY h.key
                                  HAVING count(*) >= q.key_max_running) AS full_keys)
       ELSE 0 END,
       CASE WHEN q.rate_limit IS NOT NULL THEN
           (SELECT coalesce(sum(s.weight), 0) FROM pgqueue_starts AS s
            WHERE s.queue = q.name AND s.started_at > clock_timestamp() - q.rate_period)
       ELSE 0 END
FROM j
FULL JOIN (SELECT name, paused, max_running, key_max_running, rate_limit, rate_period,
                  key_rate_limit, key_rate_period
           FROM pgqueue_queues WHERE $1::text IS NULL OR name = $1) AS q ON q.name = j.queue
ORDER BY 1
