package pgqueue

import (
	"context"
	"log/slog"
)

// RuntimeConns is how many of the pool's connections one Client.Run holds at most at once for
// itself: its claim loop, heartbeat, completer and maintenance loop each hold one for the length
// of a statement (or one pipelined batch) at a time. The client's LISTEN connection is not among
// them: it is taken out of the pool (hijacked) when the first Run starts, and the pool may open
// another in its place. Handlers need connections of their own on top: Job.Update takes one for
// its statement, and a handler's own queries and transactions take theirs.
const RuntimeConns = 4

// checkPoolSize logs a warning when the pool has fewer connections than the workers of a Run may
// want at once: RuntimeConns for the runtime and one for each handler slot (the sum of the
// workers' Concurrency). Nothing breaks then, which is why it is only a warning (a pool of
// two connections serving fifty slots runs every job, in the tests): handlers that use the pool
// beyond its size wait for a connection while holding their slots, and the runtime's statements
// wait in the same line, so claims slow down and a late heartbeat can let a lease run out
// (reported as EventLockLost). Handlers that never touch the database do not need their share,
// and the warning then overstates the need; it is logged once per Run.
func (c *Client) checkPoolSize(ctx context.Context, specs []*workerSpec) {
	slots := 0
	for _, s := range specs {
		slots += s.opts.Concurrency
	}
	maxConns, want := int(c.pool.Stat().MaxConns()), RuntimeConns+slots
	if maxConns >= want {
		return
	}
	c.cfg.Logger.LogAttrs(ctx, slog.LevelWarn,
		"pgqueue: the pool may be too small for Run: its handlers wait for connections and its heartbeats wait behind them; "+
			"raise the pool's MaxConns (pool_max_conns) to at least RuntimeConns plus the workers' Concurrency, or lower Concurrency",
		slog.Int("pool_max_conns", maxConns), slog.Int("runtime_conns", RuntimeConns),
		slog.Int("concurrency", slots), slog.Int("want_max_conns", want))
}
