-- bulk_count: how many jobs the filter keeps ($1–$6, see job_filter.sql). Reads the rows the
-- filter's queues and statuses select (an index of a status, or pgqueue_jobs itself).
SELECT count(*) FROM pgqueue_jobs WHERE /*filter*/
