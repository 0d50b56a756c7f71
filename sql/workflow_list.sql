-- workflow_list: up to $3 workflows with ids below $2, newest first; only those not finished when
-- $1. Reads pgqueue_workflows_unfinished_idx for those, the primary key otherwise.
SELECT w.id, w.name, w.created_at, w.finished_at, w.jobs, w.unfinished, w.metadata
FROM pgqueue_workflows AS w
WHERE (NOT $1::boolean OR w.finished_at IS NULL) AND w.id < $2
ORDER BY w.id DESC
LIMIT $3
