-- lost_status: the current status of jobs whose lock a worker found gone, to tell a cancellation
-- (status 'cancelled') from a takeover (rescued or re-claimed). Reads the primary key, and for
-- the ids not found there the history (migration 20261214120000), where a job cancelled while it
-- ran moves once it has been finished a while (a heartbeat that stalled that long finds it
-- there): pgqueue_history_job, which reads pgqueue_history_id_idx of the partitions from the
-- id's time on. A job is in one of the two tables, never both, in the statement's snapshot.
WITH live AS MATERIALIZED (
    SELECT id, status FROM pgqueue_jobs WHERE id = ANY ($1::uuid[])
)
SELECT id, status FROM live
UNION ALL
SELECT h.id, h.status
FROM unnest($1::uuid[]) AS g(id), LATERAL pgqueue_history_job(g.id) AS h
WHERE NOT EXISTS (SELECT FROM live AS l WHERE l.id = g.id)
