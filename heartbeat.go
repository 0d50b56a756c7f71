package pgqueue

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// heartbeater keeps the leases of a runtime's attempts: one statement extends every lease due,
// whatever its queue. It gives up attempts whose lock is gone, and handlers overdue past their
// JobTimeout. It owns its tick: the shortest HeartbeatInterval of the runtime's queues.
type heartbeater struct {
	rt    *runtime
	every time.Duration
}

func newHeartbeater(rt *runtime) *heartbeater {
	h := &heartbeater{rt: rt}
	for _, q := range rt.queues {
		if h.every == 0 || q.opts.HeartbeatInterval < h.every {
			h.every = q.opts.HeartbeatInterval
		}
	}
	return h
}

// loop extends the leases of the runtime's running jobs until ctx ends: every tick those whose
// queue's interval has come round, and all of them at once when the listener reconnects, since a
// cancellation may have been announced while it was away, and at once those of jobs a
// cancellation message names: the rows say which attempts were cancelled. It also gives up handlers overdue
// past their JobTimeout.
func (h *heartbeater) loop(ctx context.Context) {
	t := time.NewTicker(h.every)
	defer t.Stop()
	for {
		woken := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.rt.w.beat:
			woken = true
		}
		h.giveUpOverdue(time.Now())
		h.beat(ctx, woken)
	}
}

// giveUpOverdue gives up the handlers overdue past their JobTimeout (attemptSet.giveUpOverdue),
// runs the attempts that start in their slots, and logs them.
func (h *heartbeater) giveUpOverdue(now time.Time) {
	tasks, overdue := h.rt.set.giveUpOverdue(now)
	h.rt.handlers.run(tasks)
	for _, a := range overdue {
		a.q.log.LogAttrs(context.Background(), slog.LevelError,
			"pgqueue: gave up a handler that ignores its context; its goroutine is left running",
			append(a.logAttrs(), slog.Duration("timeout", a.q.opts.JobTimeout))...)
	}
	if len(overdue) > 0 {
		h.rt.w.settle.signal()
		h.rt.w.freed.signal()
		h.rt.w.claim.signal()
	}
}

// beat is what one heartbeat sends: attempts in id order and, in the same order, the columns of
// the statement.
type beat struct {
	attempts      []*attempt
	ids, tokens   [][16]byte
	leaseMs       []int64
	firstLeaseEnd time.Time
}

// newBeat sorts attempts by id and makes their beat. Rows are locked in id order, as the
// completer locks them (the heartbeat skips rows others lock, so it never waits for the
// completer). The caller holds the set's lock (leaseEnd).
func newBeat(attempts []*attempt) beat {
	slices.SortFunc(attempts, func(x, y *attempt) int { return x.id.Compare(y.id) })
	b := beat{attempts: attempts, ids: make([][16]byte, len(attempts)), tokens: make([][16]byte, len(attempts)),
		leaseMs: make([]int64, len(attempts))}
	for i, a := range attempts {
		b.ids[i], b.tokens[i], b.leaseMs[i] = a.id, a.token, a.q.opts.LockDuration.Milliseconds()
		if b.firstLeaseEnd.IsZero() || a.leaseEnd.Before(b.firstLeaseEnd) {
			b.firstLeaseEnd = a.leaseEnd
		}
	}
	return b
}

// beat extends, in one statement, the lease of every attempt due for it (attemptSet.dueBeats). A
// job whose row another transaction locks is left for the next beat. A running attempt the
// statement does not return lost its lock: its context is cancelled with ErrLockLost
// (ErrCancelled if the job was cancelled) and its outcome will be ignored. When the database
// cannot be reached, running attempts whose lease must have run out by now are given up the same
// way, since another process may already run them. Attempts whose handlers have returned are
// extended too, when their renewal comes due as a running one's would: their outcomes are mostly
// settled before that, but one whose row a settle skipped, or that waits behind failing settles,
// keeps its lease. Whether such an attempt still holds its job, the completer finds out. (A
// settle that meets a row the heartbeat holds for a moment skips it and settles it again 10 ms
// later.)
func (h *heartbeater) beat(ctx context.Context, woken bool) {
	running, inTx := h.rt.set.dueBeats(time.Now(), woken, h.every)
	if len(inTx.attempts) > 0 {
		h.extendInTx(ctx, inTx)
	}
	if len(running.attempts) == 0 {
		return
	}
	// A slow heartbeat is given until the first of these leases runs out (and at least a tick):
	// cutting it off sooner would only give up jobs whose leases still hold.
	qctx, cancel := context.WithTimeout(ctx, max(h.every, time.Until(running.firstLeaseEnd)))
	defer cancel()
	sent := time.Now()
	held, err := h.send(qctx, running)
	if err != nil {
		if ctx.Err() == nil {
			h.rt.reportError(queuesOf(running.attempts), "pgqueue: heartbeat", fmt.Errorf("pgqueue: heartbeat: %w", err))
		}
		h.rt.reportLost(h.rt.set.expire(time.Now()))
		return
	}
	if gone := h.rt.set.extended(running, held, sent); len(gone) > 0 {
		h.giveUp(qctx, gone, attemptRunning)
	}
}

