package pgqueue

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// MaxLimit is the largest value a field of Limits takes.
const MaxLimit = 1_000_000

// Limits are a queue's flow-control limits. They are stored in the database, so every process
// that works the queue applies the same ones, and a change reaches running workers at once. The
// zero value means no limits. See README, "Flow control", for what each guarantees and costs.
type Limits struct {
	// MaxRunning is how many of the queue's jobs may run at once, counted over every process,
	// whatever each worker's own Concurrency. 0: no limit.
	MaxRunning int `json:"max_running,omitempty"`

	// KeyMaxRunning is how many jobs of one key (EnqueueOptions.Key) may run at once, counted
	// over every process. A job of the key that has run and waits to run again (a retry's
	// back-off, a snooze) holds its place meanwhile, so 1 starts a key's jobs one after another
	// in their order (priority, then enqueue order): strict FIFO per key. A job that ends —
	// completed, failed for good, cancelled, deleted — frees its place. Claims take turns between
	// the keys that have jobs waiting. Jobs without a key are not limited by it. 0: no limit.
	KeyMaxRunning int `json:"key_max_running,omitempty"`
}

// validate checks l's fields.
func (l Limits) validate() error {
	switch {
	case l.MaxRunning < 0 || l.MaxRunning > MaxLimit:
		return invalidf("Limits.MaxRunning %d is out of range (0 for none, up to %d)", l.MaxRunning, MaxLimit)
	case l.KeyMaxRunning < 0 || l.KeyMaxRunning > MaxLimit:
		return invalidf("Limits.KeyMaxRunning %d is out of range (0 for none, up to %d)", l.KeyMaxRunning, MaxLimit)
	}
	return nil
}

// SetLimits sets the queue's limits for every process, replacing the ones it had; Limits{}
// removes them. Workers of the queue apply them from their next claim: jobs already running
// beyond a new limit run to their end, and no more start until the queue is back under it.
func (q *Queue[T]) SetLimits(ctx context.Context, l Limits) error {
	return setLimits(ctx, q.c.pool, q.name, l)
}

// SetLimitsTx is SetLimits inside the caller's transaction tx: the limits change if and only if
// tx commits, and workers hear of them when it commits.
func (q *Queue[T]) SetLimitsTx(ctx context.Context, tx pgx.Tx, l Limits) error {
	if tx == nil {
		return invalidf("SetLimitsTx needs a transaction")
	}
	return setLimits(ctx, tx, q.name, l)
}

func setLimits(ctx context.Context, db execer, queue string, l Limits) error {
	if err := l.validate(); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, limitsSetSQL, queue, nullIfZero(l.MaxRunning), nullIfZero(l.KeyMaxRunning)); err != nil {
		return wrapf(err, "set limits of %s", queue)
	}
	return nil
}

// Limits returns the queue's limits as stored; the zero Limits if it has none.
func (q *Queue[T]) Limits(ctx context.Context) (Limits, error) {
	var l Limits
	err := q.c.pool.QueryRow(ctx, limitsGetSQL, q.name).Scan(&l.MaxRunning, &l.KeyMaxRunning)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Limits{}, wrapf(err, "limits of %s", q.name)
	}
	return l, nil
}

// nullIfZero binds 0 as NULL.
func nullIfZero(n int) *int32 {
	if n == 0 {
		return nil
	}
	v := int32(n)
	return &v
}
