-- prune_workflows: deletes up to $1 finished workflows none of whose jobs is left (retention has
-- deleted them), neither in pgqueue_jobs nor in the history (migration 20261214120000), with
-- their lists of jobs and the edges that lead to those jobs; and up to $1 edges whose child no
-- longer exists in either (a job enqueued alone with dependencies, pgqueue_add_job, deleted
-- since). Skips rows another process holds. Returns how many workflows and how many edges it
-- deleted. Reads pgqueue_workflows whole for the finished ones and pgqueue_deps whole for the
-- orphans: it runs once a minute, not on any job's path. Each is asked whether a job is left by
-- one sub-plan, the two tables' parts of a UNION ALL in that order, which stops at the first job
-- found: a workflow costs a probe of pgqueue_workflow_jobs' primary key and of pgqueue_jobs' per
-- job up to the first one left there, then, only if none is, a look-up in the history per job
-- (pgqueue_history_job: pgqueue_history_id_idx of the partitions from the id's time on) up to the
-- first one found there; an edge, a probe of pgqueue_jobs' primary key, then, only if its child
-- is not there, a look-up in the history. (As an anti-join, each NOT EXISTS could be planned as
-- a hash of every job listed, and the history looked up for each; a set operation stays a
-- sub-plan, and none is hashed.)
WITH gone AS (
    DELETE FROM pgqueue_workflows AS w
    WHERE w.id = ANY (ARRAY(
              SELECT f.id FROM pgqueue_workflows AS f
              WHERE f.finished_at IS NOT NULL
                AND NOT EXISTS (SELECT 1 FROM pgqueue_workflow_jobs AS m JOIN pgqueue_jobs AS j ON j.id = m.job
                                WHERE m.workflow = f.id
                                UNION ALL
                                SELECT 1 FROM pgqueue_workflow_jobs AS m, LATERAL pgqueue_history_job(m.job) AS h
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
              WHERE NOT EXISTS (SELECT 1 FROM pgqueue_jobs AS j WHERE j.id = o.child
                                UNION ALL
                                SELECT 1 FROM pgqueue_history_job(o.child) AS h)
              LIMIT $1 FOR UPDATE SKIP LOCKED))
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM edges) + (SELECT count(*) FROM orphans)
