-- watch: records that queue $1 is watched for at least $2 ms more, so that workers announce the
-- jobs they start and settle. Reads pgqueue_queues' primary key.
INSERT INTO pgqueue_queues AS q (name, watched_until)
VALUES ($1, now() + $2::bigint * interval '1 millisecond')
ON CONFLICT (name) DO UPDATE
SET watched_until = greatest(q.watched_until, excluded.watched_until), updated_at = now()
