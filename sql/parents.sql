-- parents: the jobs job $1 depends on, in id order, each with its step name (if it is a step of a
-- workflow), its status and result (NULL once its row is deleted), and the edge's policy and
-- state. A parent is read from pgqueue_jobs, or, if it is not there, from the history (migration
-- 20261214120000), where finished jobs move: pgqueue_history_job, which reads
-- pgqueue_history_id_idx of the partitions from the id's time on, only for the parents
-- pgqueue_jobs has not (the One-Time Filter, a second probe of its key). Reads
-- pgqueue_deps_child_idx, and the primary keys of pgqueue_jobs and pgqueue_workflow_jobs.
SELECT d.parent, m.step, p.status, p.result, d.on_failure, d.state
FROM pgqueue_deps AS d
LEFT JOIN LATERAL (SELECT j.status, j.result, j.workflow FROM pgqueue_jobs AS j WHERE j.id = d.parent
                   UNION ALL
                   SELECT h.status, h.result, h.workflow FROM pgqueue_history_job(d.parent) AS h
                   WHERE NOT EXISTS (SELECT FROM pgqueue_jobs AS j WHERE j.id = d.parent)) AS p ON true
LEFT JOIN pgqueue_workflow_jobs AS m ON m.workflow = p.workflow AND m.job = d.parent
WHERE d.child = $1
ORDER BY d.parent
