-- workflow: workflow $1's row, and how many of its jobs are in each status (a job deleted since,
-- by retention once the workflow finished or by hand, counts as ''). Reads pgqueue_workflows'
-- primary key, pgqueue_workflow_jobs' (workflow, job) and pgqueue_jobs' primary key: a count
-- costs one look-up per job. A job not in pgqueue_jobs is looked up in the history (migration
-- 20261214120000), where the jobs of a finished workflow move: pgqueue_history_job, which reads
-- pgqueue_history_id_idx of the partitions from the id's time on, only for those jobs (the
-- One-Time Filter, a second probe of pgqueue_jobs' key).
SELECT w.name, w.created_at, w.finished_at, w.jobs, w.unfinished, w.metadata,
       (SELECT json_object_agg(s.status, s.n)
        FROM (SELECT coalesce(j.status, '') AS status, count(*) AS n
              FROM pgqueue_workflow_jobs AS m
              LEFT JOIN LATERAL (SELECT x.status FROM pgqueue_jobs AS x WHERE x.id = m.job
                                 UNION ALL
                                 SELECT h.status FROM pgqueue_history_job(m.job) AS h
                                 WHERE NOT EXISTS (SELECT FROM pgqueue_jobs AS x WHERE x.id = m.job)) AS j ON true
              WHERE m.workflow = w.id
              GROUP BY 1) AS s)
FROM pgqueue_workflows AS w
WHERE w.id = $1
