package pgqueue

import (
	"context"
	"fmt"
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
// Jobs whose handlers have returned are left to the completer; keeping the two statements on
// disjoint rows means they can never deadlock on each other.
func (e *engine) heartbeat(ctx context.Context) {
	e.mu.Lock()
	var ids, tokens [][16]byte
	for _, j := range e.jobs {
		if j.state == stateRunning {
			ids = append(ids, j.id)
			tokens = append(tokens, j.token)
		}
	}
	e.mu.Unlock()
	if len(ids) == 0 {
		return
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
