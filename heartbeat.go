package pgqueue

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// heartbeatLoop extends the leases of the runtime's running jobs until ctx ends: every tick
// (the shortest HeartbeatInterval of its queues) those whose queue's interval has come round,
// and all of them at once when the listener reconnects, since a cancellation may have been
// announced while it was away, or when a cancellation message names a job held here: the rows
// say which attempts were cancelled. It also gives up handlers overdue past their JobTimeout.
func (rt *runtime) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(rt.heartbeatEvery)
	defer t.Stop()
	for {
		all := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-rt.checkLeases:
			all = true
		}
		rt.giveUpOverdue(time.Now())
		rt.heartbeat(ctx, all)
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
// completer). The caller holds rt.mu (leaseEnd).
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

// dueBeats returns the running, waiting and finishing attempts to extend now (all, or those
// whose queue's HeartbeatInterval has passed since their lease was last set, give or take a
// tick), and apart the attempts completed in their handler's transaction. A finishing attempt's
// outcome is usually settled long before that; one whose row a settle skipped (another
// transaction locks it) or that waits behind a failing settle keeps its lease this way, so that
// it is not taken back and run again while its outcome waits.
func (rt *runtime) dueBeats(now time.Time, all bool) (running, inTx beat) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var due, tx []*attempt
	for _, a := range rt.attempts {
		o := a.q.opts
		dueAt := a.leaseEnd.Add(o.HeartbeatInterval - o.LockDuration - rt.heartbeatEvery/2)
		switch {
		case a.state == attemptInTx:
			tx = append(tx, a)
		case (a.state == attemptRunning || a.state == attemptWaiting || a.state == attemptFinishing) &&
			(all || !now.Before(dueAt)):
			due = append(due, a)
		}
	}
	return newBeat(due), newBeat(tx)
}

// heartbeat extends, in one statement, the lease of every attempt due for it. A job whose row
// another transaction locks is left for the next beat. A running attempt the statement does not
// return lost its lock: its context is cancelled with ErrLockLost (ErrCancelled if the job was
// cancelled) and its outcome will be ignored. When the database cannot be reached, running
// attempts whose lease must have run out by now are given up the same way, since another process
// may already run them. Attempts whose handlers have returned are extended too, when their
// renewal comes due as a running one's would: their outcomes are mostly settled before that, but
// one whose row a settle skipped, or that waits behind failing settles, keeps its lease. Whether
// such an attempt still holds its job, the completer finds out. (A settle that meets a row the
// heartbeat holds for a moment skips it and settles it again 10 ms later.)
func (rt *runtime) heartbeat(ctx context.Context, all bool) {
	running, inTx := rt.dueBeats(time.Now(), all)
	if len(inTx.attempts) > 0 {
		rt.extendInTx(ctx, inTx)
	}
	if len(running.attempts) == 0 {
		return
	}
	// A slow heartbeat is given until the first of these leases runs out (and at least a
	// tick): cutting it off sooner would only give up jobs whose leases still hold.
	qctx, cancel := context.WithTimeout(ctx, max(rt.heartbeatEvery, time.Until(running.firstLeaseEnd)))
	defer cancel()
	sent := time.Now()
	held, err := rt.sendBeat(qctx, running)
	if err != nil {
		if ctx.Err() == nil {
			rt.reportError(queuesOf(running.attempts), "pgqueue: heartbeat", fmt.Errorf("pgqueue: heartbeat: %w", err))
		}
		rt.expireLeases(time.Now())
		return
	}
	var gone []*attempt
	rt.mu.Lock()
	for _, a := range running.attempts {
		switch {
		case rt.attempts[a.id] != a:
			// Settled or given up meanwhile, or claimed again: the entry is a newer attempt.
		case held.extended[a.id]:
			a.leaseEnd = sent.Add(a.q.opts.LockDuration)
			delete(rt.cancelHeard, a.id) // a late message, about an earlier attempt of the job
		case held.locked[a.id]:
			// Its row is locked for a moment: the next beat extends it.
		case a.state == attemptRunning || a.state == attemptWaiting:
			gone = append(gone, a)
		}
	}
	rt.mu.Unlock()
	if len(gone) > 0 {
		rt.giveUp(qctx, gone, attemptRunning)
	}
}

// beatResult is what the heartbeat statement said of the jobs of a beat that are still held
// under their tokens: extended, or skipped because another transaction locks the row.
type beatResult struct{ extended, locked map[ulid.ULID]bool }

