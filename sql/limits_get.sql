-- limits_get: the limits of queue $1 (0 for none); no row if the queue has no settings. Reads
-- pgqueue_queues' primary key.
SELECT coalesce(max_running, 0), coalesce(key_max_running, 0) FROM pgqueue_queues WHERE name = $1
