-- history_drop: drops the history's partitions whose day has passed, their jobs subtracted from
-- the counts first (see migration 20261214120000); returns how many jobs went, or NULL if
-- another process is making or dropping partitions now.
SELECT pgqueue_history_drop()
