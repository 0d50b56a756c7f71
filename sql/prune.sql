-- prune: for each queue of $1, deletes up to $5 of its completed jobs finished more than $2 µs
-- ago, up to $5 failed ones finished more than $3, and up to $5 cancelled ones finished more than
-- $4 (each an array beside $1; a NULL element keeps them for ever). Rows another pruner holds are
-- skipped. A step of a workflow is kept, whatever its age, until its workflow has finished: its
-- result and its end are what its dependents and the workflow's view read (one look-up of the
-- workflow's primary key per such job). Returns how many it deleted in all.
-- Each status is a range scan of its own of pgqueue_jobs_finished_idx (queue, status,
-- finished_at, id), so that a prune that finds nothing past retention reads next to nothing. That
-- takes the status as a constant, one branch each: with the three conditions OR'ed in one scan,
-- the planner walked the queue's whole part of the index (every kept finished job) and filtered;
-- with the status taken from a list, it chose a sequential scan.
WITH x AS (
    SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[])
                  AS x(queue, completed_us, failed_us, cancelled_us)
), deleted AS (
    DELETE FROM pgqueue_jobs AS j
    WHERE j.ctid = ANY (ARRAY(
              SELECT c.ctid
              FROM x, LATERAL (SELECT ctid FROM pgqueue_jobs
                               WHERE queue = x.queue AND status = 'completed'
                                 AND finished_at < now() - x.completed_us * interval '1 microsecond'
                                 AND (workflow IS NULL OR EXISTS (SELECT 1 FROM pgqueue_workflows AS w
                                                                  WHERE w.id = workflow AND w.finished_at IS NOT NULL))
                               LIMIT $5 FOR UPDATE SKIP LOCKED) AS c
              UNION ALL
              SELECT c.ctid
              FROM x, LATERAL (SELECT ctid FROM pgqueue_jobs
                               WHERE queue = x.queue AND status = 'failed'
                                 AND finished_at < now() - x.failed_us * interval '1 microsecond'
                                 AND (workflow IS NULL OR EXISTS (SELECT 1 FROM pgqueue_workflows AS w
                                                                  WHERE w.id = workflow AND w.finished_at IS NOT NULL))
                               LIMIT $5 FOR UPDATE SKIP LOCKED) AS c
              UNION ALL
              SELECT c.ctid
              FROM x, LATERAL (SELECT ctid FROM pgqueue_jobs
                               WHERE queue = x.queue AND status = 'cancelled'
                                 AND finished_at < now() - x.cancelled_us * interval '1 microsecond'
                                 AND (workflow IS NULL OR EXISTS (SELECT 1 FROM pgqueue_workflows AS w
                                                                  WHERE w.id = workflow AND w.finished_at IS NOT NULL))
                               LIMIT $5 FOR UPDATE SKIP LOCKED) AS c))
    RETURNING 1
)
SELECT count(*) FROM deleted
