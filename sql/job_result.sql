-- job_result: job $1's queue, status, result, newest error and finish time, for AwaitJob. Reads
-- the primary key, and for a job not found there the history (migration 20261214120000), where
-- finished jobs move: pgqueue_history_job, which reads pgqueue_history_id_idx of the partitions
-- from the id's time on. A job is in one of the two tables, never both, in the statement's
-- snapshot; the history is read only for an id pgqueue_jobs has not (a second probe of the key).
SELECT queue, status, result, errors -> -1 ->> 'error', finished_at
FROM (SELECT queue, status, result, errors, finished_at FROM pgqueue_jobs WHERE id = $1
      UNION ALL
      SELECT h.queue, h.status, h.result, h.errors, h.finished_at
      FROM pgqueue_history_job($1) AS h
      WHERE NOT EXISTS (SELECT FROM pgqueue_jobs WHERE id = $1)) AS j
