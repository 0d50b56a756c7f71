-- notify_watchers: sends message $2 on the schema's channel if queue $1 is being watched.
-- Reads pgqueue_queues' primary key.
SELECT pgqueue_notify($2::text)
FROM pgqueue_queues
WHERE name = $1 AND watched_until > now()
