package pgqueue

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/oklog/ulid/v2"
)

// The admin calls come in pairs: Cancel, Retry, Delete, Pause and Resume commit their change
// themselves; the Tx variants make it inside the caller's pgx.Tx. Client.CancelJob, RetryJob and
// DeleteJob, and their Tx variants, do the same by id alone, whichever the job's queue.

// Pause stops the queue's workers, in every process, from starting jobs: they stop claiming at
// once (jobs already running finish). The pause is stored in pgqueue_queues and lasts until
// Resume. Enqueuing into a paused queue still works.
func (q *Queue[T]) Pause(ctx context.Context) error { return setPaused(ctx, q.c.pool, q.name, true) }

// PauseTx is Pause inside the caller's transaction tx: the queue is paused if and only if tx
// commits, and its workers stop claiming when it commits.
func (q *Queue[T]) PauseTx(ctx context.Context, tx pgx.Tx) error {
	if tx == nil {
		return invalidf("PauseTx needs a transaction")
	}
	return setPaused(ctx, tx, q.name, true)
}

// Resume lets the queue's workers start jobs again, and wakes them at once.
func (q *Queue[T]) Resume(ctx context.Context) error { return setPaused(ctx, q.c.pool, q.name, false) }

// ResumeTx is Resume inside the caller's transaction tx: the queue is resumed if and only if tx
// commits, and its workers are woken when it commits.
func (q *Queue[T]) ResumeTx(ctx context.Context, tx pgx.Tx) error {
	if tx == nil {
		return invalidf("ResumeTx needs a transaction")
	}
	return setPaused(ctx, tx, q.name, false)
}

// execer is what the queue-wide admin calls need of a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// setPaused pauses or resumes queue through db, and notifies its workers (on commit, in a tx).
func setPaused(ctx context.Context, db execer, queue string, paused bool) error {
	if _, err := db.Exec(ctx, setPausedSQL, queue, paused); err != nil {
		op := "resume"
		if paused {
			op = "pause"
		}
		return wrapf(err, "%s %s", op, queue)
	}
	return nil
}

// Cancel cancels a job that has not finished. A waiting job ends cancelled at once; a running
// one ends cancelled too, and the worker running it is told through NOTIFY and cancels the
// handler's context (context.Cause is ErrCancelled) within milliseconds; whatever the handler
// returns is ignored. Cancelling a cancelled job does nothing. It returns ErrNotFound if the
// queue has no such job, and ErrJobFinished if the job has already completed or failed.
func (q *Queue[T]) Cancel(ctx context.Context, id ulid.ULID) error {
	return cancelJob(ctx, q.c.pool, id, q.name)
}

// CancelTx is Cancel inside the caller's transaction tx: the job is cancelled if and only if tx
// commits, and the worker running it is told when tx commits (NOTIFY is delivered on commit),
// then cancels the handler's context as with Cancel.
// Until tx ends the job's row stays locked: a worker running the job can neither extend its
// lease (its heartbeat skips the row) nor settle it (it tries again until tx ends), so keep tx
// shorter than the job's LockDuration.
func (q *Queue[T]) CancelTx(ctx context.Context, tx pgx.Tx, id ulid.ULID) error {
	if tx == nil {
		return invalidf("CancelTx needs a transaction")
	}
	return cancelJob(ctx, tx, id, q.name)
}

// cancelJob cancels job id of queue, or of any queue when queue is empty, through db.
func cancelJob(ctx context.Context, db querier, id ulid.ULID, queue string) error {
	var was Status
	var notified int
	// The scan replaces queue by the job's own, for the messages below.
	err := scanByID(ctx, db, cancelSQL, []any{[16]byte(id), nullIfEmpty(queue)}, &was, &queue, &notified)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return wrapf(ErrNotFound, "cancel %s", jobRef(id, queue))
	case err != nil:
		return wrapf(err, "cancel %s", jobRef(id, queue))
	case was == StatusCompleted || was == StatusFailed:
		return wrapf(ErrJobFinished, "cancel %s", jobRef(id, queue))
	}
	return nil
}

