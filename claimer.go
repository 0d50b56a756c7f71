package pgqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// claimer is the runtime's claim loop: it claims jobs for the queues that want them, in claim
// rounds pipelined on its connections (claimpipe.go), and hands what it claimed to the attempt
// set, whose slots start the handlers; beside it, its express loop claims for quiet queues
// (express.go). How much each queue claims is its policy (claimable): free slots, and jobs
// claimed ahead of them, within the bounds the promises set. It owns what it keeps of each queue
// (queueClaims) and the claims' round-trip time, under its own lock, mu, which its two loops
// share; the loop holds its connections and failures alone.
type claimer struct {
	rt      *runtime
	mu      sync.Mutex     // guards queues, rtt and timers: the loop's and the express loop's
	queues  []queueClaims  // by queueRun.index
	rtt     time.Duration  // a moving average of its claim rounds' round trips
	slots   int            // the runtime's slots in all: the Concurrency of its queues, summed
	pipes   *claimPipes    // while the loop runs
	fail    claimFailure   // failed rounds, until reported
	timers  []*time.Timer  // claimAfter's, by queue index; nil until set
	express sync.WaitGroup // the express loop, while it runs
}

// queueClaims is what the claimer keeps of one queue.
type queueClaims struct {
	// claiming is how many jobs the claim rounds in flight ask for, and rounds how many rounds
	// they are.
	claiming, rounds int
	empty            bool // the last claim found fewer jobs than it asked for
	exclusive        bool // its next claim takes the claim lock exclusively (chooseLockMode)
	drainPending     bool // EventDrained is owed once the queue is empty and idle
	express          int  // how many of its rounds in flight are express rounds (express.go)
	floor            claimFloor
}

// claimWant is one queue's part of a claim round trip: how many jobs to ask for, and how many of
// them, the last in line, are claimed ahead of a free slot: they wait for a slot a running handler
// frees, and their start is recorded when they start (claim.sql). exclusive: the queue's claim
// lock is taken exclusively (a MaxRunning-only queue near its limit). floored: the claim scans
// the queue's line from place from, its claim floor when it was sent (merge number seq); else
// from the start.
type claimWant struct {
	q         *queueRun
	limit     int
	ahead     int
	exclusive bool
	floored   bool
	from      linePos
	seq       uint64
}

// floored returns w scanning from its queue's floor, after merging the places announced since
// the floor was last looked at. The caller holds cl.mu.
func (cl *claimer) floored(w claimWant) claimWant {
	f := &cl.queues[w.q.index].floor
	if p, ok := w.q.mark.take(); ok {
		f.lower(p)
	}
	w.floored = true
	w.from, w.seq = f.start()
	return w
}

// rise raises the floor of w's queue to the last of rows in line, which w's claim took, and
// forgets the merges kept for claims out once none is. The caller holds cl.mu.
func (cl *claimer) rise(w claimWant, rows []*jobRow) {
	qc := &cl.queues[w.q.index]
	if w.floored && len(rows) > 0 {
		last := rows[0].place()
		for _, r := range rows[1:] {
			if p := r.place(); last.before(p) {
				last = p
			}
		}
		qc.floor.rise(last, w.seq)
	}
	if qc.rounds == 0 {
		qc.floor.settled()
	}
}

func newClaimer(rt *runtime) *claimer {
	cl := &claimer{rt: rt, queues: make([]queueClaims, len(rt.queues)), timers: make([]*time.Timer, len(rt.queues))}
	for i, q := range rt.queues {
		cl.queues[i].drainPending = true
		cl.queues[i].floor = newClaimFloor()
		cl.slots += q.opts.Concurrency
	}
	return cl
}

// loop claims jobs and starts their handlers until ctx ends. It sleeps until a queue that wants
// a claim (a wake-up, a full batch last time, a promotion, a rescue or the poll) may claim
// (claimable: it has free slots, or handlers expected to return before a claim comes back), then
// claims for every such queue in one round trip on each of its connections (claimPipes), which
// share out the queues. While rounds are in flight it sends more, for the queues whose last
// claim came back full, and it reads the rounds in the order sent. After a failure it sends
// nothing until the rounds still in flight are read, then reports the failure and pauses
// (claimFailed). Each time round, jobs claimed ahead that have waited for a slot longer than
// aheadWaitMax go back to the table (attemptSet.handBackOverdue).
func (cl *claimer) loop(ctx context.Context) {
	defer cl.stopTimers()
	cl.express.Go(func() { cl.expressLoop(ctx) })
	defer cl.express.Wait()
	cl.pipes = newClaimPipes(cl)
	defer cl.pipes.release()
	p := cl.pipes
	for {
		handBackAt := cl.rt.set.handBackOverdue(time.Now())
		if ctx.Err() == nil && len(cl.fail.rounds) == 0 && cl.send(ctx) {
			continue
		}
		switch {
		case p.inFlight() == 0 && len(cl.fail.rounds) > 0:
			cl.claimFailed(ctx)
		case p.inFlight() == 0:
			p.release()
			if ctx.Err() != nil {
				return
			}
			cl.reportDrained()
			select {
			case <-ctx.Done():
			case <-cl.rt.w.claim:
			case <-timerAt(handBackAt):
			}
		default:
			cl.readRound(ctx)
		}
	}
}