// sendBeat runs the heartbeat statement for b.
func (rt *runtime) sendBeat(ctx context.Context, b beat) (beatResult, error) {
	held := beatResult{extended: map[ulid.ULID]bool{}, locked: map[ulid.ULID]bool{}}
	rows, err := rt.c.pool.Query(ctx, heartbeatSQL, b.ids, b.tokens, b.leaseMs)
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
func (rt *runtime) extendInTx(ctx context.Context, b beat) {
	qctx, cancel := context.WithTimeout(ctx, rt.heartbeatEvery)
	defer cancel()
	sent := time.Now()
	held, err := rt.sendBeat(qctx, b)
	if err != nil {
		if ctx.Err() == nil {
			rt.reportError(queuesOf(b.attempts), "pgqueue: heartbeat", fmt.Errorf("pgqueue: heartbeat: %w", err))
		}
		return
	}
	var others []*attempt
	rt.mu.Lock()
	for _, a := range b.attempts {
		switch {
		case rt.attempts[a.id] != a:
		case held.extended[a.id]:
			a.leaseEnd = sent.Add(a.q.opts.LockDuration)
			delete(rt.cancelHeard, a.id)
		default:
			others = append(others, a)
		}
	}
	rt.mu.Unlock()
	// Not extended: its transaction is open or committed, or holds the row for a moment (an
	// Update, a Cancel), or it rolled back and the job went to another attempt meanwhile. In
	// that last case the handler has lost the job.
	if taken := rt.lostAfterRollback(ctx, others); len(taken) > 0 {
		gctx, cancel := context.WithTimeout(ctx, rt.heartbeatEvery) // as every heartbeat statement
		defer cancel()
		rt.giveUp(gctx, taken, attemptInTx)
	}
}

// lostAfterRollback returns the attempts, of those whose handlers completed the job with
// Job.CompleteTx, whose transaction rolled back and whose job another attempt holds now. On an
// error it returns none, which leaves them as they were.
func (rt *runtime) lostAfterRollback(ctx context.Context, attempts []*attempt) []*attempt {
	var ids, tokens [][16]byte
	var xacts []string
	byID := map[ulid.ULID]*attempt{}
	rt.mu.Lock()
	for _, a := range attempts {
		if a.xact != "" {
			ids, tokens, xacts = append(ids, a.id), append(tokens, a.token), append(xacts, a.xact)
			byID[a.id] = a
		}
	}
	rt.mu.Unlock()
	if len(ids) == 0 {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, rt.heartbeatEvery)
	defer cancel()
	rows, _ := rt.c.pool.Query(qctx, lostAfterRollbackSQL, ids, tokens, xacts)
	lostIDs, err := pgx.CollectRows(rows, scanID)
	if err != nil {
		if ctx.Err() == nil {
			rt.reportError(queuesOf(attempts), "pgqueue: heartbeat",
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
// waiting: cancelled jobs with ErrCancelled, and deleted ones a cancellation message named (Delete
// with Cancel); the others (taken back after their lease ran out, re-claimed, deleted) with
// ErrLockLost.
func (rt *runtime) giveUp(ctx context.Context, gone []*attempt, state attemptState) {
	ids := make([][16]byte, len(gone))
	for i, a := range gone {
		ids[i] = a.id
	}
	cancelled := map[ulid.ULID]bool{} // of the jobs whose rows are still there
	rows, err := rt.c.pool.Query(ctx, lostStatusSQL, ids)
	if err == nil {
		var id ulid.ULID
		var status Status
		_, err = pgx.ForEachRow(rows, []any{(*[16]byte)(&id), &status}, func() error {
			cancelled[id] = status == StatusCancelled
			return nil
		})
	}
	if err != nil {
		rt.c.cfg.Logger.Warn("pgqueue: read the status of jobs whose lock was lost", "error", err)
	}
	var lost, stopped []*attempt
	rt.mu.Lock()
	for _, a := range gone {
		if rt.attempts[a.id] != a {
			continue
		}
		_, there := cancelled[a.id]
		switch {
		case a.state == attemptWaiting:
			rt.drop(a)
		case a.state != state:
		case cancelled[a.id], !there && rt.cancelHeard[a.id]: // deleted with Cancel
			stopped = append(stopped, rt.abandon(a, ErrCancelled))
		default:
			lost = append(lost, rt.abandon(a, ErrLockLost))
		}
	}
	rt.mu.Unlock()
	rt.reportCancelled(stopped)
	rt.reportLost(lost)
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
