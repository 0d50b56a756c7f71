-- history_extend: makes the history's daily partitions up to $1 µs from now (see migration
-- 20261214120000); returns where the partitions end, or NULL if another process is making or
-- dropping them now.
SELECT pgqueue_history_extend(now() + $1::bigint * interval '1 microsecond')
