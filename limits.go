package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// MaxLimit is the largest value a field of Limits takes.
const MaxLimit = 1_000_000

// Limits are a queue's flow-control limits. They are stored in the database, so every process
// that works the queue applies the same ones, and a change reaches running workers at once. The
// zero value means no limits. The flow-control guide (docs/flow-control.md in the repository)
// says what each guarantees and costs.
type Limits struct {
	// MaxRunning is how many of the queue's jobs may run at once, counted over every process,
	// whatever each worker's own Concurrency. 0: no limit.
	MaxRunning int `json:"max_running,omitempty"`

	// KeyMaxRunning is how many jobs of one key (EnqueueOptions.Key) may run at once, counted
	// over every process. A job of the key that has run and waits to run again (a retry's
	// back-off, a snooze) holds its place meanwhile, so 1 starts a key's jobs one after another
	// in their order (priority, then enqueue order): strict FIFO per key. A job that ends —
	// completed, failed for good, cancelled, deleted — frees its place. Claims take turns between
	// the keys that have jobs waiting. Jobs without a key are not limited by it, but start only
	// from the front of the queue's line: keyed jobs ahead of them that cannot start hold them
	// back (give every job of such a queue a key). 0: no limit.
	KeyMaxRunning int `json:"key_max_running,omitempty"`

	// Rate is how many of the queue's jobs may start within any window of time of length
	// Rate.Per, counted over every process: a sliding window over the starts themselves, which
	// are logged while the limit is set. Retries count as starts. A job counts as many starts as
	// its EnqueueOptions.Weight, and jobs still start in their order: one that does not fit yet
	// holds back the jobs behind it. The zero Rate: no limit.
	Rate Rate `json:"rate,omitzero"`

	// KeyRate is Rate for the jobs of one key (EnqueueOptions.Key). Claims take turns between
	// the keys that have jobs waiting. Jobs without a key are not limited by it, and start from
	// the front of the queue's line, as with KeyMaxRunning.
	KeyRate Rate `json:"key_rate,omitzero"`
}

// Rate is a rate limit: at most Starts starts in any window of length Per.
type Rate struct {
	Starts int           `json:"starts"`
	Per    time.Duration `json:"per"`
}

// MarshalJSON writes Per as a duration string ("1m0s").
func (r Rate) MarshalJSON() ([]byte, error) {
	return json.Marshal(rateJSON{r.Starts, jsonDuration(r.Per)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Rate) UnmarshalJSON(b []byte) error {
	var w rateJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*r = Rate{w.Starts, time.Duration(w.Per)}
	return nil
}

type rateJSON struct {
	Starts int          `json:"starts"`
	Per    jsonDuration `json:"per"`
}

// maxRatePeriod is the longest Rate.Per: a start is remembered for as long as the longest
// period of its queue.
const maxRatePeriod = 24 * time.Hour

func (r Rate) validate(name string) error {
	switch {
	case r == Rate{}:
		return nil
	case r.Starts <= 0 || r.Starts > MaxLimit:
		return invalidf("%s.Starts %d is out of range (1 to %d, or a zero %s for none)", name, r.Starts, MaxLimit, name)
	case r.Per < time.Millisecond || r.Per > maxRatePeriod:
		return invalidf("%s.Per %s is out of range (1ms to %s)", name, r.Per, maxRatePeriod)
	}
	return nil
}

// args binds the rate as its two columns: NULL for none.
func (r Rate) args() (limit *int32, periodUs *int64) {
	if r == (Rate{}) {
		return nil, nil
	}
	n, us := int32(r.Starts), r.Per.Microseconds()
	return &n, &us
}

// validate checks l's fields.
func (l Limits) validate() error {
	switch {
	case l.MaxRunning < 0 || l.MaxRunning > MaxLimit:
		return invalidf("Limits.MaxRunning %d is out of range (0 for none, up to %d)", l.MaxRunning, MaxLimit)
	case l.KeyMaxRunning < 0 || l.KeyMaxRunning > MaxLimit:
		return invalidf("Limits.KeyMaxRunning %d is out of range (0 for none, up to %d)", l.KeyMaxRunning, MaxLimit)
	}
	if err := l.Rate.validate("Limits.Rate"); err != nil {
		return err
	}
	return l.KeyRate.validate("Limits.KeyRate")
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
	rate, per := l.Rate.args()
	keyRate, keyPer := l.KeyRate.args()
	_, err := db.Exec(ctx, limitsSetSQL, queue, nullIfZero(l.MaxRunning), nullIfZero(l.KeyMaxRunning),
		rate, per, keyRate, keyPer)
	if err != nil {
		return wrapf(err, "set limits of %s", queue)
	}
	return nil
}

// Limits returns the queue's limits as stored; the zero Limits if it has none.
func (q *Queue[T]) Limits(ctx context.Context) (Limits, error) {
	var l Limits
	var per, keyPer int64
	err := q.c.pool.QueryRow(ctx, limitsGetSQL, q.name).Scan(&l.MaxRunning, &l.KeyMaxRunning,
		&l.Rate.Starts, &per, &l.KeyRate.Starts, &keyPer)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Limits{}, wrapf(err, "limits of %s", q.name)
	}
	l.Rate.Per, l.KeyRate.Per = time.Duration(per)*time.Microsecond, time.Duration(keyPer)*time.Microsecond
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
