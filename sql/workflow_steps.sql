-- workflow_steps: the jobs of workflow $1 in id order (the order they were added), each with its
-- step name and, if it still exists, its queue, status, attempts, times, latest error and
-- result, and its dependencies ([[parent, on_failure, state], …] in parent order). Reads
-- pgqueue_workflow_jobs' primary key (workflow, job), pgqueue_jobs' primary key, and
-- pgqueue_deps_child_idx. A job not in pgqueue_jobs is looked up in the history (migration
-- 20261214120000), where the jobs of a finished workflow move: pgqueue_history_job, which reads
-- pgqueue_history_id_idx of the partitions from the id's time on, only for those jobs (the
-- One-Time Filter, a second probe of pgqueue_jobs' key).
SELECT m.job, m.step, j.queue, j.status, j.attempt, j.max_attempts, j.run_at, j.attempted_at, j.finished_at,
       j.errors -> -1 ->> 'error', j.result,
       (SELECT json_agg(json_build_array(d.parent, d.on_failure, d.state) ORDER BY d.parent)
        FROM pgqueue_deps AS d WHERE d.child = m.job)
FROM pgqueue_workflow_jobs AS m
LEFT JOIN LATERAL (SELECT x.queue, x.status, x.attempt, x.max_attempts, x.run_at, x.attempted_at, x.finished_at,
                          x.errors, x.result
                   FROM pgqueue_jobs AS x WHERE x.id = m.job
                   UNION ALL
                   SELECT h.queue, h.status, h.attempt, h.max_attempts, h.run_at, h.attempted_at, h.finished_at,
                          h.errors, h.result
                   FROM pgqueue_history_job(m.job) AS h
                   WHERE NOT EXISTS (SELECT FROM pgqueue_jobs AS x WHERE x.id = m.job)) AS j ON true
WHERE m.workflow = $1
ORDER BY m.job
