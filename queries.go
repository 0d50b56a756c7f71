package pgqueue

import "embed"

// The queries live in sql/, one statement per file, each headed by a comment that says what it
// does and which index it reads. pgx prepares each once per connection (its statement cache).
var (
	//go:embed sql/*.sql
	queryFiles embed.FS

	//go:embed sql/channel.sql
	channelSQL string
	//go:embed sql/enqueue.sql
	enqueueSQL string
	//go:embed sql/notify.sql
	notifySQL string
	//go:embed sql/now.sql
	nowSQL string
	//go:embed sql/claim.sql
	claimSQL string
	//go:embed sql/promote.sql
	promoteSQL string
	//go:embed sql/rescue.sql
	rescueSQL string
	//go:embed sql/heartbeat.sql
	heartbeatSQL string
	//go:embed sql/complete.sql
	completeSQL string
	//go:embed sql/retry.sql
	retrySQL string
	//go:embed sql/handback.sql
	handbackSQL string
	//go:embed sql/migrate_lock.sql
	migrateLockSQL string
	//go:embed sql/migrate_unlock.sql
	migrateUnlockSQL string
)
