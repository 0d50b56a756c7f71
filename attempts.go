package pgqueue

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// attemptSet is what a runtime holds of the jobs it has claimed: every attempt not yet settled or
// abandoned, the slots and waiting line of each queue, and the outcomes waiting for the
// completer. Its lock is the runtime's only shared lock, and every change of an attempt's state,
// and so of the counts derived from it, is one of its methods. The runtime's parts (claimer.go,
// handlers.go, heartbeat.go, complete.go) call them and wake each other through w; none of them
// blocks on I/O under the lock.
type attemptSet struct {
	w *wakeups

	mu     sync.Mutex
	byID   map[ulid.ULID]*attempt // the attempt that holds each job (attemptState.held)
	queues []queueSlots           // by queueRun.index
	// busy counts the handlers that hold a slot, of every queue; released those that run without
	// one (attemptState.released).
	busy, released int
	outcomes       []outcome // finished attempts waiting for the completer
	// unrecorded are attempts claimed ahead that have started, in the order they did, whose
	// starts the completer is to record; ratedStarts those of queues with a rate limit whose
	// handlers have started, whose starts it is to report (takeStarts).
	unrecorded  []*attempt
	ratedStarts []ratedStart
	// cancelHeard are jobs held here that a cancellation message named, until the heartbeat has
	// checked their rows (heartbeater.giveUp).
	cancelHeard map[ulid.ULID]bool
	// beatAll asks the next heartbeat for every lease held here (the listener reconnected: a
	// cancellation may have gone unheard), not only those due and those a message named.
	beatAll bool
	// runCtx is Run's context: once it ends, no waiting attempt starts. jobBase is what handlers'
	// contexts derive from: Run's values, not its end.
	runCtx, jobBase context.Context
	// aheadWait is how long an attempt claimed ahead waits for a slot before it goes back:
	// aheadWaitMax (a test may set it longer).
	aheadWait time.Duration
}

// queueSlots is what the set knows of one queue's slots.
type queueSlots struct {
	busy int // handlers holding a slot, counted against Concurrency
	held int // attempts that hold a job (attemptState.held)
	// waiting are attempts claimed ahead of a free slot (attemptWaiting), in the order they start
	// in.
	waiting []*attempt
	// runMean is a moving average of the handlers' run times: how soon a running one returns.
	// Zero until one has.
	runMean time.Duration
	// stalled: a job claimed ahead waited longer than aheadWaitMax and went back; the queue claims
	// ahead no more until one of its handlers returns (claimer.claimsAhead).
	stalled bool
}

func newAttemptSet(w *wakeups, queues int) *attemptSet {
	return &attemptSet{
		w:           w,
		byID:        make(map[ulid.ULID]*attempt),
		queues:      make([]queueSlots, queues),
		cancelHeard: make(map[ulid.ULID]bool),
		runCtx:      context.Background(),
		jobBase:     context.Background(),
		aheadWait:   aheadWaitMax,
	}
}

// start sets the context of Run: handlers keep its values but not its cancellation, which means
// "start no more".
func (s *attemptSet) start(runCtx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runCtx, s.jobBase = runCtx, context.WithoutCancel(runCtx)
}

