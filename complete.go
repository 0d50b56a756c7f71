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
	doneIDs, doneTokens [][16]byte

	failIDs, failTokens [][16]byte
	failDelays          []int64 // µs
	failFinal           []bool
	failErrors          []string
	failStacks          []string

	backIDs, backTokens [][16]byte
}

// settleOutcomes writes a batch of outcomes in one round trip: succeeded jobs are deleted,
// failed attempts are recorded and retried or failed, and jobs interrupted by shutdown are
// handed back. Every statement matches on (id, lock_token), so an outcome whose lock was lost
// changes nothing; it is reported as EventLockLost.
func (e *engine) settleOutcomes(ctx context.Context, batch []outcome) error {
	// Lock rows in id order, as the heartbeat does.
	slices.SortFunc(batch, func(a, b outcome) int { return a.job.id.Compare(b.job.id) })
	var a settleArgs
	for _, o := range batch {
		id, token := [16]byte(o.job.id), o.job.token
		switch {
		case o.handback:
			a.backIDs, a.backTokens = append(a.backIDs, id), append(a.backTokens, token)
		case o.err == nil:
			a.doneIDs, a.doneTokens = append(a.doneIDs, id), append(a.doneTokens, token)
		default:
			a.failIDs, a.failTokens = append(a.failIDs, id), append(a.failTokens, token)
			a.failDelays = append(a.failDelays, e.opts.RetryBackoff.Delay(o.job.attempt).Microseconds())
			a.failFinal = append(a.failFinal, o.final)
			msg, stack := describeError(o.err)
			a.failErrors, a.failStacks = append(a.failErrors, msg), append(a.failStacks, stack)
		}
	}

	b := &pgx.Batch{}
	if len(a.doneIDs) > 0 {
		b.Queue(completeSQL, a.doneIDs, a.doneTokens)
	}
	if len(a.failIDs) > 0 {
		b.Queue(retrySQL, a.failIDs, a.failTokens, a.failDelays, a.failFinal, a.failErrors, a.failStacks, maxErrorsKept)
	}
	if len(a.backIDs) > 0 {
		b.Queue(handbackSQL, a.backIDs, a.backTokens, e.queue)
	}
	// A statement under way is not interrupted: its effect would be unknown.
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.LockDuration)
	defer cancel()
	br := e.c.pool.SendBatch(qctx, b)
	defer br.Close()

	completed := make(map[ulid.ULID]bool, len(a.doneIDs))
	if len(a.doneIDs) > 0 {
		rows, _ := br.Query()
		ids, err := pgx.CollectRows(rows, scanID)
		if err != nil {
			return fmt.Errorf("pgqueue: complete: %w", err)
		}
		for _, id := range ids {
			completed[id] = true
		}
	}
	type retried struct {
		status Status
		runAt  time.Time
	}
	failed := make(map[ulid.ULID]retried, len(a.failIDs))
	if len(a.failIDs) > 0 {
		rows, _ := br.Query()
		var id ulid.ULID
		var r retried
		_, err := pgx.ForEachRow(rows, []any{(*[16]byte)(&id), &r.status, &r.runAt}, func() error {
			failed[id] = r
			return nil
		})
		if err != nil {
			return fmt.Errorf("pgqueue: retry: %w", err)
		}
	}
	if len(a.backIDs) > 0 {
		var n, notified int
		if err := br.QueryRow().Scan(&n, &notified); err != nil {
			return fmt.Errorf("pgqueue: hand back: %w", err)
		}
		e.log.Info("pgqueue: handed unfinished jobs back to the queue", "jobs", n)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("pgqueue: settle: %w", err)
	}

	e.mu.Lock()
	for _, o := range batch {
		delete(e.jobs, o.job.id)
	}
	e.mu.Unlock()
	signal(e.freed)

	for _, o := range batch {
		j := o.job
		ev := Event{JobID: j.id, Attempt: j.attempt, Elapsed: o.elapsed, Err: o.err}
		switch r, ok := failed[j.id]; {
		case o.handback:
			continue
		case o.err == nil && completed[j.id]:
			ev.Kind = EventCompleted
		case ok && r.status == StatusFailed:
			ev.Kind = EventFailed
			e.log.Warn("pgqueue: job failed", "job", j.id, "attempt", j.attempt, "error", o.err)
		case ok:
			ev.Kind, ev.RunAt = EventRetrying, r.runAt
			if r.status == StatusAvailable {
				signal(e.available)
			} else {
				signal(e.scheduled)
			}
		default:
			ev.Kind, ev.Err = EventLockLost, nil
			e.log.Warn("pgqueue: lost the lock of a job before its outcome was saved; the outcome is ignored",
				"job", j.id, "attempt", j.attempt)
		}
		e.emit(ev)
	}
	return nil
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
