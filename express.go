package pgqueue

import (
	"context"
	"time"
)

// The express loop: while the claimer's connections have claim rounds in flight — a drain — the
// claim of a quiet queue waited behind them three times: for the loop, blocked reading the oldest
// round; for room on its connection, where the server runs the rounds one after another; and in
// the loop's reading, in the order sent. A job enqueued to a quiet queue beside a drain started
// 8-40 ms after its enqueue, where it took 1 ms idle. So the claimer has a second loop, woken by
// the listener when a queue has new jobs, which claims for the quiet queues — those whose last
// claim came back short (no drain), with no round in flight and no limits — in one round trip on
// a connection of the pool's own, and starts their jobs as soon as it comes back. Up to
// expressRounds are out at once; a queue with one out sends no claim but a second express round,
// for jobs heard of while the first is out, which the first leaves half of its free slots for
// (one quiet queue taking a job every 10 ms beside a drain: p99 from the enqueue's return 18.0
// → 15.1 ms, bench/README.md). It claims for free slots only: jobs claimed ahead would wait for a
// slot anyway.

// expressLoop claims for quiet queues until ctx ends, each time the listener says a queue has new
// jobs (wakeups.express), or the claim loop leaves a quiet queue's claim to it. Up to
// expressRounds rounds are out at once, each for the queues that wanted a claim when it left, so
// that a round slowed down (its connection's server process waiting for a core behind a drain)
// does not hold the wake-ups of the queues that get jobs meanwhile.
func (cl *claimer) expressLoop(ctx context.Context) {
	free := make(chan struct{}, expressRounds)
	for {
		select {
		case <-ctx.Done():
			return
		case <-cl.rt.w.express:
		}
		select {
		case <-ctx.Done():
			return
		case free <- struct{}{}:
		}
		wants := cl.expressWants()
		if len(wants) == 0 {
			<-free
			continue
		}
		cl.express.Go(func() {
			defer func() { <-free }()
			cl.expressRound(ctx, wants)
		})
	}
}

// expressRounds is how many express rounds may be out at once, each on a connection of its own
// (RuntimeConns counts them).
const expressRounds = 2

// expressRound claims for wants in one round trip, and starts the jobs it took.
func (cl *claimer) expressRound(ctx context.Context, wants []claimWant) {
	claimed, again, sent, err := claimOnce(ctx, cl.rt.c, wants)
	cl.mu.Lock()
	cl.unreserve(wants)
	for _, w := range wants {
		cl.queues[w.q.index].express--
	}
	if err == nil {
		cl.noteAll(wants, claimed, again)
	}
	cl.mu.Unlock()
	if err != nil {
		cl.expressFailed(wants, err)
		return
	}
	cl.took(ctx, wants, claimed, sent)
	cl.rt.w.express.signal() // wishes heard while it was out
	cl.rt.w.claim.signal()   // to report the queues drained
}

// expressWants returns the quiet queues that want a claim and may claim, taking their wish, and
// counts the jobs it asks for as on their way, as wantedClaims does.
func (cl *claimer) expressWants() []claimWant {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var wants []claimWant
	for _, q := range cl.rt.queues {
		qc := &cl.queues[q.index]
		if !cl.quiet(q) || q.paused.Load() || !q.wantClaim.Load() {
			continue
		}
		n, ahead := cl.claimable(q, cl.rt.set.counts(q))
		if n -= ahead; n == 0 || !q.wantClaim.Swap(false) {
			continue
		}
		if qc.express < expressRounds-1 {
			n = (n + 1) / 2 // the rest for the next round, should it go out before this one is back
		}
		qc.claiming += n
		qc.rounds++
		qc.express++
		wants = append(wants, cl.floored(claimWant{q: q, limit: n}))
	}
	return wants
}

// quiet reports whether q's claims go express: its last claim came back short, it has no round
// in flight but express ones, fewer than expressRounds, and it has no limits. The caller holds
// cl.mu.
func (cl *claimer) quiet(q *queueRun) bool {
	qc := &cl.queues[q.index]
	return qc.rounds == qc.express && qc.express < expressRounds && qc.empty && claimWay(q.way.Load()) == claimPlain
}

// expressFailed reports an express round that failed: its queues want a claim again, and a
// rescue after their lease, should the claim have locked jobs whose result never came.
func (cl *claimer) expressFailed(wants []claimWant, err error) {
	qs := make([]*queueRun, len(wants))
	for i, w := range wants {
		qs[i] = w.q
		w.q.mark.note(linePos{}, false) // its rows may have been locked and never read
		w.q.wantClaim.Store(true)
		w.q.rescueAt.Store(time.Now().Add(w.q.opts.LockDuration).UnixNano())
	}
	cl.rt.w.maintain.signal()
	cl.rt.w.claim.signal()
	cl.rt.reportError(qs, "pgqueue: claim jobs", err) // claimOnce's error says "pgqueue: claim:" already
}
