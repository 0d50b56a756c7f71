package pgqueue

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrClosed is returned by calls on a Client after Close.
	ErrClosed = errors.New("pgqueue: client closed")

	// ErrInvalidOption is wrapped by every error about an invalid option, name or argument. Such
	// an error is returned before anything is written.
	ErrInvalidOption = errors.New("pgqueue: invalid option")

	// ErrPayloadTooLarge is returned by the enqueue calls when an encoded payload is larger than
	// Config.MaxPayloadBytes. Nothing is written.
	ErrPayloadTooLarge = errors.New("pgqueue: payload too large")

	// ErrLockLost is the cause (context.Cause) of a job's context when the worker lost the job's
	// lock: its lease ran out and another worker may run it, or the row was changed or deleted
	// under it. The outcome of that attempt is discarded.
	ErrLockLost = errors.New("pgqueue: job lock lost")

	// ErrShutdown is the cause (context.Cause) of a job's context when its worker stopped and the
	// job did not finish within WorkerOptions.ShutdownTimeout. The job is handed back to the queue
	// without charging the attempt.
	ErrShutdown = errors.New("pgqueue: worker shutting down")

	// ErrJobTimeout is the cause (context.Cause) of a job's context when its attempt ran longer
	// than WorkerOptions.JobTimeout. The attempt fails, and is retried like any other.
	ErrJobTimeout = errors.New("pgqueue: job timed out")

	// ErrCancelled is the cause (context.Cause) of a running job's context when the job was
	// cancelled (Queue.Cancel, or Queue.Delete with Cancel, or their Tx and Client variants). Its
	// outcome is discarded.
	ErrCancelled = errors.New("pgqueue: job cancelled")

	// ErrNotFound is returned when the queue has no job with the given id. A job of another
	// queue is not found either. The Client's calls by id (Client.Job, Client.CancelJob, …) look
	// in every queue. Client.DeleteSchedule returns it for a schedule that has no row.
	ErrNotFound = errors.New("pgqueue: job not found")

	// ErrJobRunning is returned by the delete calls (Queue.Delete, DeleteTx, Client.DeleteJob,
	// DeleteJobTx) for a running job unless DeleteOptions.Cancel is set, and by the retry calls
	// for a running job.
	ErrJobRunning = errors.New("pgqueue: job is running")

	// ErrJobFinished is returned by the cancel calls (Queue.Cancel, CancelTx, Client.CancelJob,
	// CancelJobTx) for a job that has already completed or failed.
	ErrJobFinished = errors.New("pgqueue: job already finished")

	// ErrDuplicate is returned by the retry calls (Queue.Retry, RetryTx, Client.RetryJob,
	// RetryJobTx) when the job has a unique key and another live job of the queue has the same
	// key.
	ErrDuplicate = errors.New("pgqueue: a live job has the same unique key")

	// ErrNotHeld is returned by Job.Update and Job.CompleteTx on a job that no handler holds
	// (one returned by an enqueue call or a listing), or whose lock was lost.
	ErrNotHeld = errors.New("pgqueue: job not held by this handler")

	// ErrWorkerRunning is returned by Worker.Run when the worker is already running.
	ErrWorkerRunning = errors.New("pgqueue: worker already running")

	// ErrHandlersStuck is returned by Worker.Run when handlers still had not returned a further
	// ShutdownTimeout after their contexts were cancelled. Their jobs were handed back to the
	// queue; the goroutines running them are left behind because Go cannot stop them.
	ErrHandlersStuck = errors.New("pgqueue: handlers ignored cancellation at shutdown")
)

// invalidf returns an error wrapping ErrInvalidOption with a description.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOption, fmt.Sprintf(format, args...))
}

// opError is the error of an operation that failed: what was being done, and why. Its message
// names the package once: "pgqueue: <op>: <cause>", the "pgqueue: " that starts the cause's own
// message (a sentinel's, or another opError's) dropped. errors.Is and errors.As see the cause.
type opError struct {
	op  string
	err error
}

// wrapf returns err as the cause of the operation that format and args describe. A statement's
// error that names a table, column or function the schema lacks is explained as a schema at the
// wrong version (explainSchemaError).
func wrapf(err error, format string, args ...any) error {
	return &opError{op: fmt.Sprintf(format, args...), err: explainSchemaError(err)}
}

// Error returns "pgqueue: <op>: <cause>".
func (e *opError) Error() string {
	return "pgqueue: " + e.op + ": " + strings.TrimPrefix(e.err.Error(), "pgqueue: ")
}

// Unwrap returns the cause.
func (e *opError) Unwrap() error { return e.err }

// PanicError is the error recorded for an attempt whose handler panicked. The worker recovers
// the panic, records the value and the stack in the job's errors, and retries the job like any
// other failed attempt. A panic of a Periodic's PayloadFunc, or of an enqueue middleware while it
// enqueues a periodic job, is recovered too: the occurrence fails with a PanicError (reported as
// EventError) and is tried again, as after an error.
type PanicError struct {
	// Value is what the handler (or PayloadFunc, or middleware) passed to panic.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack string
}

// Error describes the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// errGoexit is the error of an attempt whose handler called runtime.Goexit instead of returning
// (as t.FailNow does), recorded as a panic is.
var errGoexit = errors.New("runtime.Goexit: the handler ended its goroutine instead of returning")

// SnoozeError is returned by Snooze.
type SnoozeError struct {
	// Delay is how long the job waits before it runs again.
	Delay time.Duration
}

// Error describes the snooze.
func (e *SnoozeError) Error() string { return fmt.Sprintf("pgqueue: snoozed for %s", e.Delay) }

// Snooze returns an error for a handler to return when its job should run again later, after d,
// without using an attempt and without recording an error: the job goes back to scheduled
// (available if d is not positive).
func Snooze(d time.Duration) error { return &SnoozeError{Delay: max(d, 0)} }

// PermanentError is returned by Permanent.
type PermanentError struct {
	// Err is the error that failed the job.
	Err error
}

// Error returns the message of the wrapped error.
func (e *PermanentError) Error() string {
	if e.Err == nil {
		return "pgqueue: permanent failure"
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps an error for a handler to return when retrying cannot help (invalid input, a
// resource that is gone): the job ends failed at once, with err recorded, whatever attempts it
// has left. Permanent(nil) fails the job too.
func Permanent(err error) error { return &PermanentError{Err: err} }
