-- workflow_steps: the jobs of workflow $1 in id order (the order they were added), each with its
-- step name and, if it still exists, its queue, status, attempts, times, latest error and
-- result, and its dependencies ([[parent, on_failure, state], …] in parent order). Reads
-- pgqueue_workflow_jobs' primary key (workflow, job), pgqueue_jobs' primary key, and
-- pgqueue_deps_child_idx.
SELECT m.job, m.step, j.queue, j.status, j.attempt, j.max_attempts, j.run_at, j.attempted_at, j.finished_at,
       j.errors -> -1 ->> 'error', j.result,
       (SELECT json_agg(json_build_array(d.parent, d.on_failure, d.state) ORDER BY d.parent)
        FROM pgqueue_deps AS d WHERE d.child = m.job)
FROM pgqueue_workflow_jobs AS m
LEFT JOIN pgqueue_jobs AS j ON j.id = m.job
WHERE m.workflow = $1
ORDER BY m.job
