package pgqueue

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// heartbeatLoop extends the leases of the worker's running jobs every HeartbeatInterval until
// ctx ends, and at once when the listener reconnects: a cancellation may have been announced
// while it was away.
func (e *engine) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(e.opts.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-e.checkLeases:
		}
		e.giveUpOverdue(time.Now())
		e.heartbeat(ctx)
	}
}

// heartbeat extends, in one statement, the lease of every job whose handler is running. A job
// the statement does not return lost its lock: its context is cancelled with ErrLockLost and
// its outcome will be ignored. When the database cannot be reached, jobs whose lease must have
// run out by now are given up the same way, since another worker may already run them.
//
// Jobs whose handlers have returned are left to the completer, so the two statements mostly
// touch disjoint rows.
func (e *engine) heartbeat(ctx context.Context) {
	e.mu.Lock()
	var running, completedInTx []*activeJob
	var firstLeaseEnd time.Time
	for _, j := range e.jobs {
		switch {
		case j.state != stateRunning:
		case j.completedInTx.Load():
			// Its row may be gone, or locked by the handler's transaction: extended apart.
			completedInTx = append(completedInTx, j)
		default:
			running = append(running, j)
			if firstLeaseEnd.IsZero() || j.leaseEnd.Before(firstLeaseEnd) {
				firstLeaseEnd = j.leaseEnd
			}
		}
	}
	e.mu.Unlock()
	if len(completedInTx) > 0 {
		e.extendCompletedInTx(ctx, completedInTx)
	}
	if len(running) == 0 {
		return
	}
	// Rows are locked in id order, as the completer locks them, so that a job finishing while
	// the heartbeat is under way cannot make the two statements deadlock.
	slices.SortFunc(running, func(a, b *activeJob) int { return a.id.Compare(b.id) })
	ids, tokens := make([][16]byte, len(running)), make([][16]byte, len(running))
	for i, j := range running {
		ids[i], tokens[i] = j.id, j.token
	}

	// A slow heartbeat is given until the first of these leases runs out (and at least an
	// interval): cutting it off sooner would only give up jobs whose leases still hold.
	qctx, cancel := context.WithTimeout(ctx, max(e.opts.HeartbeatInterval, time.Until(firstLeaseEnd)))
	defer cancel()
	sent := time.Now()
	rows, err := e.c.pool.Query(qctx, heartbeatSQL, ids, tokens, e.opts.LockDuration.Milliseconds())
	var held []ulid.ULID
	if err == nil {
		held, err = pgx.CollectRows(rows, scanID)
	}
	if err != nil {
		if ctx.Err() == nil {
			e.reportError("pgqueue: heartbeat", fmt.Errorf("pgqueue: heartbeat: %w", err))
		}
		e.expireLeases(time.Now())
		return
	}

	stillHeld := make(map[ulid.ULID]bool, len(held))
	for _, id := range held {
		stillHeld[id] = true
	}
	var gone []*activeJob
	e.mu.Lock()
	for _, j := range running {
		switch {
		case e.jobs[j.id] != j:
			// Settled or given up meanwhile, or claimed again: the entry is a newer attempt.
		case stillHeld[j.id]:
			j.leaseEnd = sent.Add(e.opts.LockDuration)
		case j.state == stateRunning && !j.completedInTx.Load():
			gone = append(gone, j)
		}
	}
	e.mu.Unlock()
	if len(gone) > 0 {
		e.giveUp(qctx, gone)
	}
}

// extendCompletedInTx extends the leases of running jobs that their handlers completed in a
// transaction of their own (Job.CompleteTx), without waiting for rows that such a transaction
// still locks. A job whose transaction committed needs no lease any more; one whose transaction
// rolled back is the handler's again, and without this its lease would run out while the handler
// runs, and another worker would run it a second time. A job the statement does not return is
// given up only if its transaction rolled back and another attempt holds the job; otherwise the
// completer settles it when its handler returns.
func (e *engine) extendCompletedInTx(ctx context.Context, jobs []*activeJob) {
	ids, tokens := make([][16]byte, len(jobs)), make([][16]byte, len(jobs))
	for i, j := range jobs {
		ids[i], tokens[i] = j.id, j.token
	}
	qctx, cancel := context.WithTimeout(ctx, e.opts.HeartbeatInterval)
	defer cancel()
	sent := time.Now()
	rows, err := e.c.pool.Query(qctx, heartbeatUnlockedSQL, ids, tokens, e.opts.LockDuration.Milliseconds())
	var extended []ulid.ULID
	if err == nil {
		extended, err = pgx.CollectRows(rows, scanID)
	}
	if err != nil {
		if ctx.Err() == nil {
			e.reportError("pgqueue: heartbeat", fmt.Errorf("pgqueue: heartbeat: %w", err))
		}
		return
	}
	var others []*activeJob
	e.mu.Lock()
	for _, j := range jobs {
		if e.jobs[j.id] != j {
			continue
		}
		if slices.Contains(extended, j.id) {
			j.leaseEnd = sent.Add(e.opts.LockDuration)
		} else {
			others = append(others, j)
		}
	}
	e.mu.Unlock()
	// Not extended: its transaction is open or committed, or holds the row for a moment (an
	// Update, a Cancel), or it rolled back and the job went to another attempt meanwhile. In
	// that last case the handler has lost the job.
	taken := e.lostAfterRollback(ctx, others)
	if len(taken) == 0 {
		return
	}
	var lost []*activeJob
	e.mu.Lock()
	for _, j := range taken {
		if e.jobs[j.id] == j && j.state == stateRunning {
			j.completedInTx.Store(false)
			lost = append(lost, e.abandon(j, ErrLockLost))
		}
	}
	e.mu.Unlock()
	e.reportLost(lost)
}

