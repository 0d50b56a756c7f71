-- job_result: job $1's queue, status, result, newest error and finish time, for AwaitJob. Reads
-- the primary key.
SELECT queue, status, result, errors -> -1 ->> 'error', finished_at FROM pgqueue_jobs WHERE id = $1