// move takes a to state to, and updates what the set derives from the states: the slots taken,
// the jobs held, the handlers running without a slot, and the index by id. The caller holds
// s.mu.
func (s *attemptSet) move(a *attempt, to attemptState) {
	from := a.state
	qs := &s.queues[a.q.index]
	if d := b2i(to.holdsSlot()) - b2i(from.holdsSlot()); d != 0 {
		qs.busy += d
		s.busy += d
	}
	qs.held += b2i(to.held()) - b2i(from.held())
	s.released += b2i(to.released()) - b2i(from.released())
	if from.held() && !to.held() && s.byID[a.id] == a {
		delete(s.byID, a.id)
		delete(s.cancelHeard, a.id)
	}
	a.state = to
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// rowsInLine orders claimed rows as the queue's line does: by priority, highest first, then id.
func rowsInLine(a, b *jobRow) int {
	return cmp.Or(cmp.Compare(b.priority, a.priority), a.id.Compare(b.id))
}

// inLine orders waiting attempts as the queue's line does.
func inLine(a, b *attempt) int { return rowsInLine(a.row, b.row) }

// hold takes the rows claimed for q, under leases until leaseEnd, as its attempts, waiting in line
// order (with those already waiting) for a slot, and starts as many as there are free slots: it
// returns their handlers' tasks. A row whose job's previous attempt still runs here means that
// attempt lost its lock (its lease ran out and the job was taken back before a heartbeat
// noticed): it is given up first, returned in lost, and its EventLockLost comes before the new
// start. In a stalled queue what finds no free slot goes back at once: it was claimed ahead by a
// claim sent before the stall, and no slot is expected to free in time for it.
func (s *attemptSet) hold(q *queueRun, rows []*jobRow, leaseEnd, now time.Time) (tasks []handlerTask, lost []*attempt) {
	slices.SortFunc(rows, rowsInLine)
	var events []Event
	s.mu.Lock()
	defer s.mu.Unlock()
	qs := &s.queues[q.index]
	rated := q.logsStarts()
	for _, r := range rows {
		a := newAttempt(q, r, leaseEnd)
		a.since, a.rated = now, rated
		lost, a.prev = s.supersede(a, attemptWaiting, now, lost, &events)
		qs.waiting = append(qs.waiting, a)
	}
	if !slices.IsSortedFunc(qs.waiting, inLine) {
		// A job claimed by a round that ran beside the one before it (claimPipes): it waits
		// before those behind it in line.
		slices.SortStableFunc(qs.waiting, inLine)
	}
	tasks, started := s.startWaiting(q, now)
	q.events.emitAll(append(events, started...))
	if qs.stalled && len(qs.waiting) > 0 {
		for _, a := range qs.waiting {
			s.handBack(a)
		}
		qs.waiting = nil
		s.w.settle.signal()
	}
	return tasks, lost
}

// handBackRows queues rows claimed for q, under leases until leaseEnd, to go back to the queue
// unstarted and uncharged; each is reported as EventHandedBack once settled. An older attempt of
// a job still held here has lost it, as in hold.
func (s *attemptSet) handBackRows(q *queueRun, rows []*jobRow, leaseEnd, now time.Time) (lost []*attempt) {
	var events []Event
	s.mu.Lock()
	for _, r := range rows {
		a := newAttempt(q, r, leaseEnd)
		a.row = nil
		// An older outcome yet to be reported is settled and reported first (takeOutcomes).
		lost, _ = s.supersede(a, attemptFinishing, now, lost, &events)
		s.outcomes = append(s.outcomes, outcome{a: a, kind: outcomeRequeue})
	}
	q.events.emitAll(events)
	s.mu.Unlock()
	s.w.settle.signal()
	return lost
}

// supersede makes a, a new attempt of its job, the job's attempt here, in state to. An older
// attempt of the job still held here has lost its lock (its lease ran out and the job was claimed
// again): a running one is abandoned, appended to lost and its EventLockLost to events; a waiting
// one is dropped; one whose outcome is yet to be reported is returned (unreported). The caller
// holds s.mu.
func (s *attemptSet) supersede(a *attempt, to attemptState, now time.Time, lost []*attempt, events *[]Event) (_ []*attempt, unreported *attempt) {
	switch old := s.byID[a.id]; {
	case old == nil:
	case old.state.running():
		lost = append(lost, s.abandon(old, ErrLockLost))
		if a.q.events.active() {
			*events = append(*events, old.event(EventLockLost, now.Sub(old.started)))
		}
	case old.state == attemptWaiting:
		s.drop(old)
	case old.state.unreported():
		unreported = old
	}
	s.byID[a.id] = a
	s.move(a, to)
	return lost, unreported
}

// begin starts a at now: it is running from then on, and its handler's context, derived from
// jobBase, ends with its JobTimeout or when it is cancelled. The caller holds s.mu.
func (s *attemptSet) begin(a *attempt, jobBase context.Context, now time.Time) context.Context {
	ctx, cancel := context.WithCancelCause(jobBase)
	if a.q.opts.JobTimeout > 0 {
		a.deadline = now.Add(a.q.opts.JobTimeout)
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, a.deadline, ErrJobTimeout)
		cancelAll := cancel
		cancel = func(cause error) { cancelAll(cause); stop() }
	}
	a.started, a.cancel = now, cancel
	s.move(a, attemptRunning)
	return withAttempt(ctx, a)
}

