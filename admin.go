package pgqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/oklog/ulid/v2"
)

// Pause stops the queue's workers, in every process, from starting jobs: they stop claiming at
// once (jobs already running finish). The pause is stored in pgqueue_queues and lasts until
// Resume. Enqueuing into a paused queue still works.
func (q *Queue[T]) Pause(ctx context.Context) error { return q.setPaused(ctx, true) }

// Resume lets the queue's workers start jobs again, and wakes them at once.
func (q *Queue[T]) Resume(ctx context.Context) error { return q.setPaused(ctx, false) }

func (q *Queue[T]) setPaused(ctx context.Context, paused bool) error {
	if _, err := q.c.pool.Exec(ctx, setPausedSQL, q.name, paused); err != nil {
		return fmt.Errorf("pgqueue: pause %s: %w", q.name, err)
	}
	return nil
}

// Cancel cancels a job that has not finished. A waiting job ends cancelled at once; a running
// one ends cancelled too, and the worker running it is told through NOTIFY and cancels the
// handler's context (context.Cause is ErrCancelled) within milliseconds; whatever the handler
// returns is ignored. Cancelling a cancelled job does nothing. It returns ErrNotFound if the
// queue has no such job, and ErrJobFinished if the job has already completed or failed.
func (q *Queue[T]) Cancel(ctx context.Context, id ulid.ULID) error {
	var was Status
	var notified int
	err := q.c.pool.QueryRow(ctx, cancelSQL, [16]byte(id), q.name).Scan(&was, &notified)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgqueue: cancel %s in %s: %w", id, q.name, ErrNotFound)
	case err != nil:
		return fmt.Errorf("pgqueue: cancel %s in %s: %w", id, q.name, err)
	case was == StatusCompleted || was == StatusFailed:
		return fmt.Errorf("pgqueue: cancel %s in %s: %w", id, q.name, ErrJobFinished)
	}
	return nil
}

// Retry makes a job available to run now: a failed or cancelled job (or a completed one kept by
// retention) with a fresh set of attempts, its recorded errors kept; a scheduled job ahead of its
// time, its attempts unchanged. An available job is left as it is. It returns ErrNotFound if the
// queue has no such job, ErrJobRunning if the job is running, and ErrDuplicate if the job has a
// unique key that a live job of the queue holds now.
func (q *Queue[T]) Retry(ctx context.Context, id ulid.ULID) error {
	var was Status
	var notified int
	err := q.c.pool.QueryRow(ctx, retrySQL, [16]byte(id), q.name).Scan(&was, &notified)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgqueue: retry %s in %s: %w", id, q.name, ErrNotFound)
	case errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "pgqueue_jobs_unique_idx":
		return fmt.Errorf("pgqueue: retry %s in %s: %w", id, q.name, ErrDuplicate)
	case err != nil:
		return fmt.Errorf("pgqueue: retry %s in %s: %w", id, q.name, err)
	case was == StatusRunning:
		return fmt.Errorf("pgqueue: retry %s in %s: %w", id, q.name, ErrJobRunning)
	}
	return nil
}

// DeleteOptions are the options of Queue.Delete. A nil *DeleteOptions means defaults.
type DeleteOptions struct {
	// Cancel lets Delete delete a running job: its worker is told to stop, as with Cancel, and
	// the row is deleted. Defaults to false: a running job is refused with ErrJobRunning.
	Cancel bool
}

// Delete deletes a job, whatever its status, except that a running job is refused with
// ErrJobRunning unless opts.Cancel is set. It returns ErrNotFound if the queue has no such job.
func (q *Queue[T]) Delete(ctx context.Context, id ulid.ULID, opts *DeleteOptions) error {
	cancel := opts != nil && opts.Cancel
	var was Status
	var deleted bool
	var notified int
	err := q.c.pool.QueryRow(ctx, deleteSQL, [16]byte(id), q.name, cancel).Scan(&was, &deleted, &notified)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("pgqueue: delete %s in %s: %w", id, q.name, ErrNotFound)
	case err != nil:
		return fmt.Errorf("pgqueue: delete %s in %s: %w", id, q.name, err)
	case !deleted:
		return fmt.Errorf("pgqueue: delete %s in %s: %w", id, q.name, ErrJobRunning)
	}
	return nil
}

// DeleteWaiting deletes every waiting (scheduled or available) job of the queue in one
// statement, atomically, and returns how many it deleted. Running and finished jobs stay.
func (q *Queue[T]) DeleteWaiting(ctx context.Context) (int, error) {
	var n, notified int
	if err := q.c.pool.QueryRow(ctx, deleteWaitingSQL, q.name).Scan(&n, &notified); err != nil {
		return 0, fmt.Errorf("pgqueue: delete waiting jobs of %s: %w", q.name, err)
	}
	return n, nil
}
