-- prune_workflows: deletes up to $1 finished workflows none of whose jobs is left (retention has
-- deleted them), with their lists of jobs and the edges that lead to those jobs; and up to $1
-- edges whose child no longer exists (a job enqueued alone with dependencies, pgqueue_add_job,
-- deleted since). Skips rows another process holds. Returns how many workflows and how many
-- edges it deleted. Reads pgqueue_workflows whole for the finished ones (one probe of
-- pgqueue_workflow_jobs' primary key and pgqueue_jobs' each, which stops at the first job left),
-- and pgqueue_deps whole for the orphans (one probe of pgqueue_jobs' primary key per edge): it
-- runs once a minute, not on any job's path.
WITH gone AS (
    DELETE FROM pgqueue_workflows AS w
    WHERE w.id = ANY (ARRAY(
              SELECT f.id FROM pgqueue_workflows AS f
              WHERE f.finished_at IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM pgqueue_workflow_jobs AS m JOIN pgqueue_jobs AS j ON j.id = m.job
                                WHERE m.workflow = f.id)
              LIMIT $1 FOR UPDATE SKIP LOCKED))
    RETURNING w.id
), members AS (
    DELETE FROM pgqueue_workflow_jobs AS m WHERE m.workflow = ANY (ARRAY(SELECT id FROM gone)) RETURNING m.job
), edges AS (
    DELETE FROM pgqueue_deps AS d WHERE d.child = ANY (ARRAY(SELECT job FROM members)) RETURNING 1
), orphans AS (
    DELETE FROM pgqueue_deps AS d
    WHERE d.ctid = ANY (ARRAY(
              SELECT o.ctid FROM pgqueue_deps AS o
              WHERE NOT EXISTS (SELECT 1 FROM pgqueue_jobs AS j WHERE j.id = o.child)
              LIMIT $1 FOR UPDATE SKIP LOCKED))
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM edges) + (SELECT count(*) FROM orphans)
