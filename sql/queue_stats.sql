-- queue_stats: counts of queue $1's jobs per status, how long its oldest available job has waited
-- (by the database clock; NULL if none) and whether it is paused. Each live status is counted
-- over its partial index (index-only where the visibility map allows); finished ones over
-- pgqueue_jobs_finished_idx.
SELECT (SELECT count(*) FROM pgqueue_jobs WHERE queue = $1 AND status = 'scheduled'),
       a.n,
       (SELECT count(*) FROM pgqueue_jobs WHERE queue = $1 AND status = 'running'),
       (SELECT count(*) FROM pgqueue_jobs WHERE queue = $1 AND status = 'completed'),
       (SELECT count(*) FROM pgqueue_jobs WHERE queue = $1 AND status = 'failed'),
       (SELECT count(*) FROM pgqueue_jobs WHERE queue = $1 AND status = 'cancelled'),
       (extract(epoch FROM now() - a.oldest) * 1e6)::bigint,
       coalesce((SELECT paused FROM pgqueue_queues WHERE name = $1), false)
FROM (SELECT count(*) AS n, min(run_at) AS oldest
      FROM pgqueue_jobs WHERE queue = $1 AND status = 'available') AS a
