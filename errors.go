package pgqueue

import (
	"errors"
	"fmt"
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

// PanicError is the error recorded for an attempt whose handler panicked. The worker recovers
// the panic, records the value and the stack in the job's errors, and retries the job like any
// other failed attempt.
type PanicError struct {
	// Value is what the handler passed to panic.
	Value any
	// Stack is the goroutine's stack at the panic.
	Stack string
}

// Error describes the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }
