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
// ctx ends.
func (e *engine) heartbeatLoop(ctx context.Context) {
	t := time.NewTicker(e.opts.HeartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.heartbeat(ctx)
		}
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
	var running []*activeJob
	for _, j := range e.jobs {
		if j.state == stateRunning {
			running = append(running, j)
		}
	}
	e.mu.Unlock()
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

	qctx, cancel := context.WithTimeout(ctx, e.opts.HeartbeatInterval)
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
	var lost []*activeJob
	e.mu.Lock()
	for _, id := range ids {
		j := e.jobs[id]
		switch {
		case j == nil || j.state != stateRunning:
			// Its handler returned meanwhile; the completer decides it.
		case stillHeld[id]:
			j.leaseEnd = sent.Add(e.opts.LockDuration)
		default:
			lost = append(lost, e.abandon(j))
		}
	}
	e.mu.Unlock()
	e.reportLost(lost)
}

// expireLeases gives up running jobs whose lease has surely run out by now (by the local
// clock, counted from before the claim or heartbeat that set it).
func (e *engine) expireLeases(now time.Time) {
	var lost []*activeJob
	e.mu.Lock()
	for _, j := range e.jobs {
		if j.state == stateRunning && now.After(j.leaseEnd) {
			lost = append(lost, e.abandon(j))
		}
	}
	e.mu.Unlock()
	e.reportLost(lost)
}

// abandon gives up a running job whose lock is gone. The caller holds e.mu.
func (e *engine) abandon(j *activeJob) *activeJob {
	j.state = stateAbandoned
	delete(e.jobs, j.id)
	j.cancel(ErrLockLost)
	return j
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
