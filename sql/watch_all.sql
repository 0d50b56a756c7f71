-- watch_all: records that every queue of the schema is watched for at least $1 ms more, so that
-- workers announce the jobs they start and settle: each queue with a row of its own or with jobs
-- counted (a queue whose counts are all zero is left out, so that watching does not list again a
-- queue nobody uses). A queue that appears later is recorded by watch.sql when its first
-- notification is seen. Tells the workers of every queue so, in one notification with no queue
-- name ('w '), which every subscriber hears, so that they also announce the outcomes of jobs they
-- claimed before (one per queue, at every renewal, made thousands a minute with many queues).
-- Returns the queues' names. Reads pgqueue_counts, pgqueue_count_deltas and pgqueue_queues (a
-- few rows per queue).
WITH watched AS (
    INSERT INTO pgqueue_queues AS q (name, watched_until)
    SELECT DISTINCT name, now() + $1::bigint * interval '1 millisecond'
    FROM (SELECT queue AS name FROM pgqueue_counts WHERE n <> 0
          UNION SELECT queue FROM pgqueue_count_deltas
          UNION SELECT name FROM pgqueue_queues) AS known
    ON CONFLICT (name) DO UPDATE
    SET watched_until = greatest(q.watched_until, excluded.watched_until), updated_at = now()
    RETURNING q.name
), told AS (
    SELECT pgqueue_notify('w ')
)
SELECT name FROM watched, told
