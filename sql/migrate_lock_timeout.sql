-- migrate_lock_timeout: sets lock_timeout to $1 for the migration about to run: for its
-- transaction when $2 is true, else for the session (a NO TRANSACTION migration; the migrator
-- resets it after). See migrationLockTimeout.
SELECT set_config('lock_timeout', $1, $2)