// startWaiting starts q's waiting attempts, in order, while it has free slots, Run has not ended
// and no pause of it was heard; the starts of those claimed ahead are to be recorded
// (unrecorded). It returns their handlers' tasks and the EventStarted of each, to be emitted
// under s.mu, so that each comes before any other event of its attempt (decided under s.mu
// later), and only if the worker has an OnEvent. An EventStarted whose job's previous attempt has
// its outcome still to be reported waits in that attempt's next, so that a job's events come in
// the order of its attempts. The caller holds s.mu.
func (s *attemptSet) startWaiting(q *queueRun, now time.Time) (tasks []handlerTask, events []Event) {
	qs := &s.queues[q.index]
	for qs.busy < q.opts.Concurrency && len(qs.waiting) > 0 && s.runCtx.Err() == nil && !q.paused.Load() {
		a := qs.waiting[0]
		qs.waiting = qs.waiting[1:]
		ctx := s.begin(a, s.jobBase, now)
		tasks = append(tasks, handlerTask{ctx: ctx, a: a, r: a.row})
		a.row = nil
		if a.ahead {
			s.unrecorded = append(s.unrecorded, a)
			s.w.settle.signal() // to record its start
		}
		switch prev := a.prev; {
		case !q.events.active():
		case prev != nil && prev.state.unreported():
			prev.next = append(prev.next, a.event(EventStarted, 0))
		default:
			events = append(events, a.event(EventStarted, 0))
		}
		a.prev = nil
	}
	return tasks, events
}

// finish records the end of a's handler, which returned err, its context's cause being cause: it
// frees the slot, queues the outcome for the completer (unless the attempt was given up or
// abandoned meanwhile) and returns the attempts waiting for the slot, to run next.
func (s *attemptSet) finish(a *attempt, err, cause error, now time.Time) []handlerTask {
	elapsed := now.Sub(a.started)
	q := a.q
	queued := false
	s.mu.Lock()
	switch a.state {
	case attemptRunning, attemptInTx:
		s.move(a, attemptFinishing)
		s.outcomes = append(s.outcomes, classify(a, err, cause, elapsed))
		queued = true
	case attemptGivenUp:
		s.move(a, attemptFinishing) // its outcome waits for the completer
	case attemptOrphaned, attemptAbandoned:
		s.move(a, attemptDone)
	}
	qs := &s.queues[q.index]
	qs.runMean = movingAverage(qs.runMean, elapsed)
	qs.stalled = false
	next, started := s.startWaiting(q, now)
	q.events.emitAll(started)
	s.mu.Unlock()
	if queued {
		s.w.settle.signal()
	}
	s.w.freed.signal()
	s.w.claim.signal()
	return next
}

// abandon gives up a running attempt whose lock is gone, cancelling its handler's context with
// cause, which it records: the context may have ended before (its JobTimeout passed), and then
// keeps its first cause. The caller holds s.mu.
func (s *attemptSet) abandon(a *attempt, cause error) *attempt {
	a.stopped = cause
	s.move(a, attemptAbandoned)
	a.cancel(cause)
	return a
}

// drop gives up a waiting attempt whose lock is gone: its handler never started, so nothing is
// reported. The caller holds s.mu.
func (s *attemptSet) drop(a *attempt) {
	qs := &s.queues[a.q.index]
	qs.waiting = slices.DeleteFunc(qs.waiting, func(w *attempt) bool { return w == a })
	a.row, a.prev = nil, nil
	s.move(a, attemptDone)
}

// handBack queues a, taken out of its queue's waiting line, to go back to the queue unstarted and
// uncharged; it is reported as EventHandedBack once settled. The caller holds s.mu.
func (s *attemptSet) handBack(a *attempt) {
	a.row, a.prev = nil, nil
	s.move(a, attemptFinishing)
	s.outcomes = append(s.outcomes, outcome{a: a, kind: outcomeRequeue})
}

// handBackWaiting queues the attempts waiting for a slot, of q or (q nil) of every queue, to go
// back to the queue unstarted and uncharged: once a pause of q was heard, a claim found q near
// its MaxRunning, or Run ended. It returns how many.
func (s *attemptSet) handBackWaiting(q *queueRun) int {
	s.mu.Lock()
	n := 0
	for i := range s.queues {
		qs := &s.queues[i]
		if q != nil && i != q.index {
			continue
		}
		for _, a := range qs.waiting {
			s.handBack(a)
		}
		n += len(qs.waiting)
		qs.waiting = nil
	}
	s.mu.Unlock()
	if n > 0 {
		s.w.settle.signal()
	}
	return n
}

