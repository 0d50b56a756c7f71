-- workflow_finished: whether workflow $1 has finished; no row if there is no such workflow.
-- Reads pgqueue_workflows' primary key.
SELECT finished_at IS NOT NULL FROM pgqueue_workflows WHERE id = $1
