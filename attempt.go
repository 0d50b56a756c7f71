package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
)

// attemptState is where one claimed attempt of a job is in its life within a runtime. Every
// transition happens under runtime.mu, in the runtime's methods named after it:
//
//	waiting ──a slot of its queue freed──▶ running
//	waiting ──lock lost, or cancelled──▶ abandoned (forgotten; its handler never ran)
//	waiting ──Run ended──▶ finishing (handed back, uncharged)
//	running ──CompleteTx──▶ inTx ──statement failed or matched nothing──▶ running
//	running, inTx ──handler returned, or given up──▶ finishing ──settled──▶ (forgotten)
//	running, inTx ──lock lost, or cancelled──▶ abandoned (forgotten)
//	running, inTx ──still running after shutdown──▶ abandoned, its job handed back (then forgotten)
type attemptState int

const (
	// attemptRunning: the handler runs; heartbeats extend the lease.
	attemptRunning attemptState = iota
	// attemptInTx: the handler runs and completes the job in its own transaction with
	// Job.CompleteTx (the statement is under way, or succeeded). Until that transaction ends the
	// row is locked by it, and once it commits the row is gone: a missing row is then no lost
	// lock, and the lease is extended without waiting for the row.
	attemptInTx
	// attemptFinishing: the handler returned, or was given up after its JobTimeout; its outcome
	// waits for the completer, which may skip its row while another transaction locks it and
	// settle it later. Heartbeats extend its lease meanwhile.
	attemptFinishing
	// attemptAbandoned: the lock is gone, the job was cancelled, or it was handed back while its
	// handler still ran: whatever the handler returns is ignored.
	attemptAbandoned
	// attemptWaiting: claimed ahead of a free slot (queueRun.claimable), it waits in its
	// queue's line for the slot a running handler frees; heartbeats extend its lease.
	attemptWaiting
)

// attempt is one claimed attempt of a job, from its claim until its outcome is settled or it is
// abandoned.
type attempt struct {
	q           *queueRun
	id          ulid.ULID
	token       [16]byte
	attempt     int
	maxAttempts int
	watched     bool                        // the queue was watched when the job was claimed
	repeats     bool                        // the job has repeats left
	logger      atomic.Pointer[slog.Logger] // made by the first call of Logger in its handler

	// Set under runtime.mu when it starts (queueRun.begin), before its handler runs; then read
	// only.
	started  time.Time
	deadline time.Time // when its JobTimeout passes; zero without one
	cancel   context.CancelCauseFunc

	// ahead: claimed ahead of a free slot, its start not recorded by the claim: once it starts,
	// the completer records it (runtime.unrecorded).
	ahead bool

	// Guarded by runtime.mu.
	state    attemptState
	since    time.Time // waiting: since when, by the local clock
	row      *jobRow   // waiting: the row its handler gets
	prev     *attempt  // waiting: the job's previous attempt here, its outcome not yet reported
	leaseEnd time.Time // local, conservative estimate of lock_until
	stopped  error     // abandoned: why (ErrLockLost, ErrCancelled); nil if handed back
	xact     string    // the transaction CompleteTx completed the job in; "" if none
	nextRun  ulid.ULID // the next run CompleteTx enqueued in xact, if the job repeats
	released bool      // its slot was freed before its handler returned (given up)
	// forgotten: settled or abandoned, and no longer counted in its queue's held attempts.
	forgotten bool
	// reported: the event of its outcome has been emitted. Until then the EventStarted of a
	// newer attempt of the job, claimed as soon as this one's outcome was saved, waits in next,
	// so that a job's events come in the order of its attempts.
	reported bool
	next     []Event
}

// outcomeKind is what a finished attempt does to its job.
type outcomeKind int

const (
	outcomeDone    outcomeKind = iota // succeeded: complete it
	outcomeFailed                     // failed: record the error, retry or fail it
	outcomeRequeue                    // snoozed, or stopped by shutdown: back in line, attempt not charged
)

// outcome is a finished attempt on its way to the table.
type outcome struct {
	a       *attempt
	kind    outcomeKind
	err     error         // the attempt's error (outcomeFailed, or the snooze)
	final   bool          // outcomeFailed with no attempt left, or a PermanentError
	delay   time.Duration // outcomeRequeue: how long until it runs again
	elapsed time.Duration
	skips   int // how many settles skipped its row, locked by another transaction
}

// classify turns a handler's result into an outcome. cause is the cause of the handler's
// context, if it was cancelled.
func classify(a *attempt, err, cause error, elapsed time.Duration) outcome {
	o := outcome{a: a, err: err, elapsed: elapsed}
	var snooze *SnoozeError
	var permanent *PermanentError
	switch {
	case err == nil:
		o.kind = outcomeDone
	case errors.As(err, &snooze):
		o.kind, o.delay = outcomeRequeue, snooze.Delay
	case errors.Is(cause, ErrShutdown):
		// Interrupted by shutdown: back without charging the attempt. Whatever the handler
		// returned (usually the context's error) is dropped: with an error, the outcome would
		// be reported as a snooze.
		o.kind, o.err = outcomeRequeue, nil
	default:
		o.kind = outcomeFailed
		o.final = errors.As(err, &permanent) || a.attempt >= a.maxAttempts
		if errors.Is(cause, ErrJobTimeout) && !errors.Is(err, ErrJobTimeout) {
			o.err = fmt.Errorf("%w: %w", ErrJobTimeout, err)
		}
	}
	return o
}

// beginCompleteTx moves a running attempt to attemptInTx before its CompleteTx statement is
// sent, and reports whether it was running (else the attempt has lost its job).
func (rt *runtime) beginCompleteTx(a *attempt) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if a.state != attemptRunning {
		return false
	}
	a.state = attemptInTx
	return true
}

// endCompleteTx records how CompleteTx ended. With xact, the job was completed in that
// transaction, followed by its next run nextRun if it repeats (zero if none). Without (the
// statement failed, or matched no row), the attempt is running again: its transaction cannot
// commit the completion, so its lease and lock are checked as any other's and a takeover cancels
// its handler.
func (rt *runtime) endCompleteTx(a *attempt, xact string, nextRun ulid.ULID) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if a.state == attemptFinishing && a.released && xact != "" {
		// Given up past its JobTimeout while the statement ran: the outcome that waits for the
		// completer counts as completed if the transaction commits.
		a.xact, a.nextRun = xact, nextRun
		return
	}
	if a.state != attemptInTx {
		return // abandoned meanwhile (cancelled), or given up
	}
	if xact != "" {
		a.xact, a.nextRun = xact, nextRun
		return
	}
	a.state, a.xact = attemptRunning, ""
	if rt.cancelHeard[a.id] {
		// A cancellation of the job came while the statement ran, and the check it started
		// passed this attempt by, in its transaction then: check again, now that it runs.
		signal(rt.checkLeases)
	}
}
