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

// attemptState is where one claimed attempt of a job is in its life within a runtime: one state,
// from which the attempt set derives what it counts (attemptSet.move). Every transition is a
// method of the attempt set (attempts.go), under its lock:
//
//	waiting ──a slot of its queue freed──▶ running
//	waiting ──lock lost──▶ done (dropped: its handler never ran)
//	waiting ──waited too long, paused, near its MaxRunning, Run ended──▶ finishing (handed back)
//	running ──CompleteTx──▶ inTx ──statement failed or matched nothing──▶ running
//	running, inTx ──handler returned──▶ finishing ──settled──▶ done
//	running, inTx ──overdue past its JobTimeout, or stuck at shutdown──▶ givenUp
//	givenUp ──handler returned──▶ finishing;  givenUp ──settled──▶ orphaned ──handler returned──▶ done
//	running, inTx ──lock lost, or cancelled──▶ abandoned ──handler returned──▶ done
type attemptState int

const (
	// attemptNew: made from a claimed row, not yet in the set.
	attemptNew attemptState = iota
	// attemptWaiting: claimed ahead of a free slot (claimer.claimable), it waits in its queue's
	// line for the slot a running handler frees; heartbeats extend its lease.
	attemptWaiting
	// attemptRunning: the handler runs in a slot; heartbeats extend the lease.
	attemptRunning
	// attemptInTx: the handler runs and completes the job in its own transaction with
	// Job.CompleteTx (the statement is under way, or succeeded). Until that transaction ends the
	// row is locked by it, and once it commits the row is gone: a missing row is then no lost
	// lock, and the lease is extended without waiting for the row.
	attemptInTx
	// attemptFinishing: the handler returned (or never started: the job was handed back); its
	// outcome waits for the completer, which may skip its row while another transaction locks it
	// and settle it later. Heartbeats extend its lease meanwhile.
	attemptFinishing
	// attemptGivenUp: the handler still runs, but its slot was freed and its outcome waits for
	// the completer: it ran past its JobTimeout and ShutdownTimeout, or still ran when shutdown
	// gave up on it. Whatever it returns is ignored.
	attemptGivenUp
	// attemptOrphaned: given up, and its outcome settled; its handler still runs.
	attemptOrphaned
	// attemptAbandoned: the lock is gone or the job was cancelled while the handler ran; it
	// keeps its slot until it returns, and whatever it returns is ignored.
	attemptAbandoned
	// attemptDone: nothing is left of it: settled and its handler returned, dropped, or
	// abandoned and returned.
	attemptDone
)

// holdsSlot reports whether an attempt in s takes one of its queue's slots: its handler runs,
// counted against Concurrency.
func (s attemptState) holdsSlot() bool {
	return s == attemptRunning || s == attemptInTx || s == attemptAbandoned
}

// held reports whether an attempt in s holds its job: claimed and neither settled nor abandoned.
// The set knows it by its id, and the claims count it (claimer.claimable).
func (s attemptState) held() bool {
	switch s {
	case attemptWaiting, attemptRunning, attemptInTx, attemptFinishing, attemptGivenUp:
		return true
	}
	return false
}

// released reports whether an attempt in s has a handler that still runs without a slot.
func (s attemptState) released() bool { return s == attemptGivenUp || s == attemptOrphaned }

// running reports whether an attempt in s runs in its slot and holds its job.
func (s attemptState) running() bool { return s == attemptRunning || s == attemptInTx }

// unreported reports whether the outcome of an attempt in s waits for the completer: the event
// of a newer attempt of its job waits for that outcome's (attempt.next).
func (s attemptState) unreported() bool { return s == attemptFinishing || s == attemptGivenUp }

