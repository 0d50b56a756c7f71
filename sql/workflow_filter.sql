-- workflow_filter: the condition JobFilter.Workflow adds to job_filter.sql's, written into the
-- bulk statements after it: the jobs of workflow $W, which the statement binds after its own
-- parameters. The ids, read from pgqueue_workflow_jobs' primary key (workflow, job), go in as an
-- array, so that the statement reads pgqueue_jobs by its primary key too, not a range of it.
id = ANY (ARRAY(SELECT job FROM pgqueue_workflow_jobs WHERE workflow = $W))