// handBackOverdue queues the attempts waiting for a slot to go back to the queue unstarted and
// uncharged, in each queue where one has waited longer than aheadWait by now, and marks those
// queues stalled: all of a stalled queue's waiting line goes, since its slots are not freeing as
// expected and those behind would wait in vain too (hold keeps it empty until a handler returns).
// It returns when the next waiting attempt is due to go back, zero if none waits.
func (s *attemptSet) handBackOverdue(now time.Time) (next time.Time) {
	n := 0
	s.mu.Lock()
	for i := range s.queues {
		qs := &s.queues[i]
		due := s.firstDue(qs)
		switch {
		case due.IsZero():
		case now.Before(due):
			if next.IsZero() || due.Before(next) {
				next = due
			}
		default:
			for _, a := range qs.waiting {
				s.handBack(a)
			}
			n += len(qs.waiting)
			qs.waiting = nil
			qs.stalled = true
		}
	}
	s.mu.Unlock()
	if n > 0 {
		s.w.settle.signal()
	}
	return next
}

// firstDue returns when the first of qs's waiting attempts is due to go back, zero if none waits.
// The caller holds s.mu.
func (s *attemptSet) firstDue(qs *queueSlots) (due time.Time) {
	for _, a := range qs.waiting {
		if d := a.since.Add(s.aheadWait); due.IsZero() || d.Before(due) {
			due = d
		}
	}
	return due
}

// giveUpOverdue gives up handlers still running ShutdownTimeout after their JobTimeout, those
// that completed their job with Job.CompleteTx too: their attempts fail (and are retried, or end
// failed; or count as completed if that transaction committed), their slots are freed, and
// whatever they return later is ignored. It returns the tasks of the attempts that start in the
// freed slots, and those given up.
func (s *attemptSet) giveUpOverdue(now time.Time) (tasks []handlerTask, overdue []*attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.byID {
		o := a.q.opts
		if a.state.running() && !a.deadline.IsZero() && now.After(a.deadline.Add(o.ShutdownTimeout)) {
			s.move(a, attemptGivenUp)
			err := fmt.Errorf("%w: the handler did not return within %s of its JobTimeout (%s) and was given up",
				ErrJobTimeout, o.ShutdownTimeout, o.JobTimeout)
			s.outcomes = append(s.outcomes, outcome{a: a, kind: outcomeFailed, err: err,
				final: a.attempt >= a.maxAttempts, ran: true, elapsed: now.Sub(a.started)})
			overdue = append(overdue, a)
		}
	}
	for _, a := range overdue {
		next, started := s.startWaiting(a.q, now)
		a.q.events.emitAll(started)
		tasks = append(tasks, next...)
	}
	return tasks, overdue
}

// expire gives up running attempts whose lease has surely run out by now (by the local clock,
// counted from before the claim or heartbeat that set it), and returns them; waiting ones are
// dropped.
func (s *attemptSet) expire(now time.Time) (lost []*attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.byID {
		switch {
		case !now.After(a.leaseEnd):
		case a.state == attemptRunning:
			lost = append(lost, s.abandon(a, ErrLockLost))
		case a.state == attemptWaiting:
			s.drop(a)
		}
	}
	return lost
}

// noteCancelled notes the jobs among ids that q's attempts here hold as named by a cancellation
// message, for the heartbeat to check their rows, and reports whether any is.
func (s *attemptSet) noteCancelled(q *queueRun, ids []ulid.ULID) bool {
	held := false
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if a := s.byID[id]; a != nil && a.q == q {
			s.cancelHeard[id], held = true, true
		}
	}
	return held
}