// send sends a claim round on each connection that has wants for it and room, and reports whether
// it sent any. With no round in flight and few slots free, it first gives handlers a moment to
// return, and claims one batch for all.
func (cl *claimer) send(ctx context.Context) bool {
	p := cl.pipes
	if p.full() {
		return false
	}
	if p.inFlight() == 0 && cl.fewSlotsFree() {
		sleepCtx(ctx, gatherFor)
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	wants := cl.wantedClaims(p.inFlight(), p.room)
	if len(wants) == 0 {
		return false
	}
	for i, wants := range p.split(wants) {
		if len(wants) == 0 {
			continue
		}
		if lost, err := p.send(ctx, i, newClaimRound(wants)); err != nil {
			cl.fail.add(err, lost...)
		}
	}
	return true
}

// claimFailure is what the claimer holds of failed claims: how many failed in a row, and the
// rounds that failed and the first error, until they are reported (claimFailed).
type claimFailure struct {
	inRow  int
	rounds []*claimRound
	err    error
}

// add notes that rounds failed with err.
func (f *claimFailure) add(err error, rounds ...*claimRound) {
	f.inRow++
	f.rounds = append(f.rounds, rounds...)
	f.err = cmp.Or(f.err, err)
}

// readRound reads the oldest round in flight and starts the jobs it claimed. A round that failed
// is noted in cl.fail. If a statement of it failed on the server, the rounds behind it on its
// connection ran, and claimed their jobs, and are read as usual; after any other failure its
// connection is discarded, with the rounds in flight on it, which are noted too. The rounds on
// the other connections are read as usual either way.
func (cl *claimer) readRound(ctx context.Context) {
	p := cl.pipes
	round, all, lim, err := p.read()
	if err != nil {
		cl.fail.add(err, round)
		if !p.skipFailed(err) {
			cl.fail.rounds = append(cl.fail.rounds, p.discardLast()...)
		}
		return
	}
	if len(cl.fail.rounds) == 0 {
		cl.fail.inRow = 0
	}
	claimed, again := round.results(all, lim)
	cl.mu.Lock()
	cl.unreserve(round.wants)
	cl.rtt = movingAverage(cl.rtt, time.Since(round.sent))
	cl.noteAll(round.wants, claimed, again)
	cl.mu.Unlock()
	cl.took(ctx, round.wants, claimed, round.sent)
	cl.reportDrained()
}

// noteAll notes what a claim for wants that took claimed tells of each want's queue (next). The
// caller holds cl.mu.
func (cl *claimer) noteAll(wants []claimWant, claimed [][]*jobRow, again []claimAgain) {
	for i, w := range wants {
		cl.rise(w, claimed[i])
		cl.next(w, claimed[i], again[i])
		if len(claimed[i]) > 0 {
			cl.queues[w.q.index].drainPending = true
		}
	}
}

// took starts the jobs a claim sent at sent took for wants (claimed), or hands them back if Run
// has ended or their queue was paused meanwhile.
func (cl *claimer) took(ctx context.Context, wants []claimWant, claimed [][]*jobRow, sent time.Time) {
	for i, w := range wants {
		if ctx.Err() != nil || w.q.paused.Load() {
			// Shutdown began, or a pause was heard, while the claim was under way: no job of
			// the queue starts.
			cl.handBack(w.q, claimed[i], sent.Add(w.q.opts.LockDuration))
			claimed[i] = nil
		}
	}
	if ctx.Err() != nil {
		return
	}
	cl.rt.announceStarts(ctx, wants, claimed)
	for i, w := range wants {
		if len(claimed[i]) > 0 {
			cl.hold(w.q, markAhead(claimed[i], w), sent)
		}
	}
}

// next notes what a claim for w that took rows tells of w's queue: whether more may be waiting,
// when to claim again if a limit held it back, and how to take its claim lock next. The caller
// holds cl.mu.
func (cl *claimer) next(w claimWant, rows []*jobRow, again claimAgain) {
	q, qc := w.q, &cl.queues[w.q.index]
	short := len(rows) < w.limit
	if !short {
		q.wantClaim.Store(true) // more may be waiting: claim again as soon as a slot frees
	}
	if again.after > 0 && short {
		cl.claimAfter(q, again.after)
	}
	qc.empty = short
	if cl.chooseLockMode(q, again, short) {
		q.wantClaim.Store(true)
	}
}

// hold gives the rows a claim sent at sent took for q to the attempt set, and runs the handlers
// that start.
func (cl *claimer) hold(q *queueRun, rows []*jobRow, sent time.Time) {
	tasks, lost := cl.rt.set.hold(q, rows, sent.Add(q.opts.LockDuration), time.Now())
	cl.rt.handlers.run(tasks)
	cl.rt.logLost(lost)
	if len(lost) > 0 {
		cl.rt.w.claim.signal()
	}
}

// handBack gives rows claimed for q back to the table, unstarted and uncharged.
func (cl *claimer) handBack(q *queueRun, rows []*jobRow, leaseEnd time.Time) {
	if len(rows) > 0 {
		cl.rt.logLost(cl.rt.set.handBackRows(q, rows, leaseEnd, time.Now()))
	}
}

// markAhead sorts the rows claimed for w in line order and marks those its claim took ahead of a
// free slot: the last w.ahead of what w asked for, whose start claim.sql did not record. It
// returns rows.
func markAhead(rows []*jobRow, w claimWant) []*jobRow {
	slices.SortFunc(rows, rowsInLine)
	for i, r := range rows {
		r.ahead = i >= w.limit-w.ahead
	}
	return rows
}

// chooseLockMode picks how the next claim of a MaxRunning-only queue takes its claim lock, after
// a claim that got the lock (a) and came back short or not, and reports whether to claim again at
// once. A claim under the shared lock that came back short may have been cut by its ticket's
// share, not by the limit or a lack of jobs: the next one takes the lock exclusively, at once,
// and counts exactly. A claim under the exclusive lock that came back full found the queue far
// from its limit, or at least not at it: the next one shares the lock again.
func (cl *claimer) chooseLockMode(q *queueRun, a claimAgain, short bool) (now bool) {
	if claimWay(q.way.Load()) != claimCapped || a.lockedOut {
		return false
	}
	qc := &cl.queues[q.index]
	switch {
	case a.shared && short:
		qc.exclusive = true
		return true
	case !a.shared && !short:
		qc.exclusive = false
	}
	return false
}

// unreserve stops counting the jobs a claim asked for as on their way (wantedClaims counted
// them), once it has been read or lost. The caller holds cl.mu.
func (cl *claimer) unreserve(wants []claimWant) {
	for _, w := range wants {
		qc := &cl.queues[w.q.index]
		qc.claiming -= w.limit
		qc.rounds--
	}
}

// gatherFor is how long the claim loop waits for more slots to free when a queue that wants a
// claim has few free and handlers still running: slots freed one by one would otherwise be
// refilled one claim each.
const gatherFor = 500 * time.Microsecond

// fewSlotsFree reports whether every queue that wants a claim and may claim has less than half
// its Concurrency to claim and handlers running.
func (cl *claimer) fewSlotsFree() bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	few := false
	for _, q := range cl.rt.queues {
		if !q.wantClaim.Load() {
			continue
		}
		s := cl.rt.set.counts(q)
		switch free, _ := cl.claimable(q, s); {
		case free == 0:
		case 2*free >= q.opts.Concurrency || s.busy == 0:
			return false
		default:
			few = true
		}
	}
	return few
}