// beatResult is what the heartbeat statement said of the jobs of a beat that are still held
// under their tokens: extended, or skipped because another transaction locks the row.
type beatResult struct{ extended, locked map[ulid.ULID]bool }

// send runs the heartbeat statement for b.
func (h *heartbeater) send(ctx context.Context, b beat) (beatResult, error) {
	held := beatResult{extended: map[ulid.ULID]bool{}, locked: map[ulid.ULID]bool{}}
	rows, err := h.rt.c.pool.Query(ctx, heartbeatSQL, b.ids, b.tokens, b.leaseMs)
	if err != nil {
		return held, err
	}
	var id ulid.ULID
	var extended bool
	_, err = pgx.ForEachRow(rows, []any{(*[16]byte)(&id), &extended}, func() error {
		if extended {
			held.extended[id] = true
		} else {
			held.locked[id] = true
		}
		return nil
	})
	return held, err
}

// extendInTx extends the leases of running attempts whose handlers completed the job in a
// transaction of their own (Job.CompleteTx), without waiting for rows such a transaction still
// locks. A job whose transaction committed needs no lease any more; one whose transaction rolled
// back is the handler's again, and without this its lease would run out while the handler runs
// and another process would run it a second time. An attempt the statement does not extend is
// given up only if its transaction rolled back and its row no longer holds its token (another
// attempt holds the job, or it was cancelled); otherwise the completer settles it when its
// handler returns.
func (h *heartbeater) extendInTx(ctx context.Context, b beat) {
	qctx, cancel := context.WithTimeout(ctx, h.every)
	defer cancel()
	sent := time.Now()
	held, err := h.send(qctx, b)
	if err != nil {
		if ctx.Err() == nil {
			h.rt.reportError(queuesOf(b.attempts), "pgqueue: heartbeat", fmt.Errorf("pgqueue: heartbeat: %w", err))
		}
		return
	}
	// Not extended: its transaction is open or committed, or holds the row for a moment (an
	// Update, a Cancel), or it rolled back and the job went to another attempt meanwhile. In
	// that last case the handler has lost the job.
	others := h.rt.set.extendedInTx(b, held, sent)
	if taken := h.lostAfterRollback(ctx, others); len(taken) > 0 {
		gctx, cancel := context.WithTimeout(ctx, h.every) // as every heartbeat statement
		defer cancel()
		h.giveUp(gctx, taken, attemptInTx)
	}
}

// lostAfterRollback returns the attempts, of those whose handlers completed the job with
// Job.CompleteTx, whose transaction rolled back and whose job another attempt holds now. On an
// error it returns none, which leaves them as they were.
func (h *heartbeater) lostAfterRollback(ctx context.Context, attempts []*attempt) []*attempt {
	ids, tokens, xacts, byID := h.rt.set.xacts(attempts)
	if len(ids) == 0 {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, h.every)
	defer cancel()
	rows, _ := h.rt.c.pool.Query(qctx, lostAfterRollbackSQL, ids, tokens, xacts)
	lostIDs, err := pgx.CollectRows(rows, scanID)
	if err != nil {
		if ctx.Err() == nil {
			h.rt.reportError(queuesOf(attempts), "pgqueue: heartbeat",
				fmt.Errorf("pgqueue: heartbeat: transaction status: %w", err))
		}
		return nil
	}
	lost := make([]*attempt, 0, len(lostIDs))
	for _, id := range lostIDs {
		lost = append(lost, byID[id])
	}
	return lost
}

// giveUp abandons attempts whose lock is gone, if they are still in state (running, or inTx), or
// waiting, as attemptSet.lose says, after reading which of their jobs were cancelled.
func (h *heartbeater) giveUp(ctx context.Context, gone []*attempt, state attemptState) {
	ids := make([][16]byte, len(gone))
	for i, a := range gone {
		ids[i] = a.id
	}
	cancelled := map[ulid.ULID]bool{} // of the jobs whose rows are still there
	rows, err := h.rt.c.pool.Query(ctx, lostStatusSQL, ids)
	if err == nil {
		var id ulid.ULID
		var status Status
		_, err = pgx.ForEachRow(rows, []any{(*[16]byte)(&id), &status}, func() error {
			cancelled[id] = status == StatusCancelled
			return nil
		})
	}
	if err != nil {
		h.rt.c.cfg.Logger.Warn("pgqueue: read the status of jobs whose lock was lost", "error", err)
	}
	lost, stopped := h.rt.set.lose(gone, state, cancelled)
	h.rt.reportCancelled(stopped)
	h.rt.reportLost(lost)
}

// queuesOf returns the distinct queues of attempts.
func queuesOf(attempts []*attempt) []*queueRun {
	var qs []*queueRun
	for _, a := range attempts {
		if !slices.Contains(qs, a.q) {
			qs = append(qs, a.q)
		}
	}
	return qs
}
