-- lock_timeout: sets lock_timeout to $1, for the transaction when $2 is true, else for the
-- session: for a migration about to run (a NO TRANSACTION one sets it for the session, and the
-- migrator resets it after; see migrationLockTimeout), and for the history's partitions
-- (historyKeeper).
SELECT set_config('lock_timeout', $1, $2)