// movingAverage adds the sample d to the moving average avg (zero: no sample yet), weighing it
// an eighth: the claimer's round trips, and each queue's handler run times (queueSlots.runMean).
func movingAverage(avg, d time.Duration) time.Duration {
	if avg == 0 {
		return max(d, 1)
	}
	return max(avg+(d-avg)/8, 1)
}

// wantedClaims returns the queues that want a claim and may claim, taking their wish, and
// counts the jobs it asks for as on their way (queueClaims.claiming) until the round is read.
// While rounds are in flight (inFlight of them), a queue whose last claim came back full wants
// one too, without a wish: its next jobs are likely there; but only a batch of at least half its
// Concurrency is worth another round, and only while it has fewer rounds in flight than it may
// (roundsInFlight). A queue for whose claim no connection has room (room, see claimPipes) waits
// for the next; so does a paused one, whose claims would find nothing (Resume wakes it).
func (cl *claimer) wantedClaims(inFlight int, room func(*queueRun) bool) []claimWant {
	var wants []claimWant
	for _, q := range cl.rt.queues {
		qc := &cl.queues[q.index]
		more := inFlight > 0 && !qc.empty
		if !more && !q.wantClaim.Load() || !room(q) || qc.rounds >= cl.roundsInFlight(q) || q.paused.Load() || qc.express > 0 {
			continue
		}
		if inFlight > 0 && cl.quiet(q) {
			cl.rt.w.express.signal() // its claim would wait behind the rounds in flight
			continue
		}
		free, ahead := cl.claimable(q, cl.rt.set.counts(q))
		if free == 0 || inFlight > 0 && 2*free < q.opts.Concurrency {
			continue
		}
		if q.wantClaim.Swap(false) || more {
			qc.claiming += free
			qc.rounds++
			wants = append(wants, cl.floored(claimWant{q: q, limit: free, ahead: ahead, exclusive: qc.exclusive}))
		}
	}
	return wants
}