// dueBeats returns the running, waiting and finishing attempts to extend now (all after
// beatEverything, or those
// whose queue's HeartbeatInterval has passed since their lease was last set, give or take half
// of every, the heartbeat's tick), and apart the attempts completed in their handler's
// transaction. A finishing attempt's outcome is usually settled long before that; one whose row a
// settle skipped (another transaction locks it) or that waits behind a failing settle keeps its
// lease this way, so that it is not taken back and run again while its outcome waits.
//
// Woken by a cancellation message, it adds only the attempts such messages named: a bulk delete
// of running jobs commits batch after batch, each with its message, and a check of every lease
// after the first message would find the rows of the next batch gone before their message came,
// and stop those handlers as having lost their locks rather than as cancelled.
func (s *attemptSet) dueBeats(now time.Time, woken bool, every time.Duration) (running, inTx beat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.beatAll
	s.beatAll = false
	var due, tx []*attempt
	for _, a := range s.byID {
		o := a.q.opts
		dueAt := a.leaseEnd.Add(o.HeartbeatInterval - o.LockDuration - every/2)
		switch {
		case a.state == attemptInTx:
			tx = append(tx, a)
		case all || !now.Before(dueAt) || woken && s.cancelHeard[a.id]:
			due = append(due, a)
		}
	}
	return newBeat(due), newBeat(tx)
}

// beatEverything makes the next heartbeat look at every lease held here.
func (s *attemptSet) beatEverything() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beatAll = true
}

// extended applies what the heartbeat statement said of beat b, sent at sent: the leases of the
// attempts it extended, and returns the running and waiting attempts it did not return, which
// lost their lock. A job whose row another transaction locks is left for the next beat.
func (s *attemptSet) extended(b beat, held beatResult, sent time.Time) (gone []*attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range b.attempts {
		switch {
		case s.byID[a.id] != a:
			// Settled or given up meanwhile, or claimed again: the entry is a newer attempt.
		case held.extended[a.id]:
			a.leaseEnd = sent.Add(a.q.opts.LockDuration)
			delete(s.cancelHeard, a.id) // a late message, about an earlier attempt of the job
		case held.locked[a.id]:
			// Its row is locked for a moment: the next beat extends it.
		case a.state == attemptRunning || a.state == attemptWaiting:
			gone = append(gone, a)
		}
	}
	return gone
}

// extendedInTx applies what the heartbeat statement said of b, attempts completed in their
// handler's transaction, sent at sent, and returns those it did not extend.
func (s *attemptSet) extendedInTx(b beat, held beatResult, sent time.Time) (others []*attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range b.attempts {
		switch {
		case s.byID[a.id] != a:
		case held.extended[a.id]:
			a.leaseEnd = sent.Add(a.q.opts.LockDuration)
			delete(s.cancelHeard, a.id)
		default:
			others = append(others, a)
		}
	}
	return others
}

// xacts returns, of attempts, those that completed their job in a transaction of their own, with
// their ids, tokens and transactions.
func (s *attemptSet) xacts(attempts []*attempt) (ids, tokens [][16]byte, xacts []string, byID map[ulid.ULID]*attempt) {
	byID = map[ulid.ULID]*attempt{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range attempts {
		if a.xact != "" {
			ids, tokens, xacts = append(ids, a.id), append(tokens, a.token), append(xacts, a.xact)
			byID[a.id] = a
		}
	}
	return ids, tokens, xacts, byID
}

// lose gives up attempts whose lock is gone, if they are still in state (running, or inTx), or
// waiting: cancelled jobs (cancelled: the rows found cancelled, true, or there, false) with
// ErrCancelled, and deleted ones a cancellation message named (Delete with Cancel); the others
// (taken back after their lease ran out, re-claimed, deleted) with ErrLockLost. It returns the
// running attempts it gave up, by cause.
func (s *attemptSet) lose(gone []*attempt, state attemptState, cancelled map[ulid.ULID]bool) (lost, stopped []*attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range gone {
		if s.byID[a.id] != a {
			continue
		}
		_, there := cancelled[a.id]
		switch {
		case a.state == attemptWaiting:
			s.drop(a)
		case a.state != state:
		case cancelled[a.id], !there && s.cancelHeard[a.id]: // deleted with Cancel
			stopped = append(stopped, s.abandon(a, ErrCancelled))
		default:
			lost = append(lost, s.abandon(a, ErrLockLost))
		}
	}
	return lost, stopped
}

// beginCompleteTx moves a running attempt to attemptInTx before its CompleteTx statement is
// sent, and reports whether it was running (else the attempt has lost its job).
func (s *attemptSet) beginCompleteTx(a *attempt) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a.state != attemptRunning {
		return false
	}
	s.move(a, attemptInTx)
	return true
}

