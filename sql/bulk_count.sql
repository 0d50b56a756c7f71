-- bulk_count: how many jobs the filter keeps ($1–$6, see job_filter.sql), in pgqueue_jobs and in
-- the history (migration 20261214120000). Reads the rows the filter's queues and statuses select
-- (an index of a status, or pgqueue_jobs itself); in the history, when the filter names a
-- finished status (else not at all), pgqueue_history_finished_idx of each partition (queue,
-- status, finished_at, id): a range per queue and status when the filter names queues, with
-- finished_at's bounds in it (repeated here without their NULL tests, which would keep them out
-- of the index condition), read index-only unless created_at is bounded too.
SELECT (SELECT count(*) FROM pgqueue_jobs WHERE /*filter*/)
     + (SELECT count(*) FROM pgqueue_history
        WHERE /*filter*/ AND $2::text[] && ARRAY['completed', 'failed', 'cancelled']
          AND finished_at >= coalesce($5::timestamptz, '-infinity')
          AND finished_at < coalesce($6::timestamptz, 'infinity'))
