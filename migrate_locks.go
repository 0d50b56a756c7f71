package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Migrations that wait for locks. A statement that needs a lock on a table in use — ALTER TABLE,
// CREATE TRIGGER on pgqueue_jobs — waits in the lock's queue for the transactions that hold a
// weaker one, and every claim, settle and enqueue that comes after it waits behind it: on a busy
// queue, a migration that waited 10 s for a lock was a 10 s stall of every worker. So the migrator
// lets each statement wait at most migrationLockTimeout, rolls back a migration whose statement
// timed out, and runs it again after a pause (with jitter, doubling up to lockRetryPauseMax),
// until it gets its locks: each try stalls the queue by at most the timeout. The rules for
// writing migrations that keep their locks short are in CONTRIBUTING.md.

// migrationLockTimeout is how long a migration's statement waits for a lock before the migration
// is rolled back and tried again.
const migrationLockTimeout = 500 * time.Millisecond

// lockTimeoutSetting is migrationLockTimeout as lock_timeout takes it.
func lockTimeoutSetting() string { return fmt.Sprintf("%dms", migrationLockTimeout.Milliseconds()) }

// Pauses between tries of a migration that timed out waiting for a lock, and how many tries it
// gets: about ten minutes of them, most of it in pauses, before Migrate gives up.
const (
	lockRetryPause    = 100 * time.Millisecond
	lockRetryPauseMax = 5 * time.Second
	lockRetryTries    = 120
)

// retryLockTimeouts runs try until it returns anything but a lock timeout, pausing between tries,
// at most lockRetryTries times; it stops early, returning ctx's error, once ctx ends: in a pause,
// or during a try (whose statement was most likely waiting for its lock again), naming the tries
// and the last lock timeout either way.
func retryLockTimeouts(ctx context.Context, try func() error) error {
	pause := lockRetryPause
	var timedOut error // the last try's lock timeout
	for n := 1; ; n++ {
		err := try()
		if err != nil && timedOut != nil && ctx.Err() != nil {
			return fmt.Errorf("%w, after %d tries that waited %s for a lock: %w", ctx.Err(), n, migrationLockTimeout, timedOut)
		}
		if err == nil || !isLockTimeout(err) {
			return err
		}
		timedOut = err
		if n == lockRetryTries {
			return fmt.Errorf("gave up after %d tries, each of which waited %s for a lock: %w", n, migrationLockTimeout, err)
		}
		t := time.NewTimer(pause/2 + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w, after %d tries that waited %s for a lock: %w", ctx.Err(), n, migrationLockTimeout, err)
		case <-t.C:
		}
		pause = min(2*pause, lockRetryPauseMax)
	}
}

// isLockTimeout reports whether err is the server's lock_not_available (55P03): a lock_timeout
// ran out, or a NOWAIT lock was held.
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}
