-- limits_get: the limits of queue $1 (0 for none; periods in µs); no row if the queue has no
-- settings. Reads pgqueue_queues' primary key.
SELECT coalesce(max_running, 0), coalesce(key_max_running, 0),
       coalesce(rate_limit, 0), coalesce((extract(epoch FROM rate_period) * 1e6)::bigint, 0),
       coalesce(key_rate_limit, 0), coalesce((extract(epoch FROM key_rate_period) * 1e6)::bigint, 0)
FROM pgqueue_queues WHERE name = $1
