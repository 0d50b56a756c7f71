package pgqueue

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The history (migration 20261214120000): finished jobs kept by retention live in
// pgqueue_history, partitioned by the day their retention runs out, apart from the jobs still to
// run. The maintainer moves each queue's finished jobs there once they have been finished
// historyDelay (history_move.sql, in the round trip that also rescues expired leases); the
// historyKeeper makes the partitions ahead of the expiries those moves give, and drops the
// partitions whose day has passed.
const (
	// historyDelay is how long a finished job stays in pgqueue_jobs before it moves: the jobs
	// that just finished are read where they finished (a handler's own Job, an await, a workflow
	// still running), and the moves come in batches.
	historyDelay = time.Minute
	// historyBatch is how many finished jobs of each status and queue one move takes.
	historyBatch = 1000
	// historyKeepEvery is how often a runtime makes and drops the history's partitions.
	historyKeepEvery = time.Minute
	// historyMargin is how much further than the longest retention the partitions are made: the
	// jobs that finish before the next round must find theirs.
	historyMargin = 2 * 24 * time.Hour
	// historyLockTimeout bounds how long a round waits for the history's locks; what it could
	// not do, the next round does.
	historyLockTimeout = "1s"
)

// historyKeeper makes the history's daily partitions, up to the longest retention of its
// runtime's queues ahead, and drops the partitions whose day has passed, at start and every
// historyKeepEvery, by the database clock. Any number of processes run one: the functions it
// calls take an advisory lock, and a round that finds another process at it is tried again
// sooner. It owns the end of the partitions made so far, which the maintainer's moves read.
type historyKeeper struct {
	rt    *runtime
	ahead time.Duration // the longest finite retention of the runtime's queues
	// end is where the partitions made so far end: no job expiring at or after it moves. Nil
	// until the first round has made them.
	end atomic.Pointer[time.Time]
}

func newHistoryKeeper(rt *runtime) *historyKeeper {
	h := &historyKeeper{rt: rt}
	for _, q := range rt.queues {
		r := rt.c.cfg.retentionOf(q.name)
		h.ahead = max(h.ahead, r.Completed, r.Failed, r.Cancelled)
	}
	return h
}

// loop keeps the history's partitions until ctx ends. A round that fails is logged and tried
// again at the next; one that found another process at work, after a second.
func (h *historyKeeper) loop(ctx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		next := historyKeepEvery
		done, err := h.keep(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			h.rt.c.cfg.Logger.Warn("pgqueue: keeping the history's partitions", "error", err)
		case !done:
			next = time.Second
		}
		timer.Reset(next)
	}
}

// keep runs one round: the partitions up to ahead + historyMargin from now, then the drops of
// those past, one a transaction (history_drop.sql). It reports false if another process held
// the lock. Each transaction's lock waits are bounded by historyLockTimeout.
func (h *historyKeeper) keep(ctx context.Context) (bool, error) {
	var end *time.Time
	err := h.inTx(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, historyExtendSQL, (h.ahead + historyMargin).Microseconds()).Scan(&end)
	})
	if err != nil {
		return false, wrapf(err, "make the history's partitions")
	}
	if end == nil {
		return false, nil
	}
	if h.end.Swap(end) == nil {
		// The first partitions: the jobs the maintainer left for want of them may move now.
		for _, q := range h.rt.queues {
			q.wantMove.Store(true)
		}
		h.rt.w.maintain.signal()
	}
	for {
		var dropped *int64
		err = h.inTx(ctx, func(tx pgx.Tx) error {
			return tx.QueryRow(ctx, historyDropSQL).Scan(&dropped)
		})
		switch {
		case err != nil:
			return false, wrapf(err, "drop the history's partitions past retention")
		case dropped == nil:
			return false, nil
		case *dropped < 0:
			return true, nil
		}
		h.rt.c.cfg.Logger.Debug("pgqueue: dropped a partition of the history past retention", "jobs", *dropped)
	}
}

// inTx runs f in a transaction whose lock waits end after historyLockTimeout.
func (h *historyKeeper) inTx(ctx context.Context, f func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, h.rt.c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, setLockTimeoutSQL, historyLockTimeout, true); err != nil {
			return err
		}
		return f(tx)
	})
}

// partitionsEnd returns the end of the partitions made so far, as history_move.sql takes it
// (nil: none made yet, and only the jobs kept for ever, or past retention, move).
func (h *historyKeeper) partitionsEnd() *time.Time {
	return h.end.Load()
}
