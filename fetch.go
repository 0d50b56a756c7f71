package pgqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// claimWant is one queue's part of a claim round trip: how many jobs to ask for.
type claimWant struct {
	q     *queueRun
	limit int
}

// fetchLoop claims jobs and starts their handlers until ctx ends. It sleeps until a queue that
// wants a claim (a wake-up, a full batch last time, a promotion, a rescue or the poll) has free
// slots, then claims for every such queue in one round trip.
func (rt *runtime) fetchLoop(ctx context.Context, jobBase context.Context) {
	failures := 0
	for ctx.Err() == nil {
		if rt.fewSlotsFree() {
			// Handlers are returning: give the others a moment to, and claim one batch for all.
			sleepCtx(ctx, gatherFor)
		}
		wants := rt.wantedClaims()
		if len(wants) == 0 {
			rt.reportDrained()
			select {
			case <-ctx.Done():
				return
			case <-rt.wakeFetch:
			}
			continue
		}
		claimed, sent, err := rt.claim(ctx, wants)
		if err != nil {
			failures++
			rt.claimFailed(ctx, wants, err, failures)
			continue
		}
		failures = 0
		if ctx.Err() != nil {
			// Shutdown began while the claim was under way: hand the jobs back.
			for i, w := range wants {
				rt.handBack(w.q, claimed[i])
			}
			return
		}
		rt.announceStarts(ctx, wants, claimed)
		for i, w := range wants {
			rows := claimed[i]
			// A full batch means more may be waiting: claim again as soon as a slot frees.
			if len(rows) == w.limit {
				w.q.wantClaim.Store(true)
			}
			w.q.empty = len(rows) < w.limit
			if len(rows) > 0 {
				w.q.drainPending = true
				rt.start(jobBase, w.q, rows, sent.Add(w.q.opts.LockDuration))
			}
		}
		rt.reportDrained()
	}
}

// gatherFor is how long the claim loop waits for more slots to free when a queue that wants a
// claim has few free and handlers still running: slots freed one by one would otherwise be
// refilled one claim each.
const gatherFor = 500 * time.Microsecond

// fewSlotsFree reports whether every queue that wants a claim and has a free slot has less than
// half its slots free and handlers running.
func (rt *runtime) fewSlotsFree() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	few := false
	for _, q := range rt.queues {
		if !q.wantClaim.Load() {
			continue
		}
		switch free := q.free(); {
		case free == 0:
		case 2*free >= q.opts.Concurrency || q.busy == 0:
			return false
		default:
			few = true
		}
	}
	return few
}

// wantedClaims returns the queues that want a claim and have free slots, taking their wish.
func (rt *runtime) wantedClaims() []claimWant {
	var wants []claimWant
	for _, q := range rt.queues {
		if !q.wantClaim.Load() {
			continue
		}
		if free := rt.freeSlots(q); free > 0 && q.wantClaim.Swap(false) {
			wants = append(wants, claimWant{q: q, limit: free})
		}
	}
	return wants
}

// claim leases jobs for every queue of wants in one statement, and returns the rows claimed for
// each want and when the statement was sent. It does not let ctx interrupt the statement: claimed
// rows whose result never arrived would stay locked until their lease ran out.
func (rt *runtime) claim(ctx context.Context, wants []claimWant) ([][]*jobRow, time.Time, error) {
	queues, limits, leases := make([]string, len(wants)), make([]int32, len(wants)), make([]int64, len(wants))
	index := make(map[string]int, len(wants))
	var timeout time.Duration
	for i, w := range wants {
		queues[i], limits[i], leases[i] = w.q.name, int32(w.limit), w.q.opts.LockDuration.Milliseconds()
		index[w.q.name] = i
		timeout = max(timeout, w.q.opts.LockDuration)
	}
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	sent := time.Now()
	rows, err := rt.c.pool.Query(qctx, claimSQL, queues, limits, leases, rt.c.cfg.ID)
	if err != nil {
		return nil, sent, fmt.Errorf("pgqueue: claim: %w", err)
	}
	all, err := pgx.CollectRows(rows, scanJobRow)
	if err != nil {
		return nil, sent, fmt.Errorf("pgqueue: claim: %w", err)
	}
	claimed := make([][]*jobRow, len(wants))
	for _, r := range all {
		i := index[r.queue]
		claimed[i] = append(claimed[i], r)
	}
	return claimed, sent, nil
}

// claimFailed reports a failed claim and waits before the next one: a back-off, cut short when
// the listener is back (so is the database). Jobs the claim may have locked without an answer
// arriving are taken back by the maintenance loop once their lease has run out.
func (rt *runtime) claimFailed(ctx context.Context, wants []claimWant, err error, failures int) {
	qs := make([]*queueRun, len(wants))
	for i, w := range wants {
		qs[i] = w.q
		w.q.wantClaim.Store(true)
		w.q.rescueAt.Store(time.Now().Add(w.q.opts.LockDuration).UnixNano())
	}
	signal(rt.wakeMaint)
	rt.reportError(qs, "pgqueue: claim jobs", err)
	pause := time.NewTimer(retryDelay(failures))
	defer pause.Stop()
	select {
	case <-ctx.Done():
	case <-pause.C:
	case <-rt.reconnected:
	}
}

// reportDrained emits EventDrained for each queue that has no runnable job left and no claimed
// job unsettled, once each time it goes from busy to idle.
func (rt *runtime) reportDrained() {
	for _, q := range rt.queues {
		if !q.empty || !q.drainPending {
			continue
		}
		rt.mu.Lock()
		idle := q.held == 0
		rt.mu.Unlock()
		if idle {
			q.drainPending = false
			q.events.emit(Event{Kind: EventDrained})
		}
	}
}
