-- workflow: workflow $1's row, and how many of its jobs are in each status (a job deleted since,
-- by retention once the workflow finished or by hand, counts as ''). Reads pgqueue_workflows'
-- primary key, pgqueue_workflow_jobs' (workflow, job) and pgqueue_jobs' primary key: a count
-- costs one look-up per job.
SELECT w.name, w.created_at, w.finished_at, w.jobs, w.unfinished, w.metadata,
       (SELECT json_object_agg(s.status, s.n)
        FROM (SELECT coalesce(j.status, '') AS status, count(*) AS n
              FROM pgqueue_workflow_jobs AS m LEFT JOIN pgqueue_jobs AS j ON j.id = m.job
              WHERE m.workflow = w.id
              GROUP BY 1) AS s)
FROM pgqueue_workflows AS w
WHERE w.id = $1