// attempt is one claimed attempt of a job, from its claim until nothing is left of it.
type attempt struct {
	q           *queueRun
	id          ulid.ULID
	token       [16]byte
	attempt     int
	maxAttempts int
	watched     bool                        // the queue was watched when the job was claimed
	repeats     bool                        // the job has repeats left
	inWorkflow  bool                        // the job is a step of a workflow: kept when it completes
	result      atomic.Pointer[string]      // what its handler recorded (Job.SetResult), as JSON
	ahead       bool                        // claimed ahead of a free slot: its start is recorded when it starts
	rated       bool                        // its start was logged for a rate: reported once its handler starts
	logger      atomic.Pointer[slog.Logger] // made by the first call of Logger in its handler

	// Set under the set's lock when it starts (attemptSet.begin), before its handler runs; then
	// read only.
	started  time.Time
	deadline time.Time // when its JobTimeout passes; zero without one
	cancel   context.CancelCauseFunc

	// Guarded by the set's lock.
	state    attemptState
	since    time.Time // waiting: since when, by the local clock
	row      *jobRow   // waiting: the row its handler gets
	prev     *attempt  // waiting: the job's previous attempt here, its outcome not yet reported
	leaseEnd time.Time // local, conservative estimate of lock_until
	stopped  error     // abandoned: why (ErrLockLost, ErrCancelled)
	xact     string    // the transaction CompleteTx completed the job in; "" if none
	nextRun  ulid.ULID // the next run CompleteTx enqueued in xact, if the job repeats
	// next holds the events of a newer attempt of the job, claimed as soon as this one's outcome
	// was saved, until this one's outcome is reported, so that a job's events come in the order
	// of its attempts.
	next []Event
}

// newAttempt makes the attempt of a row claimed for q, under a lease until leaseEnd.
func newAttempt(q *queueRun, r *jobRow, leaseEnd time.Time) *attempt {
	return &attempt{
		q:           q,
		id:          r.id,
		token:       r.token,
		attempt:     r.attempt,
		maxAttempts: r.maxAttempts,
		watched:     r.watched,
		repeats:     r.repeatRemaining != 0,
		inWorkflow:  r.workflow != nil,
		ahead:       r.ahead,
		cancel:      func(error) {},
		state:       attemptNew,
		leaseEnd:    leaseEnd,
		row:         r,
	}
}

// keep reports whether a's job stays in the table, completed, when it succeeds: its queue keeps
// completed jobs, or it is a step of a workflow, kept with its result until the workflow has
// finished.
func (a *attempt) keep() bool { return a.q.keep || a.inWorkflow }

// resultArg is the attempt's result as the complete statements bind it: nil (NULL) if none.
func (a *attempt) resultArg() *string { return a.result.Load() }

// logAttrs are the attributes of every log line about a's job.
func (a *attempt) logAttrs() []slog.Attr {
	return []slog.Attr{slog.String("job_id", a.id.String()), slog.Int("attempt", a.attempt),
		slog.Int("max_attempts", a.maxAttempts)}
}

// event returns an event of kind about a's job, which ran for elapsed.
func (a *attempt) event(kind EventKind, elapsed time.Duration) Event {
	return Event{Kind: kind, JobID: a.id, Attempt: a.attempt, MaxAttempts: a.maxAttempts, Elapsed: elapsed}
}

// outcomeKind is what a finished attempt does to its job.
type outcomeKind int

const (
	outcomeDone    outcomeKind = iota // succeeded: complete it
	outcomeFailed                     // failed: record the error, retry or fail it
	outcomeRequeue                    // snoozed, stopped by shutdown, or never started: back in line, attempt not charged
)

// outcome is a finished attempt on its way to the table.
type outcome struct {
	a       *attempt
	kind    outcomeKind
	err     error         // the attempt's error (outcomeFailed, or the snooze)
	final   bool          // outcomeFailed with no attempt left, or a PermanentError
	delay   time.Duration // outcomeRequeue: how long until it runs again
	ran     bool          // its handler started (a requeue of one that did not leaves its start unrecorded)
	elapsed time.Duration
	skips   int // how many settles skipped its row, locked by another transaction
}

// classify turns a handler's result into an outcome. cause is the cause of the handler's
// context, if it was cancelled.
func classify(a *attempt, err, cause error, elapsed time.Duration) outcome {
	o := outcome{a: a, err: err, elapsed: elapsed, ran: true}
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