// lostAfterRollback returns the jobs, of those their handlers completed with Job.CompleteTx,
// whose transaction rolled back and which another attempt holds now. On an error it returns
// none, which leaves them as they were.
func (e *engine) lostAfterRollback(ctx context.Context, jobs []*activeJob) []*activeJob {
	var ids, tokens [][16]byte
	var xacts []string
	byID := map[ulid.ULID]*activeJob{}
	for _, j := range jobs {
		if x := j.completeXact.Load(); x != nil {
			ids, tokens, xacts = append(ids, j.id), append(tokens, j.token), append(xacts, *x)
			byID[j.id] = j
		}
	}
	if len(ids) == 0 {
		return nil
	}
	qctx, cancel := context.WithTimeout(ctx, e.opts.HeartbeatInterval)
	defer cancel()
	rows, _ := e.c.pool.Query(qctx, lostAfterRollbackSQL, ids, tokens, xacts)
	lostIDs, err := pgx.CollectRows(rows, scanID)
	if err != nil {
		if ctx.Err() == nil {
			e.reportError("pgqueue: heartbeat", fmt.Errorf("pgqueue: heartbeat: transaction status: %w", err))
		}
		return nil
	}
	lost := make([]*activeJob, 0, len(lostIDs))
	for _, id := range lostIDs {
		lost = append(lost, byID[id])
	}
	return lost
}

// giveUp abandons running jobs whose lock is gone: cancelled ones with ErrCancelled, the others
// (taken back after their lease ran out, re-claimed, deleted) with ErrLockLost.
func (e *engine) giveUp(ctx context.Context, jobs []*activeJob) {
	ids := make([][16]byte, len(jobs))
	for i, j := range jobs {
		ids[i] = j.id
	}
	cancelled := map[ulid.ULID]bool{}
	rows, err := e.c.pool.Query(ctx, lostStatusSQL, ids)
	if err == nil {
		var id ulid.ULID
		var status Status
		_, err = pgx.ForEachRow(rows, []any{(*[16]byte)(&id), &status}, func() error {
			cancelled[id] = status == StatusCancelled
			return nil
		})
	}
	if err != nil {
		e.log.Warn("pgqueue: read the status of jobs whose lock was lost", "error", err)
	}
	var lost, stopped []*activeJob
	e.mu.Lock()
	for _, j := range jobs {
		if e.jobs[j.id] != j || j.state != stateRunning || j.completedInTx.Load() {
			continue
		}
		if cancelled[j.id] {
			stopped = append(stopped, e.abandon(j, ErrCancelled))
		} else {
			lost = append(lost, e.abandon(j, ErrLockLost))
		}
	}
	e.mu.Unlock()
	e.reportCancelled(stopped)
	e.reportLost(lost)
}

// expireLeases gives up running jobs whose lease has surely run out by now (by the local
// clock, counted from before the claim or heartbeat that set it).
func (e *engine) expireLeases(now time.Time) {
	var lost []*activeJob
	e.mu.Lock()
	for _, j := range e.jobs {
		if j.state == stateRunning && now.After(j.leaseEnd) && !j.completedInTx.Load() {
			lost = append(lost, e.abandon(j, ErrLockLost))
		}
	}
	e.mu.Unlock()
	e.reportLost(lost)
}

// abandon gives up a running job whose lock is gone, cancelling its handler's context with
// cause. The caller holds e.mu.
func (e *engine) abandon(j *activeJob, cause error) *activeJob {
	j.state = stateAbandoned
	delete(e.jobs, j.id)
	j.cancel(cause)
	return j
}

// reportCancelled logs and reports jobs stopped because they were cancelled.
func (e *engine) reportCancelled(stopped []*activeJob) {
	for _, j := range stopped {
		e.log.Info("pgqueue: running job cancelled", "job", j.id, "attempt", j.attempt)
		e.emit(Event{Kind: EventCancelled, JobID: j.id, Attempt: j.attempt})
	}
	if len(stopped) > 0 {
		signal(e.freed)
	}
}

// reportLost logs and reports jobs given up by abandon.
func (e *engine) reportLost(lost []*activeJob) {
	for _, j := range lost {
		e.log.Warn("pgqueue: lost the lock of a running job; its outcome will be ignored",
			"job", j.id, "attempt", j.attempt)
		e.emit(Event{Kind: EventLockLost, JobID: j.id, Attempt: j.attempt})
	}
	if len(lost) > 0 {
		signal(e.freed)
	}
}