// endCompleteTx records how CompleteTx ended. With xact, the job was completed in that
// transaction, followed by its next run nextRun if it repeats (zero if none). Without (the
// statement failed, or matched no row), the attempt is running again: its transaction cannot
// commit the completion, so its lease and lock are checked as any other's and a takeover cancels
// its handler.
func (s *attemptSet) endCompleteTx(a *attempt, xact string, nextRun ulid.ULID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case a.state == attemptGivenUp && xact != "":
		// Given up past its JobTimeout while the statement ran: the outcome that waits for the
		// completer counts as completed if the transaction commits.
		a.xact, a.nextRun = xact, nextRun
	case a.state != attemptInTx:
		// Abandoned meanwhile (cancelled), or given up.
	case xact != "":
		a.xact, a.nextRun = xact, nextRun
	default:
		s.move(a, attemptRunning)
		a.xact = ""
		if s.cancelHeard[a.id] {
			// A cancellation of the job came while the statement ran, and the check it started
			// passed this attempt by, in its transaction then: check again, now that it runs.
			s.w.beat.signal()
		}
	}
}

// takeOutcomes takes the outcomes waiting for the completer, at most one of each job. A job
// whose lease ran out while its outcome waited (the database was away) can be claimed again, by
// this runtime too, and its newer attempt's outcome then joins the older one. The settle
// statements' results name jobs by id, so the newer outcome waits for the next batch, after the
// older one has been settled (as lost: its token is gone) and reported. So does an outcome of a
// job in skipped: one whose older outcome a settle skipped and that waits to be settled again.
func (s *attemptSet) takeOutcomes(skipped map[ulid.ULID]bool) []outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	batch := s.outcomes
	s.outcomes = nil
	seen := make(map[ulid.ULID]bool, len(batch))
	n := 0
	for _, o := range batch {
		if seen[o.a.id] || skipped[o.a.id] {
			s.outcomes = append(s.outcomes, o)
			continue
		}
		seen[o.a.id] = true
		batch[n] = o
		n++
	}
	return batch[:n]
}

// putBackOutcomes puts outcomes back, ahead of the outcomes that came since.
func (s *attemptSet) putBackOutcomes(batch []outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes = append(batch, s.outcomes...)
}

// completedTx is what Job.CompleteTx recorded of an attempt: the transaction that completed its
// job ("" if none), and the next run that transaction enqueued, if the job repeats.
type completedTx struct {
	xact string
	next ulid.ULID
}

// completedInTx returns, for each outcome of batch, what CompleteTx recorded of its attempt.
func (s *attemptSet) completedInTx(batch []outcome) []completedTx {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx := make([]completedTx, len(batch))
	for i, o := range batch {
		tx[i] = completedTx{xact: o.a.xact, next: o.a.nextRun}
	}
	return tx
}

// settled records that the outcomes of batch were settled and reported, and returns the attempts
// whose newer attempts' events waited for that report (attempt.next), to emit them: nothing
// appends to next any more.
func (s *attemptSet) settled(batch []outcome) (waited []*attempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range batch {
		switch o.a.state {
		case attemptFinishing:
			s.move(o.a, attemptDone)
		case attemptGivenUp:
			s.move(o.a, attemptOrphaned)
		}
		if len(o.a.next) > 0 {
			waited = append(waited, o.a)
		}
	}
	return waited
}

// ratedStart is the start of a handler of a queue with a rate limit, and when it started.
type ratedStart struct {
	a  *attempt
	at time.Time
}

// ratedStarted notes that the handler of a, whose start was logged for a rate, starts now, for
// the completer to report (takeStarts). Until then the start holds its place in the rate's
// windows (pgqueue_start_holds).
func (s *attemptSet) ratedStarted(a *attempt, now time.Time) {
	s.mu.Lock()
	s.ratedStarts = append(s.ratedStarts, ratedStart{a: a, at: now})
	s.mu.Unlock()
	s.w.settle.signal()
}

// starts are what the completer writes of starts: those of attempts claimed ahead
// (record_starts.sql) and those of handlers of queues with a rate limit (record_rate_starts.sql).
type starts struct {
	ahead, rated []*attempt
}

