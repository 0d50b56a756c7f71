package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// completeLoop settles finished attempts in the table until ctx ends, then settles what is
// left once more. It batches by group commit: while one settle statement runs, the outcomes
// that arrive meanwhile gather and go together in the next, so a busy worker writes many
// results per round trip and an idle one adds no delay.
func (e *engine) completeLoop(ctx context.Context) {
	failures := 0
	for {
		batch := e.takeOutcomes()
		if len(batch) == 0 {
			select {
			case <-ctx.Done():
				e.finalSettle()
				return
			case <-e.settle:
				continue
			}
		}
		if err := e.settleOutcomes(ctx, batch); err != nil {
			e.putBackOutcomes(batch)
			if ctx.Err() != nil {
				e.finalSettle()
				return
			}
			failures++
			e.reportError("pgqueue: settle finished jobs", err)
			if !sleepCtx(ctx, retryDelay(failures)) {
				e.finalSettle()
				return
			}
			continue
		}
		failures = 0
	}
}

// finalSettle makes one last attempt, within ShutdownTimeout, to settle what is left. Jobs it
// cannot settle stay running in the table until their leases run out and another worker takes
// them back: they are not lost.
func (e *engine) finalSettle() {
	batch := e.takeOutcomes()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.ShutdownTimeout)
	defer cancel()
	if err := e.settleOutcomes(ctx, batch); err != nil {
		e.reportError("pgqueue: settle finished jobs at shutdown; they will be taken back when their leases run out", err)
	}
}

func (e *engine) takeOutcomes() []outcome {
	e.mu.Lock()
	defer e.mu.Unlock()
	batch := e.outcomes
	e.outcomes = nil
	return batch
}

func (e *engine) putBackOutcomes(batch []outcome) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.outcomes = append(batch, e.outcomes...)
}

// settleArgs are the columns of one batch, as the settle statements take them.
type settleArgs struct {
	doneIDs, doneTokens                 [][16]byte
	repeatIDs, repeatTokens, repeatNext [][16]byte // succeeded jobs that may repeat

	failIDs, failTokens [][16]byte
	failDelays          []int64 // µs
	failFinal           []bool
	failErrors          []string
	failStacks          []string

	backIDs, backTokens [][16]byte
	backDelays          []int64 // µs

	// Succeeded jobs their handlers completed with Job.CompleteTx, and the transactions.
	inTxIDs, inTxTokens [][16]byte
	inTxXacts           []string
}

// settled is what the table says became of one job of a batch.
type settled struct {
	status Status    // status after a failure or a requeue; StatusCompleted for a success
	runAt  time.Time // when it runs next (retry, requeue)
	repeat ulid.ULID // the next run of a repeating job; zero if none
}