// claimable is how many more jobs q may claim now, its slots being s, and how many of them are
// claimed ahead of a free slot: a job for each free slot not spoken for and, if the queue may
// claim ahead (claimsAhead), one ahead for each of its running handlers, and each job on its way
// in a claim round in flight, expected to be done before a claim sent now comes back: their
// number times the claim's round trip ÷ the handlers' mean run time, all of them when handlers
// are quicker than a claim, none before one has returned. The jobs waiting for a slot or on their
// way count against it. The jobs for free slots are the first in line of what it claims, and
// start as soon as the claim comes back: the slots of every job claimed or running before stay
// theirs.
//
// A job claimed ahead waits for the slot its predecessor frees, so that the claim loop sends its
// next claim while the last one's jobs still run, or are still on their way, instead of leaving
// the database idle until their slots free. A round asks for at most Concurrency less the jobs
// waiting, so the jobs waiting stay within Concurrency for each round in flight when the last was
// sent (roundsInFlight): 2×Concurrency, or 6×Concurrency for a queue claimed on either claim
// connection, three rounds in flight on each (claimPipes). The attempts claimed and not yet
// settled stay within heldPerSlot() × Concurrency besides those claimed ahead, so a completer
// that falls behind slows the claims.
func (cl *claimer) claimable(q *queueRun, s slotCounts) (n, ahead int) {
	qc := &cl.queues[q.index]
	c, expected := q.opts.Concurrency, 0
	if due := s.busy + qc.claiming; s.runMean > 0 && due > 0 && cl.claimsAhead(q, s) {
		expected = int(float64(due) * min(1, float64(cl.rtt)/float64(s.runMean)))
	}
	spoken := s.busy + s.waiting + qc.claiming
	n = max(0, min(c+expected-spoken, cl.heldPerSlot()*c+expected-s.held-qc.claiming))
	return n, n - min(n, max(c-spoken, 0))
}

// claimsAhead reports whether q may claim ahead of its free slots, its slots being s. Not with
// per-key limits or rates: a job waiting here would hold its key's place, which another process
// with a free slot could not use, or have its start logged for a rate before it starts. With a
// MaxRunning, only while its last claim found it far from the limit (under the claim lock shared:
// chooseLockMode), with its running jobs, those waiting everywhere included, within a ticket's
// share of the limit, and no claim of it held back by the limit (claim.sql): the jobs waiting
// here keep nobody from starting one. Not while paused. Not while stalled: its last job claimed
// ahead waited past aheadWaitMax, and its handlers, slower than their mean says, are to show that
// they return again.
func (cl *claimer) claimsAhead(q *queueRun, s slotCounts) bool {
	switch claimWay(q.way.Load()) {
	case claimPlain:
	case claimCapped:
		if cl.queues[q.index].exclusive {
			return false
		}
	default:
		return false
	}
	return !q.paused.Load() && !s.stalled
}

// aheadWaitMax is the longest a job claimed ahead of a free slot waits for one: a job is claimed
// ahead only for a handler expected to return within a claim's round trip (a few ms), so one
// still waiting after this is behind handlers slower than their mean said. It goes back to the
// table, uncharged and in its place, where a process with a free slot takes it
// (attemptSet.handBackOverdue), and its queue claims ahead no more until one of its handlers
// returns.
const aheadWaitMax = 100 * time.Millisecond

// heldPerSlot is the bound on a queue's attempts claimed and not yet settled, per slot:
// heldPerSlotWide in a runtime of parallelClaimMin slots or more in all, 4 in a smaller one.
func (cl *claimer) heldPerSlot() int {
	if cl.slots >= parallelClaimMin {
		return heldPerSlotWide
	}
	return 4
}

