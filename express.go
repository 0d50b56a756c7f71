package pgqueue

import (
	"context"
	"fmt"
	"time"
)

// Express claims: while the claimer's connections have claim rounds in flight — a drain — the
// claim of a queue with none in flight would wait behind them twice: on its connection, where the
// server runs the rounds one after another, and in the loop, which reads the rounds in the order
// sent. A quiet queue's job enqueued beside a drain then started only after the drain's rounds in
// flight had run and been read. So the claims of such queues go out together, as one round, on a
// connection of the pool's own, from a goroutine of their own, which starts their jobs as soon as
// the round comes back; the loop notes what it found (noteExpressed) at its next turn. One
// express round is out at a time. It claims for free slots only, and only for queues without
// limits (whose claims take no claim lock, and whose rounds need no order between them): a queue
// with a claim out express sends no other claim until it is back.

// expressRound is what an express round found, for the claimer's loop to note.
type expressRound struct {
	wants []claimWant
	rows  []int // of each want, how many jobs it took
	again []claimAgain
	err   error
}

// sendExpress sends the wants that may go express, if no express round is out, and returns the
// wants left for the claimer's connections. A want may go express if the connections have rounds
// in flight, its queue none, and the queue has no limits; its jobs claimed ahead are dropped from
// it (and from what its queue counts on its way): they would wait for a slot anyway.
func (cl *claimer) sendExpress(ctx context.Context, wants []claimWant) []claimWant {
	if cl.pipes.inFlight() == 0 || cl.expressOut {
		return wants
	}
	left, express := wants[:0], []claimWant(nil)
	for _, w := range wants {
		qc := &cl.queues[w.q.index]
		if qc.rounds != 1 || claimWay(w.q.way.Load()) != claimPlain {
			left = append(left, w)
			continue
		}
		qc.claiming -= w.ahead
		w.limit, w.ahead = w.limit-w.ahead, 0
		if w.limit == 0 {
			qc.rounds--
			continue
		}
		qc.express = true
		express = append(express, w)
	}
	if len(express) > 0 {
		cl.expressOut = true
		cl.expressing.Add(1)
		go cl.express(ctx, express)
	}
	return left
}

// express claims for wants in one round trip on a connection of the pool's own and starts the
// jobs it took, or hands them back if Run has ended or their queue was paused meanwhile; then it
// tells the loop.
func (cl *claimer) express(ctx context.Context, wants []claimWant) {
	defer cl.expressing.Done()
	claimed, again, sent, err := claimOnce(ctx, cl.rt.c, wants)
	r := expressRound{wants: wants, again: again, err: err, rows: make([]int, len(wants))}
	if err == nil {
		for i, w := range wants {
			r.rows[i] = len(claimed[i])
			if ctx.Err() != nil || w.q.paused.Load() {
				cl.handBack(w.q, claimed[i], sent.Add(w.q.opts.LockDuration))
				claimed[i] = nil
			}
		}
		cl.rt.announceStarts(ctx, wants, claimed)
		for i, w := range wants {
			if len(claimed[i]) > 0 {
				cl.hold(w.q, markAhead(claimed[i], w), sent)
			}
		}
	}
	cl.expressed <- r // buffered: one express round is out at a time
}

// noteExpressed notes the express round that came back, if one did since the loop last looked.
func (cl *claimer) noteExpressed() {
	select {
	case r := <-cl.expressed:
		cl.noted(r)
	default:
	}
}

// noted notes what an express round found, as readRound and took do for a round of the loop's.
func (cl *claimer) noted(r expressRound) {
	cl.expressOut = false
	var failed []*queueRun
	for i, w := range r.wants {
		q, qc := w.q, &cl.queues[w.q.index]
		qc.express = false
		qc.claiming -= w.limit
		qc.rounds--
		if r.err != nil {
			q.wantClaim.Store(true)
			q.rescueAt.Store(time.Now().Add(q.opts.LockDuration).UnixNano())
			failed = append(failed, q)
			continue
		}
		if r.rows[i] > 0 {
			qc.drainPending = true
		}
		cl.next(w, make([]*jobRow, r.rows[i]), r.again[i]) // only the number of rows matters to next
	}
	if len(failed) > 0 {
		cl.rt.w.maintain.signal()
		cl.rt.reportError(failed, "pgqueue: claim jobs", fmt.Errorf("pgqueue: claim: %w", r.err))
	}
}
