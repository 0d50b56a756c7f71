-- next_queue: the first queue after $1, in name order, that has a job whose status is one of $2;
-- NULL if none. A loose index scan: one probe, a few index entries long, into the index of each
-- wanted status (the claim, scheduled and running indexes; pgqueue_jobs_finished_idx, where the
-- probe steps over the queue's other finished statuses, and pgqueue_history_finished_idx of each
-- of the history's partitions, where finished jobs move: migration 20261214120000; its
-- partitions' ranges merged in queue order). Pending jobs are in no index: their
-- queues are found from their counts (pgqueue_counts plus the deltas not folded in yet, as
-- stats.sql sums them: a few rows per queue).
SELECT least(
    (SELECT min(queue) FROM pgqueue_jobs
     WHERE queue > $1 AND status = 'running' AND 'running' = ANY ($2::text[])),
    (SELECT min(queue) FROM pgqueue_jobs
     WHERE queue > $1 AND status = 'available' AND 'available' = ANY ($2::text[])),
    (SELECT min(queue) FROM pgqueue_jobs
     WHERE queue > $1 AND status = 'scheduled' AND 'scheduled' = ANY ($2::text[])),
    (SELECT min(queue) FROM pgqueue_jobs
     WHERE queue > $1 AND status IN ('completed', 'failed', 'cancelled') AND status = ANY ($2::text[])),
    (SELECT min(queue) FROM pgqueue_history
     WHERE queue > $1 AND status IN ('completed', 'failed', 'cancelled') AND status = ANY ($2::text[])),
    (SELECT min(p.queue)
     FROM (SELECT c.queue
           FROM (SELECT queue, n FROM pgqueue_counts WHERE queue > $1 AND status = 'pending'
                 UNION ALL
                 SELECT queue, n FROM pgqueue_count_deltas WHERE queue > $1 AND status = 'pending') AS c
           WHERE 'pending' = ANY ($2::text[])
           GROUP BY c.queue
           HAVING sum(c.n) > 0) AS p))