// Retry makes a job available to run now: a failed or cancelled job (or a completed one kept by
// retention) with a fresh set of attempts, its recorded errors kept; a scheduled job ahead of its
// time, its attempts unchanged. A completed run of a repeating job runs once more without
// repeating, since its next run exists already; a failed or cancelled one, which ended its chain,
// continues it when it succeeds. An available job is left as it is. It returns ErrNotFound if the
// queue has no such job, ErrJobRunning if the job is running, and ErrDuplicate if the job has a
// unique key that a live job of the queue holds now.
func (q *Queue[T]) Retry(ctx context.Context, id ulid.ULID) error {
	return retryJob(ctx, q.c.pool, id, q.name)
}

// RetryTx is Retry inside the caller's transaction tx: the job is made available if and only if
// tx commits, and the queue's workers are woken when it commits.
// Until tx ends the job's row stays locked: a worker running the job can neither extend its
// lease (its heartbeat skips the row) nor settle it (it tries again until tx ends), so keep tx
// shorter than the job's LockDuration.
func (q *Queue[T]) RetryTx(ctx context.Context, tx pgx.Tx, id ulid.ULID) error {
	if tx == nil {
		return invalidf("RetryTx needs a transaction")
	}
	return retryJob(ctx, tx, id, q.name)
}

// retryJob retries job id of queue, or of any queue when queue is empty, through db.
func retryJob(ctx context.Context, db querier, id ulid.ULID, queue string) error {
	var was Status
	var notified int
	err := scanByID(ctx, db, retrySQL, []any{[16]byte(id), nullIfEmpty(queue)}, &was, &queue, &notified)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return wrapf(ErrNotFound, "retry %s", jobRef(id, queue))
	case errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == "pgqueue_jobs_unique_idx":
		return wrapf(ErrDuplicate, "retry %s", jobRef(id, queue))
	case err != nil:
		return wrapf(err, "retry %s", jobRef(id, queue))
	case was == StatusRunning:
		return wrapf(ErrJobRunning, "retry %s", jobRef(id, queue))
	}
	return nil
}

// DeleteOptions are the options of the delete calls (Queue.Delete, Client.DeleteJob and their Tx
// variants). A nil *DeleteOptions means defaults.
type DeleteOptions struct {
	// Cancel lets Delete delete a running job: its worker is told to stop, as with Cancel, and
	// the row is deleted. Defaults to false: a running job is refused with ErrJobRunning.
	Cancel bool
}

// Delete deletes a job, whatever its status, except that a running job is refused with
// ErrJobRunning unless opts.Cancel is set. It returns ErrNotFound if the queue has no such job.
func (q *Queue[T]) Delete(ctx context.Context, id ulid.ULID, opts *DeleteOptions) error {
	return deleteJob(ctx, q.c.pool, id, q.name, opts)
}

// DeleteTx is Delete inside the caller's transaction tx: the job is deleted if and only if tx
// commits, and a worker running it (opts.Cancel) is told when tx commits.
// Until tx ends the job's row stays locked: a worker running the job can neither extend its
// lease (its heartbeat skips the row) nor settle it (it tries again until tx ends), so keep tx
// shorter than the job's LockDuration.
func (q *Queue[T]) DeleteTx(ctx context.Context, tx pgx.Tx, id ulid.ULID, opts *DeleteOptions) error {
	if tx == nil {
		return invalidf("DeleteTx needs a transaction")
	}
	return deleteJob(ctx, tx, id, q.name, opts)
}

// deleteJob deletes job id of queue, or of any queue when queue is empty, through db.
func deleteJob(ctx context.Context, db querier, id ulid.ULID, queue string, opts *DeleteOptions) error {
	cancel := opts != nil && opts.Cancel
	var was Status
	var deleted bool
	var notified int
	err := scanByID(ctx, db, deleteSQL, []any{[16]byte(id), nullIfEmpty(queue), cancel}, &was, &deleted, &queue, &notified)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return wrapf(ErrNotFound, "delete %s", jobRef(id, queue))
	case err != nil:
		return wrapf(err, "delete %s", jobRef(id, queue))
	case !deleted:
		return wrapf(ErrJobRunning, "delete %s", jobRef(id, queue))
	}
	return nil
}

