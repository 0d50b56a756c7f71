package pgqueue

import (
	"context"
	"log/slog"
	"time"
)

// RuntimeConns is how many of the pool's connections one Client.Run holds at most at once for
// itself: its heartbeat, completer, maintenance loop and resolver each hold one for the length of a
// statement (or one pipelined batch) at a time, and its claim loop holds one while claims are in
// flight, which in a busy runtime is most of the time, a second while it claims on two at once (a
// drain of short jobs; behind a transaction pooler, never), and up to two more for express claims
// of quiet queues beside such a drain (express.go), and gives them back when it goes idle. The
// client's LISTEN connection is not among them: it is taken out of the pool
// (hijacked) when the first Run starts, and the pool may open another in its place. Handlers
// need connections of their own on top: Job.Update takes one for its statement, and a handler's
// own queries and transactions take theirs.
//
// It is 8: the heartbeat, completer, maintenance loop and resolver (4), the claim loop's
// connections (claimConns, 2) and the express claims (expressRounds, 2).
const RuntimeConns = 8

// RuntimeConns is written as a number so that go doc shows it; this fails to compile (an array
// of negative or non-zero length is not a [0]struct{}) unless it is still the sum it documents.
var _ [0]struct{} = [RuntimeConns - (4 + claimConns + expressRounds)]struct{}{}

const (
	// poolWaitShare is the share of wall time that callers of the pool, added up, may spend
	// waiting for a connection before Run warns: a tenth means that on average a tenth of a
	// caller was waiting at every moment.
	poolWaitShare = 0.1
	// poolWatchWindow is the least time over which the waits are weighed, and poolWarnEvery the
	// least time between two warnings of one Run.
	poolWatchWindow = time.Second
	poolWarnEvery   = 10 * time.Minute
)

// poolWatch notices when the pool makes its callers wait for connections — the runtime's own
// statements and the handlers' alike — so that a pool too small for the work is a logged warning
// with the figures, not a mystery slowdown. A pool smaller than the slots is not warned about as
// such: handlers that never touch the database do not need connections. It is the maintenance
// loop's own, and looks at the pool's counters each time that loop wakes.
type poolWatch struct {
	slots  int           // the Run's handler slots: the sum of its workers' Concurrency
	waited time.Duration // the pool's total wait for connections when last looked
	since  time.Time     // when that was
	warned time.Time     // the last warning; zero: none yet
}

// lookAtPool compares the pool's waits since the last look with the time passed, and logs a
// warning when callers waited more than poolWaitShare of it with the pool at its MaxConns.
func (m *maintainer) lookAtPool(ctx context.Context, now time.Time) {
	w, rt := &m.pool, m.rt
	stat := rt.c.pool.Stat()
	total := stat.EmptyAcquireWaitTime()
	if w.since.IsZero() {
		w.waited, w.since = total, now
		return
	}
	window := now.Sub(w.since)
	if window < poolWatchWindow {
		return
	}
	waited := total - w.waited
	w.waited, w.since = total, now
	if stat.TotalConns() < stat.MaxConns() {
		// The pool still has room: its callers waited for new connections to open (as every
		// pool does while it grows, at start), not for a pool too small.
		return
	}
	if float64(waited) < poolWaitShare*float64(window) || (!w.warned.IsZero() && now.Sub(w.warned) < poolWarnEvery) {
		return
	}
	w.warned = now
	rt.c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn,
		"pgqueue: callers of the pool are waiting for connections, so claims, heartbeats and handlers slow down; "+
			"raise the pool's MaxConns (pool_max_conns) towards RuntimeConns plus the workers' Concurrency, or lower Concurrency",
		slog.Int("pool_max_conns", int(stat.MaxConns())), slog.Int("runtime_conns", RuntimeConns),
		slog.Int("concurrency", w.slots), slog.Duration("waited", waited), slog.Duration("over", window))
}
