package pgqueue

import (
	"context"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// queueRun is one queue of a runtime: its worker's options and handler, fixed for the Run, and
// the signals by which the listener and the runtime's parts say what they want done for it. What
// each part keeps of the queue is the part's own (attemptSet's slots, the claimer's claim state,
// the maintainer's due times), indexed by index.
type queueRun struct {
	rt     *runtime
	index  int // in the runtime's queues, which are in name order
	name   string
	opts   WorkerOptions
	exec   func(context.Context, *jobRow, *attempt) error
	log    *slog.Logger
	events *emitter
	sub    *subscription
	keep   bool // retention keeps completed jobs

	wantClaim   atomic.Bool   // it may have available jobs: claim when a slot is free
	wantPromote atomic.Bool   // it may have due scheduled jobs, or a new next due time
	wantMove    atomic.Bool   // the last move into the history took a full batch: go again
	rescueAt    atomic.Int64  // unix ns after which to look for expired leases; 0: at the poll
	wantLimits  atomic.Bool   // its limits may have changed: read whether it has any
	way         atomic.Uint32 // a claimWay: how its limits have it claimed
	rated       atomic.Bool   // it has a rate limit: rate_wait.sql follows its claims
	// watchedUntil is the unix ns until which a Watch of it was last heard to be open (msgWatched,
	// or its row at a poll: queue_flags.sql): the outcomes of jobs claimed before it began are
	// announced too.
	watchedUntil atomic.Int64
	// paused: a pause of it was heard (msgPaused, or its row at a poll): none of its jobs starts
	// here, and those claimed go back. pauseHeard counts the pause and resume messages heard, so
	// that a read of its row sent before one of them does not undo it (maintainer.readPaused).
	paused     atomic.Bool
	pauseHeard atomic.Uint64
	// mark: where in line jobs were made available since the claimer last looked (floor.go).
	mark lineMark
}

// onMessage handles the listener's messages about q. It runs on the listener's goroutine, so it
// only records what is wanted and wakes the parts that do it; it never calls user code nor waits
// for I/O.
func (q *queueRun) onMessage(m message) {
	rt := q.rt
	switch m.kind {
	case msgAvailable:
		if !m.wakeOnly {
			q.mark.note(m.place, m.placed)
		}
		q.wantClaim.Store(true)
		rt.w.claim.signal()
		rt.w.express.signal()
	case msgResumed:
		q.pauseHeard.Add(1)
		q.paused.Store(false)
		q.wantClaim.Store(true)
		rt.w.claim.signal()
	case msgPaused:
		q.pauseHeard.Add(1)
		q.paused.Store(true)
		rt.set.handBackWaiting(q)
	case msgScheduled:
		q.wantPromote.Store(true)
		rt.w.maintain.signal()
	case msgLimits:
		// Whether it has limits decides how it is claimed; new limits may leave room.
		q.wantLimits.Store(true)
		q.wantClaim.Store(true)
		rt.w.maintain.signal()
		rt.w.claim.signal()
	case msgCancelled, msgDeleted:
		if m.kind == msgCancelled && rt.set.noteCancelled(q, m.ids) {
			// The heartbeat looks at once at the leases of the attempts of q among ids: it stops
			// those whose rows the canceller settled (ErrCancelled). They are not stopped here:
			// the message names jobs, not attempts, and may arrive after the job was retried and
			// claimed again here, whose new attempt holds it and must go on.
			rt.w.beat.signal()
		}
		if claimWay(q.way.Load()) != claimPlain {
			// A job that ends by a cancel or a delete may free a place under the queue's limits
			// (a running job's, or a key's held by a job waiting for its retry), and no settle of
			// it will say so.
			q.wantClaim.Store(true)
			rt.w.claim.signal()
		}
	case msgWatched:
		q.heardWatched(time.Now().Add(watchTTL))
	case msgListening, msgResync:
		// Notifications sent before the LISTEN took effect, or while the listener was away,
		// were not heard: look at the queue again, and at the leases (a job may have been
		// cancelled meanwhile). Jobs may have been made available anywhere in line.
		q.mark.note(linePos{}, false)
		q.wantClaim.Store(true)
		q.wantPromote.Store(true)
		q.wantLimits.Store(true)
		rt.w.claim.signal()
		rt.w.maintain.signal()
		rt.set.beatEverything()
		rt.w.beat.signal()
		if m.kind == msgResync {
			rt.w.reconnected.signal() // the database is back: retry a failed claim now
		}
	}
}

// logsStarts reports whether q's claims log their starts for a rate limit (claim_limited.sql),
// which hold their places until the worker reports that the handlers started.
func (q *queueRun) logsStarts() bool {
	return claimWay(q.way.Load()) == claimLimited && q.rated.Load()
}

// call runs the worker's middleware and handler, turning a panic anywhere in them into a
// *PanicError.
func (q *queueRun) call(ctx context.Context, r *jobRow, a *attempt) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return q.exec(ctx, r, a)
}

// logJob writes one of the worker's log lines about a single job, at its JobLogLevel, with the
// job's id and attempts (the logger names the queue). A disabled level costs one Enabled call.
func (q *queueRun) logJob(a *attempt, msg string, attrs ...slog.Attr) {
	level := q.opts.JobLogLevel.Level()
	if !q.log.Enabled(context.Background(), level) {
		return
	}
	q.log.LogAttrs(context.Background(), level, msg, append(a.logAttrs(), attrs...)...)
}