// scanByID runs an operation on one job by its id (cancel.sql, retry.sql, delete.sql) and scans
// its row; if it found no job, it runs it once more. A job that moved between pgqueue_jobs and
// the history while the first ran (history.go: a move, or a retry's move back) was gone from the
// table it was in once the statement had waited for the move's lock, and not yet in the other for
// the statement's snapshot, taken before the move committed; the next statement's snapshot,
// taken after, finds it. A statement that found no job changed nothing.
func scanByID(ctx context.Context, db querier, sql string, args []any, dest ...any) error {
	err := db.QueryRow(ctx, sql, args...).Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		err = db.QueryRow(ctx, sql, args...).Scan(dest...)
	}
	return err
}

// jobRef names job id of queue (if known) in an error message.
func jobRef(id ulid.ULID, queue string) string {
	if queue == "" {
		return "job " + id.String()
	}
	return "job " + id.String() + " in " + queue
}

// DeleteWaiting deletes every waiting (scheduled or available) job of the queue in one
// statement, atomically, and returns how many it deleted. Running and finished jobs stay.
func (q *Queue[T]) DeleteWaiting(ctx context.Context) (int, error) {
	var n, notified int
	if err := q.c.pool.QueryRow(ctx, deleteWaitingSQL, q.name).Scan(&n, &notified); err != nil {
		return 0, wrapf(err, "delete waiting jobs of %s", q.name)
	}
	return n, nil
}

// CancelJob is Queue.Cancel for the job with the given id, whichever its queue: for code that
// knows an id but not the job's queue or payload type.
func (c *Client) CancelJob(ctx context.Context, id ulid.ULID) error {
	return cancelJob(ctx, c.pool, id, "")
}

// CancelJobTx is CancelJob inside the caller's transaction tx: the job is cancelled if and only if
// tx commits, and the worker running it is told when tx commits. As with Queue.CancelTx, the
// job's row stays locked until tx ends.
func (c *Client) CancelJobTx(ctx context.Context, tx pgx.Tx, id ulid.ULID) error {
	if tx == nil {
		return invalidf("CancelJobTx needs a transaction")
	}
	return cancelJob(ctx, tx, id, "")
}

// RetryJob is Queue.Retry for the job with the given id, whichever its queue.
func (c *Client) RetryJob(ctx context.Context, id ulid.ULID) error {
	return retryJob(ctx, c.pool, id, "")
}

// RetryJobTx is RetryJob inside the caller's transaction tx: the job is made available if and
// only if tx commits, and its queue's workers are woken when it commits. As with Queue.RetryTx,
// the job's row stays locked until tx ends.
func (c *Client) RetryJobTx(ctx context.Context, tx pgx.Tx, id ulid.ULID) error {
	if tx == nil {
		return invalidf("RetryJobTx needs a transaction")
	}
	return retryJob(ctx, tx, id, "")
}

// DeleteJob is Queue.Delete for the job with the given id, whichever its queue.
func (c *Client) DeleteJob(ctx context.Context, id ulid.ULID, opts *DeleteOptions) error {
	return deleteJob(ctx, c.pool, id, "", opts)
}

// DeleteJobTx is DeleteJob inside the caller's transaction tx: the job is deleted if and only if
// tx commits, and a worker running it (opts.Cancel) is told when tx commits. As with
// Queue.DeleteTx, the job's row stays locked until tx ends.
func (c *Client) DeleteJobTx(ctx context.Context, tx pgx.Tx, id ulid.ULID, opts *DeleteOptions) error {
	if tx == nil {
		return invalidf("DeleteJobTx needs a transaction")
	}
	return deleteJob(ctx, tx, id, "", opts)
}
