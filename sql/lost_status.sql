-- lost_status: the current status of jobs whose lock a worker found gone, to tell a cancellation
-- (status 'cancelled') from a takeover (rescued or re-claimed). Reads the primary key.
SELECT id, status FROM pgqueue_jobs WHERE id = ANY ($1::uuid[])