func (st starts) empty() bool { return len(st.ahead) == 0 && len(st.rated) == 0 }

// takeStarts takes the starts for the completer to write by now, and returns when the next is
// due (zero if none waits). Of attempts claimed ahead, those whose handlers have run
// startRecordAfter and still run; those whose handlers returned meanwhile are forgotten: their
// outcome records their start. Of queues with a rate limit, every handler's that started
// ratedReportAfter ago, whatever became of it since.
func (s *attemptSet) takeStarts(now time.Time) (st starts, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	later := func(at time.Time) {
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	kept := s.unrecorded[:0]
	for _, a := range s.unrecorded {
		switch {
		case !a.state.running():
		case now.Sub(a.started) >= startRecordAfter:
			st.ahead = append(st.ahead, a)
		default:
			later(a.started.Add(startRecordAfter))
			kept = append(kept, a)
		}
	}
	clear(s.unrecorded[len(kept):])
	s.unrecorded = kept
	n := 0
	for _, r := range s.ratedStarts {
		if now.Sub(r.at) >= ratedReportAfter {
			st.rated = append(st.rated, r.a)
			continue
		}
		later(r.at.Add(ratedReportAfter))
		s.ratedStarts[n] = r
		n++
	}
	clear(s.ratedStarts[n:])
	s.ratedStarts = s.ratedStarts[:n]
	return st, next
}

// putBackStarts puts back starts whose write failed, to be written with the next batch.
func (s *attemptSet) putBackStarts(st starts) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unrecorded = append(st.ahead, s.unrecorded...)
	for _, a := range st.rated {
		s.ratedStarts = append(s.ratedStarts, ratedStart{a: a}) // due at once
	}
}

// slotCounts is what the set knows of one queue's slots, for the claimer to decide how much to
// claim (claimer.claimable).
type slotCounts struct {
	busy, waiting, held int
	runMean             time.Duration
	stalled             bool
}

// counts returns what the set knows of q's slots. Between this and the claim the claimer sends,
// the numbers only change towards more room: handlers return, waiting jobs start or go back.
func (s *attemptSet) counts(q *queueRun) slotCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	qs := &s.queues[q.index]
	return slotCounts{busy: qs.busy, waiting: len(qs.waiting), held: qs.held, runMean: qs.runMean, stalled: qs.stalled}
}

// busyHandlers is how many handlers run, in a slot or not.
func (s *attemptSet) busyHandlers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy + s.released
}

// runningIn reports, for shutdown, whether any handler holds a slot, and whether one of q's does.
func (s *attemptSet) runningIn(q *queueRun) (any, ofQ bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy > 0, s.queues[q.index].busy > 0
}

// cancelRunning cancels, with cause, the contexts of q's running handlers.
func (s *attemptSet) cancelRunning(q *queueRun, cause error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.byID {
		if a.q == q && a.state.running() {
			a.cancel(cause)
		}
	}
}

// giveUpStuck gives up the handlers still running after shutdown, their jobs handed back, and
// returns how many of each queue.
func (s *attemptSet) giveUpStuck(now time.Time) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	stuck := map[string]int{}
	for _, a := range s.byID {
		if a.state.running() {
			s.move(a, attemptGivenUp)
			stuck[a.q.name]++
			s.outcomes = append(s.outcomes, outcome{a: a, kind: outcomeRequeue, ran: true, elapsed: now.Sub(a.started)})
		}
	}
	return stuck
}

// runInline starts an attempt of the row r claimed for q, under a lease until leaseEnd, at once,
// its handler's context derived from jobBase (Worker.WorkOne); its EventStarted is emitted under
// s.mu, before any other event of it, as in hold.
func (s *attemptSet) runInline(q *queueRun, r *jobRow, leaseEnd time.Time, jobBase context.Context) (*attempt, context.Context) {
	a := newAttempt(q, r, leaseEnd)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[a.id] = a
	ctx := s.begin(a, jobBase, time.Now())
	a.row = nil
	if q.events.active() {
		q.events.emit(a.event(EventStarted, 0))
	}
	return a, ctx
}

// stoppedBy returns why a was abandoned while its handler ran (ErrLockLost, ErrCancelled); nil
// if it was not.
func (s *attemptSet) stoppedBy(a *attempt) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return a.stopped
}
