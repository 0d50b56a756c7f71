-- watch: records that queue $1 is watched for at least $2 ms more, so that workers announce the
-- jobs they start and settle, and tells the workers so (a 'w' notification), so that they also
-- announce the outcomes of jobs they claimed before. Reads pgqueue_queues' primary key.
WITH watched AS (
    INSERT INTO pgqueue_queues AS q (name, watched_until)
    VALUES ($1, now() + $2::bigint * interval '1 millisecond')
    ON CONFLICT (name) DO UPDATE
    SET watched_until = greatest(q.watched_until, excluded.watched_until), updated_at = now()
    RETURNING q.name
)
SELECT pgqueue_notify('w ' || name) FROM watched
