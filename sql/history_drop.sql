-- history_drop: drops the oldest of the history's partitions whose day has passed, its jobs
-- subtracted from the counts first (see migration 20261214120000); returns how many jobs went
-- (-1: no partition had passed), or NULL if another process is making or dropping partitions now.
-- One partition a transaction: the history is held only for its drop.
SELECT pgqueue_history_drop()
