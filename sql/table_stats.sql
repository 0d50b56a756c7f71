-- table_stats: live and dead row estimates of pgqueue_jobs from the statistics collector, and
-- when it was last vacuumed. Dead rows pile up when a long transaction holds vacuum back.
SELECT n_live_tup, n_dead_tup, greatest(last_vacuum, last_autovacuum)
FROM pg_stat_user_tables
WHERE relid = 'pgqueue_jobs'::regclass
