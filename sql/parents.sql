-- parents: the jobs job $1 depends on, in id order, each with its step name (if it is a step of a
-- workflow), its status and result (NULL once its row is deleted), and the edge's policy and
-- state. Reads pgqueue_deps_child_idx, and the primary keys of pgqueue_jobs and
-- pgqueue_workflow_jobs.
SELECT d.parent, m.step, p.status, p.result, d.on_failure, d.state
FROM pgqueue_deps AS d
LEFT JOIN pgqueue_jobs AS p ON p.id = d.parent
LEFT JOIN pgqueue_workflow_jobs AS m ON m.workflow = p.workflow AND m.job = d.parent
WHERE d.child = $1
ORDER BY d.parent