// settleOutcomes writes a batch of outcomes in one round trip: succeeded jobs are completed
// (deleted or kept, and followed by their next run if they repeat), failed attempts are recorded
// and retried or failed, and snoozed jobs or jobs interrupted by shutdown go back in line. Every
// statement matches on (id, lock_token), so an outcome whose lock was lost changes nothing; it is
// reported as EventLockLost.
func (e *engine) settleOutcomes(ctx context.Context, batch []outcome) error {
	// Lock rows in id order, as the heartbeat does.
	slices.SortFunc(batch, func(a, b outcome) int { return a.job.id.Compare(b.job.id) })
	var a settleArgs
	for _, o := range batch {
		id, token := [16]byte(o.job.id), o.job.token
		switch o.kind {
		case outcomeDone:
			if x := o.job.completeXact.Load(); x != nil && o.job.completedInTx.Load() {
				a.inTxIDs, a.inTxTokens = append(a.inTxIDs, id), append(a.inTxTokens, token)
				a.inTxXacts = append(a.inTxXacts, *x)
			}
			if o.job.repeats {
				a.repeatIDs, a.repeatTokens = append(a.repeatIDs, id), append(a.repeatTokens, token)
			} else {
				a.doneIDs, a.doneTokens = append(a.doneIDs, id), append(a.doneTokens, token)
			}
		case outcomeRequeue:
			a.backIDs, a.backTokens = append(a.backIDs, id), append(a.backTokens, token)
			a.backDelays = append(a.backDelays, o.delay.Microseconds())
		case outcomeFailed:
			a.failIDs, a.failTokens = append(a.failIDs, id), append(a.failTokens, token)
			a.failDelays = append(a.failDelays, e.opts.RetryBackoff.Delay(o.job.attempt).Microseconds())
			a.failFinal = append(a.failFinal, o.final)
			msg, stack := describeError(o.err)
			a.failErrors, a.failStacks = append(a.failErrors, msg), append(a.failStacks, stack)
		}
	}
	for _, id := range e.c.ids.next(len(a.repeatIDs)) {
		a.repeatNext = append(a.repeatNext, id) // ids for the next runs
	}

	keep := e.c.cfg.retentionOf(e.queue).Completed != 0
	b := &pgx.Batch{}
	if len(a.doneIDs) > 0 {
		if keep {
			b.Queue(completeKeepSQL, a.doneIDs, a.doneTokens)
		} else {
			b.Queue(completeSQL, a.doneIDs, a.doneTokens)
		}
	}
	if len(a.repeatIDs) > 0 {
		b.Queue(completeRepeatSQL, a.repeatIDs, a.repeatTokens, a.repeatNext, keep)
	}
	if len(a.failIDs) > 0 {
		b.Queue(failSQL, a.failIDs, a.failTokens, a.failDelays, a.failFinal, a.failErrors, a.failStacks, maxErrorsKept)
	}
	if len(a.backIDs) > 0 {
		b.Queue(requeueSQL, a.backIDs, a.backTokens, a.backDelays, e.queue)
	}
	if len(a.inTxIDs) > 0 {
		// After the statements above, which wait for any of those transactions still open.
		b.Queue(lostAfterRollbackSQL, a.inTxIDs, a.inTxTokens, a.inTxXacts)
	}
	// A statement under way is not interrupted: its effect would be unknown.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.LockDuration)
	defer cancel()
	br := e.c.pool.SendBatch(qctx, b)
	defer br.Close()

	results := make(map[ulid.ULID]settled, len(batch))
	if len(a.doneIDs) > 0 {
		rows, _ := br.Query()
		ids, err := pgx.CollectRows(rows, scanID)
		if err != nil {
			return fmt.Errorf("pgqueue: complete: %w", err)
		}
		for _, id := range ids {
			results[id] = settled{status: StatusCompleted}
		}
	}
	if len(a.repeatIDs) > 0 {
		rows, _ := br.Query()
		var id ulid.ULID
		var next *[16]byte
		_, err := pgx.ForEachRow(rows, []any{(*[16]byte)(&id), &next}, func() error {
			r := settled{status: StatusCompleted}
			if next != nil {
				r.repeat = *next
			}
			results[id] = r
			return nil
		})
		if err != nil {
			return fmt.Errorf("pgqueue: complete: %w", err)
		}
	}
	if len(a.failIDs) > 0 {
		if err := collectMoved(br, results); err != nil {
			return fmt.Errorf("pgqueue: fail: %w", err)
		}
	}
	if len(a.backIDs) > 0 {
		if err := collectMoved(br, results); err != nil {
			return fmt.Errorf("pgqueue: requeue: %w", err)
		}
	}
	var rolledBack []ulid.ULID
	if len(a.inTxIDs) > 0 {
		rows, _ := br.Query()
		var err error
		if rolledBack, err = pgx.CollectRows(rows, scanID); err != nil {
			return fmt.Errorf("pgqueue: complete: transaction status: %w", err)
		}
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("pgqueue: settle: %w", err)
	}
	// A job completed in the handler's transaction has no row left to match, unless that
	// transaction rolled back and another attempt has the job now: then this one lost it.
	for _, id := range rolledBack {
		if _, ok := results[id]; !ok {
			for _, o := range batch {
				if o.job.id == id {
					o.job.completedInTx.Store(false)
				}
			}
		}
	}

	// Events first: EventDrained, which the fetch loop may emit once the jobs are gone, must
	// follow the events of the jobs it covers.
	e.report(ctx, batch, results)
	e.mu.Lock()
	for _, o := range batch {
		// Unless the job was claimed again meanwhile: then the entry is its newer attempt.
		if e.jobs[o.job.id] == o.job {
			delete(e.jobs, o.job.id)
		}
	}
	e.mu.Unlock()
	signal(e.freed)
	return nil
}