// heldPerSlotWide bounds the attempts claimed and not yet settled of a queue of a runtime with
// parallelClaimMin slots or more in all: heldPerSlotWide × Concurrency, besides those claimed
// ahead. Outcomes come in bursts of a claim's size, from claims on two connections (claimPipes),
// and a completer round trip waits for the disk: at 4 the claims of a drain of short jobs waited
// for the completer about a fifth of the time, and the machine was 2–4 points less busy than at
// 8 (16 gained nothing more); the same drain over 20 queues of 5 slots each was ~1.2× as fast at
// 8. A higher bound means more finished jobs to run again should the process die before
// settling them: what a process holds grows with its slots in all, so a small one keeps 4.
const heldPerSlotWide = 8

// roundsInFlight is how many claim rounds for q may be in flight at once: two, one running and
// the next waiting its turn on the connection, as for every queue before the claim loop had two
// connections, so that the jobs claimed ahead stay within 2×Concurrency; for a queue claimed on
// either connection, three on each (claimPipe.claimsInFlight).
func (cl *claimer) roundsInFlight(q *queueRun) int {
	if cl.claimsInParallel(q) {
		return claimConns * claimsPerConn
	}
	return 2
}

// claimsInParallel reports whether q's next claim may run beside another claim of it, on any of
// the claim loop's connections (claimPipes): it has no claim lock to take exclusively, and
// Concurrency enough (parallelClaimMin).
func (cl *claimer) claimsInParallel(q *queueRun) bool {
	switch claimWay(q.way.Load()) {
	case claimLimited:
		return false
	case claimCapped:
		if cl.queues[q.index].exclusive {
			return false
		}
	}
	return q.opts.Concurrency >= parallelClaimMin
}

// lockedOutWait is how long a limited queue whose claim lock another process held waits before
// its next claim: about one claim's round trip, after which that claim has committed.
const lockedOutWait = 2 * time.Millisecond

// claimAfter makes the claim loop look at q again after d, replacing the time set before. One
// timer per queue, stopped when the claim loop ends (stopTimers).
func (cl *claimer) claimAfter(q *queueRun, d time.Duration) {
	if t := cl.timers[q.index]; t != nil {
		t.Reset(d)
		return
	}
	cl.timers[q.index] = time.AfterFunc(d, func() {
		q.wantClaim.Store(true)
		cl.rt.w.claim.signal()
	})
}

// stopTimers stops the timers claimAfter set.
func (cl *claimer) stopTimers() {
	for _, t := range cl.timers {
		if t != nil {
			t.Stop()
		}
	}
}

// claimFailed reports the failed claim rounds noted in cl.fail, forgets them, and waits before
// the next claim: a back-off that grows with the failures in a row, cut short when the listener
// is back (so is the database). Jobs a round may have locked without its result arriving are
// taken back by the maintenance loop once their lease has run out.
func (cl *claimer) claimFailed(ctx context.Context) {
	f := &cl.fail
	var qs []*queueRun
	cl.mu.Lock()
	for _, round := range f.rounds {
		cl.unreserve(round.wants)
		for _, w := range round.wants {
			// Its rows may have been locked and never read: look from the start again.
			w.q.mark.note(linePos{}, false)
			if !slices.Contains(qs, w.q) {
				qs = append(qs, w.q)
			}
			w.q.wantClaim.Store(true)
			w.q.rescueAt.Store(time.Now().Add(w.q.opts.LockDuration).UnixNano())
		}
	}
	cl.mu.Unlock()
	err := f.err
	f.rounds, f.err = nil, nil
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // Run is ending, and its end cut the claim short (taking a connection): no error
	}
	cl.rt.w.maintain.signal()
	cl.rt.reportError(qs, "pgqueue: claim jobs", fmt.Errorf("pgqueue: claim: %w", err))
	pause := time.NewTimer(retryDelay(f.inRow))
	defer pause.Stop()
	select {
	case <-ctx.Done():
	case <-pause.C:
	case <-cl.rt.w.reconnected:
	}
}

// reportDrained emits EventDrained for each queue that has no runnable job left and no claimed
// job unsettled, once each time it goes from busy to idle.
func (cl *claimer) reportDrained() {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, q := range cl.rt.queues {
		qc := &cl.queues[q.index]
		if !qc.empty || !qc.drainPending || qc.claiming > 0 {
			continue
		}
		if cl.rt.set.counts(q).held == 0 {
			qc.drainPending = false
			q.events.emit(Event{Kind: EventDrained})
		}
	}
}