// collectMoved reads the (id, status, run_at) rows of fail.sql or requeue.sql into results.
func collectMoved(br pgx.BatchResults, results map[ulid.ULID]settled) error {
	rows, _ := br.Query()
	var id ulid.ULID
	var r settled
	_, err := pgx.ForEachRow(rows, []any{(*[16]byte)(&id), &r.status, &r.runAt}, func() error {
		results[id] = r
		return nil
	})
	return err
}

// report emits the events of a settled batch, wakes this worker for jobs it put back in line,
// and tells watchers (if the queue was watched when the jobs were claimed).
func (e *engine) report(ctx context.Context, batch []outcome, results map[ulid.ULID]settled) {
	var completed, retrying, failed []ulid.ULID
	watched := false
	for _, o := range batch {
		j := o.job
		watched = watched || j.watched
		r, ok := results[j.id]
		ev := Event{JobID: j.id, Attempt: j.attempt, Elapsed: o.elapsed}
		switch {
		case o.kind == outcomeDone && (ok || j.completedInTx.Load()):
			// A job completed in the handler's transaction has no row left to match.
			ev.Kind, ev.RepeatedAs = EventCompleted, r.repeat
			completed = append(completed, j.id)
			if r.repeat != (ulid.ULID{}) {
				signal(e.scheduled)
				signal(e.available)
			}
		case !ok:
			ev.Kind = EventLockLost
			e.log.Warn("pgqueue: lost the lock of a job before its outcome was saved; the outcome is ignored",
				"job", j.id, "attempt", j.attempt)
		case o.kind == outcomeRequeue && o.err == nil:
			continue // handed back at shutdown
		case o.kind == outcomeRequeue:
			ev.Kind, ev.RunAt = EventSnoozed, r.runAt
		case r.status == StatusFailed:
			ev.Kind, ev.Err = EventFailed, o.err
			failed = append(failed, j.id)
			e.log.Warn("pgqueue: job failed", "job", j.id, "attempt", j.attempt, "error", o.err)
		default:
			ev.Kind, ev.Err, ev.RunAt = EventRetrying, o.err, r.runAt
			retrying = append(retrying, j.id)
		}
		if ok && r.status == StatusAvailable {
			signal(e.available)
		} else if ok && r.status == StatusScheduled {
			signal(e.scheduled)
		}
		e.emit(ev)
	}
	if watched {
		e.announce(ctx, msgCompleted, completed)
		e.announce(ctx, msgRetrying, retrying)
		e.announce(ctx, msgFailed, failed)
	}
}

func scanID(r pgx.CollectableRow) (ulid.ULID, error) {
	var id ulid.ULID
	err := r.Scan((*[16]byte)(&id))
	return id, err
}

// describeError returns the message and, for a panic, the stack to record for a failed
// attempt, made storable: valid UTF-8 without NUL bytes (which Postgres text cannot hold), and
// bounded in size.
func describeError(err error) (msg, stack string) {
	msg = err.Error()
	var p *PanicError
	if errors.As(err, &p) {
		stack = p.Stack
	}
	return storable(msg, maxErrorBytes), storable(stack, maxStackBytes)
}

func storable(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return s
}
