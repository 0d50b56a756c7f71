package pgqueue

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oklog/ulid/v2"
)

// runtime serves the queues of one Client.Run call: one claim loop (fetch.go), one heartbeat
// (heartbeat.go), one completer (complete.go) and one maintenance loop (maintain.go), around the
// set of claimed attempts and the slots of each queue, which this file keeps. Every change of an
// attempt's state and of the slot counts happens under mu, in the methods of this file and
// attempt.go.
type runtime struct {
	c      *Client
	queues []*queueRun
	byName map[string]*queueRun
	// heartbeatEvery is the shortest HeartbeatInterval of the queues: the heartbeat's tick.
	heartbeatEvery time.Duration
	// slots is the Concurrency of its queues, summed (queueRun.heldPerSlot).
	slots int

	mu       sync.Mutex
	attempts map[ulid.ULID]*attempt // claimed and not yet settled or abandoned
	outcomes []outcome              // finished attempts waiting for the completer
	busy     int                    // handlers running, of every queue
	released int                    // handlers given up (giveUpOverdue) and still running
	handlers int                    // handler goroutines alive (handlers.go)
	// cancelHeard are jobs held here that a cancellation message named, until the heartbeat has
	// checked their rows (cancelAttempts).
	cancelHeard map[ulid.ULID]bool
	// skippedJobs are jobs whose outcome a settle skipped (its row locked by another
	// transaction) and that the completer holds to settle again: a newer outcome of one waits
	// for it (takeOutcomes).
	skippedJobs map[ulid.ULID]bool
	// unrecorded are attempts claimed ahead of a free slot that have started, in the order they
	// did, whose start the completer is to record (takeUnrecorded).
	unrecorded []*attempt

	wakeFetch   chan struct{}    // a queue wants a claim, a slot freed, or outcomes were settled
	wakeMaint   chan struct{}    // a queue wants promotion, or a rescue was asked for
	settle      chan struct{}    // outcomes wait for the completer
	freed       chan struct{}    // a handler returned or was given up (shutdown waits on it)
	checkLeases chan struct{}    // heartbeat now: the listener reconnected, or a job held here was cancelled
	reconnected chan struct{}    // the listener reconnected: the database is back
	handlerWork chan handlerTask // to an idle handler goroutine (handlers.go)
	stopped     chan struct{}    // closed once Run's handlers are done: idle handler goroutines end

	runCtx  context.Context // Run's: once it ends, no waiting attempt starts
	jobBase context.Context // what handlers' contexts derive from: Run's values, not its end
	// claimRTT is the claim loop's own: a moving average of its round trips' duration.
	claimRTT time.Duration

	periodics []*periodicSpec // declared on the workers: the scheduler's (scheduler.go)
}

// queueRun is one queue of a runtime: its worker's options and handler, its slots, and what the
// runtime's loops want to do for it.
type queueRun struct {
	rt     *runtime
	name   string
	opts   WorkerOptions
	exec   func(context.Context, *jobRow, *attempt) error
	log    *slog.Logger
	events *emitter
	sub    *subscription
	keep   bool // retention keeps completed jobs

	wantClaim   atomic.Bool   // it may have available jobs: claim when a slot is free
	wantPromote atomic.Bool   // it may have due scheduled jobs, or a new next due time
	rescueAt    atomic.Int64  // unix ns after which to look for expired leases; 0: at the poll
	wantLimits  atomic.Bool   // its limits may have changed: read whether it has any
	way         atomic.Uint32 // a claimWay: how its limits have it claimed
	rated       atomic.Bool   // it has a rate limit: rate_wait.sql follows its claims
	// watchedUntil is the unix ns until which a Watch of it was last heard to be open (msgWatched,
	// or its row at a poll: queue_flags.sql): the outcomes of jobs claimed before it began are
	// announced too.
	watchedUntil atomic.Int64
	// paused: a pause of it was heard (msgPaused, or its row at a poll): none of its jobs starts
	// here, and those claimed go back. pauseHeard counts the pause and resume messages heard, so
	// that a read of its row sent before one of them does not undo it.
	paused     atomic.Bool
	pauseHeard atomic.Uint64

	// Guarded by rt.mu.
	busy int // handlers running, counted against Concurrency
	held int // attempts claimed and not yet settled or abandoned
	// claiming is how many jobs the claim rounds in flight ask for (the claim loop's pipeline),
	// and rounds how many rounds they are.
	claiming, rounds int
	// waiting are attempts claimed ahead of a free slot (attemptWaiting), in the order they
	// start in.
	waiting []*attempt
	// runMean is a moving average of its handlers' run times: how soon a running one returns.
	// Zero until one has.
	runMean time.Duration
	// stalled: a job claimed ahead waited longer than aheadWaitMax and went back; it claims ahead
	// no more until one of its handlers returns.
	stalled bool

	// The fetch loop's own.
	empty        bool        // the last claim found fewer jobs than it asked for
	exclusive    bool        // its next claim takes the claim lock exclusively (chooseLockMode)
	again        *time.Timer // claims again after a lock held elsewhere or a rate's wait
	drainPending bool        // EventDrained is owed once the queue is empty and idle

	// The maintenance loop's own.
	nextPoll time.Time
	nextDue  time.Time // when the next scheduled job falls due; zero: none known
}

func newRuntime(c *Client, specs []*workerSpec) *runtime {
	rt := &runtime{
		c:           c,
		byName:      make(map[string]*queueRun, len(specs)),
		attempts:    make(map[ulid.ULID]*attempt),
		cancelHeard: make(map[ulid.ULID]bool),
		skippedJobs: make(map[ulid.ULID]bool),
		wakeFetch:   make(chan struct{}, 1),
		wakeMaint:   make(chan struct{}, 1),
		settle:      make(chan struct{}, 1),
		freed:       make(chan struct{}, 1),
		checkLeases: make(chan struct{}, 1),
		reconnected: make(chan struct{}, 1),
		handlerWork: make(chan handlerTask),
		stopped:     make(chan struct{}),
		runCtx:      context.Background(), // run sets both
		jobBase:     context.Background(),
	}
	for _, s := range specs {
		log := s.opts.Logger.With("queue", s.queue)
		q := &queueRun{
			rt:           rt,
			name:         s.queue,
			opts:         s.opts,
			exec:         s.exec,
			log:          log,
			events:       newEmitter(s.queue, c.cfg.ID, bothOnEvent(s.opts.OnEvent, c.cfg.OnEvent), log),
			keep:         c.cfg.retentionOf(s.queue).Completed != 0,
			drainPending: true,
		}
		q.wantClaim.Store(true)
		q.wantPromote.Store(true)
		s.schedMu.Lock()
		rt.periodics = append(rt.periodics, s.periodics...)
		s.schedMu.Unlock()
		rt.queues = append(rt.queues, q)
		rt.byName[q.name] = q
		rt.slots += s.opts.Concurrency
		if rt.heartbeatEvery == 0 || s.opts.HeartbeatInterval < rt.heartbeatEvery {
			rt.heartbeatEvery = s.opts.HeartbeatInterval
		}
	}
	// In name order, so that every claim round lists its queues in name order: claim.sql takes
	// the held locks of the capped queues it is held back on in that order, as the settles do
	// (migration 20261206120000).
	slices.SortFunc(rt.queues, func(a, b *queueRun) int { return cmp.Compare(a.name, b.name) })
	return rt
}

// run serves the queues until ctx ends, then shuts down: see Client.Run.
func (rt *runtime) run(ctx context.Context) error {
	if err := rt.c.checkSchemaBeforeRun(ctx); err != nil {
		return err
	}
	// Handlers keep ctx's values but not its cancellation, which means "stop claiming".
	rt.runCtx, rt.jobBase = ctx, context.WithoutCancel(ctx)
	for _, q := range rt.queues {
		q.events.start()
		q.sub = rt.c.listener.subscribe(q.name, q.onMessage)
	}

	// The heartbeat and completer outlive ctx: they must keep leases and settle outcomes while
	// the handlers finish. Maintenance stops with ctx.
	bg, stopBackground := context.WithCancel(context.WithoutCancel(ctx))
	var background sync.WaitGroup
	background.Go(func() { rt.heartbeatLoop(bg) })
	background.Go(func() { rt.completeLoop(bg) })
	var maintenance sync.WaitGroup
	maintenance.Go(func() { rt.maintainLoop(ctx) })
	if len(rt.periodics) > 0 {
		maintenance.Go(func() { newScheduler(rt, rt.periodics).loop(ctx) })
	}

	rt.fetchLoop(ctx)
	rt.handBackWaiting()
	err := rt.stopHandlers()
	close(rt.stopped)
	rt.waitIdleHandlers()
	maintenance.Wait()
	stopBackground()
	background.Wait()
	for _, q := range rt.queues {
		q.sub.close()
	}
	rt.closeEvents()
	return err
}

// closeEvents waits, up to each worker's ShutdownTimeout, for OnEvent to take the last events.
// An OnEvent that blocks past it is left to finish on its own.
func (rt *runtime) closeEvents() {
	var wg sync.WaitGroup
	for _, q := range rt.queues {
		wg.Go(func() {
			if !q.events.close(q.opts.ShutdownTimeout) {
				q.log.Error("pgqueue: OnEvent still blocks after ShutdownTimeout; Run returns without it")
			}
		})
	}
	wg.Wait()
}

// claimable is how many more jobs q may claim now (with rt.mu held), when a claim takes about
// rtt, and how many of them are claimed ahead of a free slot: a job for each free slot not
// spoken for and, if the queue may claim ahead (claimsAhead), one ahead for each of its running
// handlers, and each job on its way in a claim round in flight, expected to be done before a
// claim sent now comes back: their number times rtt ÷ the handlers' mean run time, all of them
// when handlers are quicker than a claim, none before one has returned. The jobs waiting for a
// slot or on their way count against it. The jobs for free slots are the first in line of what
// it claims, and start as soon as the claim comes back: the slots of every job claimed or
// running before stay theirs.
//
// A job claimed ahead waits for the slot its predecessor frees, so that the claim loop sends
// its next claim while the last one's jobs still run, or are still on their way, instead of
// leaving the database idle until their slots free. A round asks for at most Concurrency less
// the jobs waiting, so the jobs waiting stay within Concurrency for each round in flight when
// the last was sent (queueRun.roundsInFlight): 2×Concurrency, or 6×Concurrency for a queue
// claimed on either claim connection, three rounds in flight on each (claimPipes). The attempts
// claimed and not yet settled stay within heldPerSlot() × Concurrency besides those claimed
// ahead, so a completer that falls behind slows the claims.
func (q *queueRun) claimable(rtt time.Duration) (n, ahead int) {
	c, expected := q.opts.Concurrency, 0
	if due := q.busy + q.claiming; q.runMean > 0 && due > 0 && q.claimsAhead() {
		expected = int(float64(due) * min(1, float64(rtt)/float64(q.runMean)))
	}
	spoken := q.busy + len(q.waiting) + q.claiming
	n = max(0, min(c+expected-spoken, q.heldPerSlot()*c+expected-q.held-q.claiming))
	return n, n - min(n, max(c-spoken, 0))
}

// claimsAhead reports whether q may claim ahead of its free slots (with rt.mu held). Not with
// per-key limits or rates: a job waiting here would hold its key's place, which another process
// with a free slot could not use, or have its start logged for a rate before it starts. With a
// MaxRunning, only while its last claim found it far from the limit (under the claim lock shared:
// chooseLockMode), with its running jobs, those waiting everywhere included, within a ticket's
// share of the limit: the jobs waiting here keep nobody from starting one. Once a claim finds it
// nearer, its waiting jobs go back (took). Not while paused. Not while stalled: its last job
// claimed ahead waited past aheadWaitMax, and its handlers, slower than their mean says, are to
// show that they return again.
func (q *queueRun) claimsAhead() bool {
	switch claimWay(q.way.Load()) {
	case claimPlain:
	case claimCapped:
		if q.exclusive {
			return false
		}
	default:
		return false
	}
	return !q.paused.Load() && !q.stalled
}

// aheadWaitMax is the longest a job claimed ahead of a free slot waits for one: a job is claimed
// ahead only for a handler expected to return within a claim's round trip (a few ms), so one
// still waiting after this is behind handlers slower than their mean said. It goes back to the
// table, uncharged and in its place, where a process with a free slot takes it
// (handBackOverdue), and its queue claims ahead no more until one of its handlers returns.
const aheadWaitMax = 100 * time.Millisecond

// heldPerSlot is the bound on q's attempts claimed and not yet settled, per slot: heldPerSlotWide
// in a runtime of parallelClaimMin slots or more in all, 4 in a smaller one.
func (q *queueRun) heldPerSlot() int {
	if q.rt.slots >= parallelClaimMin {
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

// start takes the rows claimed for q as its attempts, waiting in line order (with those already
// waiting) for a slot, and starts as many as there are free slots. A row whose job's previous
// attempt still runs here means that attempt lost its lock (its lease ran out and the job was
// taken back before a heartbeat noticed): it is given up first, and its EventLockLost comes
// before the new start.
func (rt *runtime) start(q *queueRun, rows []*jobRow, leaseEnd time.Time) {
	slices.SortFunc(rows, rowsInLine)
	now := time.Now()
	var lost []*attempt
	var events []Event
	rt.mu.Lock()
	for _, r := range rows {
		a := q.newAttempt(r, leaseEnd)
		a.since = now
		lost, a.prev = rt.supersede(a, now, lost, &events)
		q.waiting = append(q.waiting, a)
	}
	if !slices.IsSortedFunc(q.waiting, inLine) {
		// A job claimed by a round that ran beside the one before it (claimPipes), or one that
		// came back into line since: it waits before those behind it in line.
		slices.SortStableFunc(q.waiting, inLine)
	}
	tasks, started := rt.startWaiting(q, now)
	q.events.emitAll(append(events, started...))
	rt.mu.Unlock()
	rt.runHandlers(tasks)
	rt.logLost(lost)
	if len(lost) > 0 {
		signal(rt.wakeFetch)
	}
}

// rowsInLine orders claimed rows as the queue's line does: by priority, highest first, then id.
func rowsInLine(a, b *jobRow) int {
	return cmp.Or(cmp.Compare(b.priority, a.priority), a.id.Compare(b.id))
}

// inLine orders waiting attempts as the queue's line does.
func inLine(a, b *attempt) int { return rowsInLine(a.row, b.row) }

// supersede makes a, a new attempt of its job, the job's attempt here. An older attempt of the
// job still held here has lost its lock (its lease ran out and the job was claimed again): a
// running one is abandoned, appended to lost and its EventLockLost to events; a waiting one is
// dropped; one whose outcome is yet to be reported is returned (unreported). The caller holds
// rt.mu.
func (rt *runtime) supersede(a *attempt, now time.Time, lost []*attempt, events *[]Event) (_ []*attempt, unreported *attempt) {
	switch old := rt.attempts[a.id]; {
	case old == nil:
	case old.state == attemptRunning || old.state == attemptInTx:
		lost = append(lost, rt.abandon(old, ErrLockLost))
		if a.q.events.active() {
			*events = append(*events, old.event(EventLockLost, now.Sub(old.started)))
		}
	case old.state == attemptWaiting:
		rt.drop(old)
	case old.state == attemptFinishing && !old.reported:
		unreported = old
	}
	rt.attempts[a.id] = a
	a.q.held++
	return lost, unreported
}

// newAttempt makes the attempt of a claimed row, waiting for a slot: its handler's context is
// made when it starts (begin).
func (q *queueRun) newAttempt(r *jobRow, leaseEnd time.Time) *attempt {
	return &attempt{
		q:           q,
		id:          r.id,
		token:       r.token,
		attempt:     r.attempt,
		maxAttempts: r.maxAttempts,
		watched:     r.watched,
		repeats:     r.repeatRemaining != 0,
		cancel:      func(error) {},
		leaseEnd:    leaseEnd,
		state:       attemptWaiting,
		row:         r,
		ahead:       r.ahead,
	}
}

// begin starts a waiting attempt at now: it is running from then on, and its handler's context,
// derived from jobBase, ends with its JobTimeout or when it is cancelled. The caller holds rt.mu,
// or has not yet made a known to the other loops.
func (q *queueRun) begin(jobBase context.Context, a *attempt, now time.Time) context.Context {
	ctx, cancel := context.WithCancelCause(jobBase)
	if q.opts.JobTimeout > 0 {
		a.deadline = now.Add(q.opts.JobTimeout)
		var stop context.CancelFunc
		ctx, stop = context.WithDeadlineCause(ctx, a.deadline, ErrJobTimeout)
		cancelAll := cancel
		cancel = func(cause error) { cancelAll(cause); stop() }
	}
	a.state, a.started, a.cancel = attemptRunning, now, cancel
	return withAttempt(ctx, a)
}

// startWaiting starts q's waiting attempts, in order, while it has free slots, Run has not
// ended and no pause of it was heard; the starts of those claimed ahead are to be recorded
// (rt.unrecorded). It returns their handlers' tasks and the EventStarted of each, to be emitted under
// rt.mu, so that each comes before any other event of its attempt (decided under rt.mu later),
// and only if the worker has an OnEvent. An EventStarted whose job's previous attempt has its
// outcome still to be reported waits in that attempt's next, so that a job's events come in the
// order of its attempts. The caller holds rt.mu.
func (rt *runtime) startWaiting(q *queueRun, now time.Time) (tasks []handlerTask, events []Event) {
	for q.busy < q.opts.Concurrency && len(q.waiting) > 0 && rt.runCtx.Err() == nil && !q.paused.Load() {
		a := q.waiting[0]
		q.waiting = q.waiting[1:]
		ctx := q.begin(rt.jobBase, a, now)
		q.busy++
		rt.busy++
		if a.ahead {
			rt.unrecorded = append(rt.unrecorded, a)
			signal(rt.settle) // to record its start
		}
		tasks = append(tasks, handlerTask{ctx: ctx, a: a, r: a.row})
		a.row = nil
		switch prev := a.prev; {
		case !q.events.active():
		case prev != nil && !prev.reported:
			prev.next = append(prev.next, a.event(EventStarted, 0))
		default:
			events = append(events, a.event(EventStarted, 0))
		}
		a.prev = nil
	}
	return tasks, events
}

// runAttempt runs one attempt's handler and queues its outcome for the completer. It returns the
// tasks of the waiting attempts of its queue that start in the slot it freed, for the caller to
// run.
func (rt *runtime) runAttempt(ctx context.Context, a *attempt, r *jobRow) []handlerTask {
	a.q.logJob(a, "pgqueue: job started")
	returned := false
	defer func() {
		if !returned {
			// The handler called runtime.Goexit (t.FailNow in a test's handler, say), which
			// ends this goroutine once its deferred calls have run: the attempt ends here, as a
			// failure, and the attempts waiting for its slot go to other goroutines.
			rt.runHandlers(rt.finishAttempt(ctx, a, errGoexit))
		}
	}()
	err := a.q.call(ctx, r, a)
	returned = true
	return rt.finishAttempt(ctx, a, err)
}

// finishAttempt records the end of a's handler, which returned err: it frees the slot, queues
// the outcome for the completer (unless the attempt was abandoned meanwhile) and returns the
// attempts waiting for the slot, to run next.
func (rt *runtime) finishAttempt(ctx context.Context, a *attempt, err error) []handlerTask {
	cause := context.Cause(ctx)
	a.cancel(nil)
	now := time.Now()
	elapsed := now.Sub(a.started)

	q := a.q
	rt.mu.Lock()
	if a.released {
		rt.released--
	} else {
		q.busy--
		rt.busy--
	}
	queued := a.state == attemptRunning || a.state == attemptInTx
	if queued {
		a.state = attemptFinishing
		rt.outcomes = append(rt.outcomes, classify(a, err, cause, elapsed))
	}
	q.runMean = movingAverage(q.runMean, elapsed)
	q.stalled = false
	next, started := rt.startWaiting(q, now)
	q.events.emitAll(started)
	rt.mu.Unlock()
	if queued {
		signal(rt.settle)
	}
	signal(rt.freed)
	signal(rt.wakeFetch)
	return next
}

// call runs the worker's middleware and handler, turning a panic anywhere in them into a
// *PanicError.
func (q *queueRun) call(ctx context.Context, r *jobRow, a *attempt) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	return q.exec(ctx, r, a)
}

// handBack queues rows claimed for q, under leases until leaseEnd, to go back to the queue
// unstarted and uncharged; each is reported as EventHandedBack once settled. An older attempt of
// a job still held here has lost it, as in start.
func (rt *runtime) handBack(q *queueRun, rows []*jobRow, leaseEnd time.Time) {
	now := time.Now()
	var lost []*attempt
	var events []Event
	rt.mu.Lock()
	for _, r := range rows {
		a := q.newAttempt(r, leaseEnd)
		a.state, a.row = attemptFinishing, nil
		// An older outcome yet to be reported is settled and reported first (takeOutcomes).
		lost, _ = rt.supersede(a, now, lost, &events)
		rt.outcomes = append(rt.outcomes, outcome{a: a, kind: outcomeRequeue})
	}
	q.events.emitAll(events)
	rt.mu.Unlock()
	signal(rt.settle)
	rt.logLost(lost)
}

// abandon gives up a running attempt whose lock is gone, cancelling its handler's context with
// cause, which it records: the context may have ended before (its JobTimeout passed), and then
// keeps its first cause. The caller holds rt.mu.
func (rt *runtime) abandon(a *attempt, cause error) *attempt {
	a.state, a.stopped = attemptAbandoned, cause
	rt.forget(a)
	a.cancel(cause)
	return a
}

// drop gives up a waiting attempt whose lock is gone: its handler never started, so nothing is
// reported. The caller holds rt.mu.
func (rt *runtime) drop(a *attempt) {
	a.state = attemptAbandoned
	a.q.waiting = slices.DeleteFunc(a.q.waiting, func(w *attempt) bool { return w == a })
	a.row, a.prev = nil, nil
	rt.forget(a)
}

// handBackWaiting queues the attempts still waiting for a slot, once Run has ended, to go back
// to the queue unstarted and uncharged, as handBack does.
func (rt *runtime) handBackWaiting() {
	rt.mu.Lock()
	n := 0
	for _, q := range rt.queues {
		n += rt.handBackLine(q, len(q.waiting))
	}
	rt.mu.Unlock()
	if n > 0 {
		signal(rt.settle)
	}
}

// handBackQueue queues the attempts of q waiting for a slot to go back to the queue unstarted
// and uncharged: once a pause of q was heard, or a claim found q near its MaxRunning.
func (rt *runtime) handBackQueue(q *queueRun) {
	rt.mu.Lock()
	n := rt.handBackLine(q, len(q.waiting))
	rt.mu.Unlock()
	if n > 0 {
		signal(rt.settle)
	}
}

// handBackOverdue queues the attempts that have waited for a slot longer than aheadWaitMax by now
// to go back to the queue unstarted and uncharged, and marks their queues stalled
// (queueRun.claimsAhead); it returns when the next waiting attempt is due to go back, zero if
// none waits.
func (rt *runtime) handBackOverdue(now time.Time) (next time.Time) {
	rt.mu.Lock()
	n := 0
	for _, q := range rt.queues {
		waited := func(a *attempt) bool { return !now.Before(a.since.Add(aheadWaitMax)) }
		for _, a := range q.waiting {
			if due := a.since.Add(aheadWaitMax); !waited(a) && (next.IsZero() || due.Before(next)) {
				next = due
			}
		}
		before := len(q.waiting)
		// The waiting line keeps the queue's order with those that go back taken out.
		q.waiting = slices.DeleteFunc(q.waiting, func(a *attempt) bool {
			if waited(a) {
				rt.handBackWaiter(a)
				return true
			}
			return false
		})
		if len(q.waiting) < before {
			q.stalled = true
			n += before - len(q.waiting)
		}
	}
	rt.mu.Unlock()
	if n > 0 {
		signal(rt.settle)
	}
	return next
}

// handBackLine queues the last n attempts of q's waiting line to go back to the queue unstarted
// and uncharged (handBackWaiter), and returns n. The caller holds rt.mu.
func (rt *runtime) handBackLine(q *queueRun, n int) int {
	for _, a := range q.waiting[len(q.waiting)-n:] {
		rt.handBackWaiter(a)
	}
	q.waiting = q.waiting[:len(q.waiting)-n]
	return n
}

// handBackWaiter queues a, taken out of its queue's waiting line, to go back to the queue
// unstarted and uncharged; it is reported as EventHandedBack once settled. The caller holds
// rt.mu.
func (rt *runtime) handBackWaiter(a *attempt) {
	a.state, a.row, a.prev = attemptFinishing, nil, nil
	rt.outcomes = append(rt.outcomes, outcome{a: a, kind: outcomeRequeue})
}

// forget stops counting a settled or abandoned attempt against its queue's held attempts, once,
// and removes it from the runtime's attempts unless a newer attempt of the job took its place
// there. The caller holds rt.mu.
func (rt *runtime) forget(a *attempt) {
	if a.forgotten {
		return
	}
	a.forgotten = true
	a.q.held--
	if rt.attempts[a.id] == a {
		delete(rt.attempts, a.id)
		delete(rt.cancelHeard, a.id)
	}
}

// giveUpOverdue gives up handlers still running ShutdownTimeout after their JobTimeout, those
// that completed their job with Job.CompleteTx too: their attempts fail (and are retried, or end
// failed; or count as completed if that transaction committed), their slots are freed, and
// whatever they return later is ignored.
func (rt *runtime) giveUpOverdue(now time.Time) {
	var overdue []*attempt
	var tasks []handlerTask
	rt.mu.Lock()
	for _, a := range rt.attempts {
		o := a.q.opts
		running := a.state == attemptRunning || a.state == attemptInTx
		if running && !a.deadline.IsZero() && now.After(a.deadline.Add(o.ShutdownTimeout)) {
			a.state, a.released = attemptFinishing, true
			a.q.busy--
			rt.busy--
			rt.released++
			err := fmt.Errorf("%w: the handler did not return within %s of its JobTimeout (%s) and was given up",
				ErrJobTimeout, o.ShutdownTimeout, o.JobTimeout)
			rt.outcomes = append(rt.outcomes, outcome{a: a, kind: outcomeFailed, err: err,
				final: a.attempt >= a.maxAttempts, elapsed: now.Sub(a.started)})
			overdue = append(overdue, a)
		}
	}
	for _, a := range overdue {
		next, started := rt.startWaiting(a.q, now)
		a.q.events.emitAll(started)
		tasks = append(tasks, next...)
	}
	rt.mu.Unlock()
	rt.runHandlers(tasks)
	for _, a := range overdue {
		a.q.log.LogAttrs(context.Background(), slog.LevelError,
			"pgqueue: gave up a handler that ignores its context; its goroutine is left running",
			append(a.logAttrs(), slog.Duration("timeout", a.q.opts.JobTimeout))...)
	}
	if len(overdue) > 0 {
		signal(rt.settle)
		signal(rt.freed)
		signal(rt.wakeFetch)
	}
}

// onMessage handles the listener's messages about q. It runs on the listener's goroutine, so it
// only records what is wanted and wakes the loops that do it; it never calls user code.
func (q *queueRun) onMessage(m message) {
	rt := q.rt
	switch m.kind {
	case msgAvailable:
		q.wantClaim.Store(true)
		signal(rt.wakeFetch)
	case msgResumed:
		q.pauseHeard.Add(1)
		q.paused.Store(false)
		q.wantClaim.Store(true)
		signal(rt.wakeFetch)
	case msgPaused:
		q.pauseHeard.Add(1)
		q.paused.Store(true)
		rt.handBackQueue(q)
	case msgScheduled:
		q.wantPromote.Store(true)
		signal(rt.wakeMaint)
	case msgLimits:
		// Whether it has limits decides how it is claimed; new limits may leave room.
		q.wantLimits.Store(true)
		q.wantClaim.Store(true)
		signal(rt.wakeMaint)
		signal(rt.wakeFetch)
	case msgCancelled, msgDeleted:
		if m.kind == msgCancelled {
			rt.cancelAttempts(q, m.ids)
		}
		if claimWay(q.way.Load()) != claimPlain {
			// A job that ends by a cancel or a delete may free a place under the queue's limits
			// (a running job's, or a key's held by a job waiting for its retry), and no settle of
			// it will say so.
			q.wantClaim.Store(true)
			signal(rt.wakeFetch)
		}
	case msgWatched:
		q.heardWatched(time.Now().Add(watchTTL))
	case msgListening, msgResync:
		// Notifications sent before the LISTEN took effect, or while the listener was away,
		// were not heard: look at the queue again, and at the leases (a job may have been
		// cancelled meanwhile).
		q.wantClaim.Store(true)
		q.wantPromote.Store(true)
		q.wantLimits.Store(true)
		signal(rt.wakeFetch)
		signal(rt.wakeMaint)
		signal(rt.checkLeases)
		if m.kind == msgResync {
			signal(rt.reconnected) // the database is back: retry a failed claim now
		}
	}
}

// cancelAttempts has the heartbeat look at once at the leases of the attempts of q among ids,
// whose jobs were cancelled (or deleted with Cancel): it stops those whose rows the canceller
// settled (ErrCancelled, through giveUp). It does not stop them itself: the message names jobs,
// not attempts, and may arrive after the job was retried and claimed again here, whose new
// attempt holds it and must go on.
func (rt *runtime) cancelAttempts(q *queueRun, ids []ulid.ULID) {
	held := false
	rt.mu.Lock()
	for _, id := range ids {
		if a := rt.attempts[id]; a != nil && a.q == q {
			rt.cancelHeard[id], held = true, true
		}
	}
	rt.mu.Unlock()
	if held {
		signal(rt.checkLeases)
	}
}

// expireLeases gives up running attempts whose lease has surely run out by now (by the local
// clock, counted from before the claim or heartbeat that set it).
func (rt *runtime) expireLeases(now time.Time) {
	var lost []*attempt
	rt.mu.Lock()
	for _, a := range rt.attempts {
		switch {
		case !now.After(a.leaseEnd):
		case a.state == attemptRunning:
			lost = append(lost, rt.abandon(a, ErrLockLost))
		case a.state == attemptWaiting:
			rt.drop(a)
		}
	}
	rt.mu.Unlock()
	rt.reportLost(lost)
}

// reportCancelled logs and reports attempts stopped because their jobs were cancelled.
func (rt *runtime) reportCancelled(stopped []*attempt) {
	for _, a := range stopped {
		elapsed := time.Since(a.started)
		a.q.logJob(a, "pgqueue: running job cancelled", slog.Duration("elapsed", elapsed))
		a.q.events.emit(a.event(EventCancelled, elapsed))
	}
	if len(stopped) > 0 {
		signal(rt.wakeFetch)
	}
}

// reportLost logs and reports attempts given up by abandon.
func (rt *runtime) reportLost(lost []*attempt) {
	rt.logLost(lost)
	for _, a := range lost {
		a.q.events.emit(a.event(EventLockLost, time.Since(a.started)))
	}
	if len(lost) > 0 {
		signal(rt.wakeFetch)
	}
}

// logLost logs the attempts that lost their lock.
func (rt *runtime) logLost(lost []*attempt) {
	for _, a := range lost {
		a.q.log.LogAttrs(context.Background(), slog.LevelWarn,
			"pgqueue: lost the lock of a running job; its outcome will be ignored", a.logAttrs()...)
	}
}

// logJob writes one of the worker's log lines about a single job, at its JobLogLevel, with the
// job's id and attempts (the logger names the queue). A disabled level costs one Enabled call.
func (q *queueRun) logJob(a *attempt, msg string, attrs ...slog.Attr) {
	level := q.opts.JobLogLevel.Level()
	if !q.log.Enabled(context.Background(), level) {
		return
	}
	q.log.LogAttrs(context.Background(), level, msg, append(a.logAttrs(), attrs...)...)
}

// logAttrs are the attributes of every log line about a's job.
func (a *attempt) logAttrs() []slog.Attr {
	return []slog.Attr{slog.String("job_id", a.id.String()), slog.Int("attempt", a.attempt),
		slog.Int("max_attempts", a.maxAttempts)}
}

// event returns an event of kind about a's job, which ran for elapsed.
func (a *attempt) event(kind EventKind, elapsed time.Duration) Event {
	return Event{Kind: kind, JobID: a.id, Attempt: a.attempt, MaxAttempts: a.maxAttempts, Elapsed: elapsed}
}

// reportError logs a runtime error about the queues qs and reports it to each as EventError.
func (rt *runtime) reportError(qs []*queueRun, msg string, err error) {
	err = explainSchemaError(err)
	for i, q := range qs {
		if i == 0 {
			q.log.Error(msg, "error", err)
		}
		q.events.emit(Event{Kind: EventError, Err: err})
	}
}

// stopHandlers is the graceful part of shutdown. Each queue's running handlers get its
// ShutdownTimeout to return; then their contexts are cancelled (their jobs go back to the
// queue), and they get the same time once more. Jobs whose handlers still have not returned are
// handed back regardless and abandoned.
func (rt *runtime) stopHandlers() error {
	start := time.Now()
	cancelled := map[*queueRun]bool{}
	for {
		next, done := rt.shutdownStep(start, cancelled)
		if done {
			break
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-rt.freed:
		case <-t.C:
		}
		t.Stop()
	}
	return rt.abandonStuck()
}

// shutdownStep cancels the handlers of the queues whose ShutdownTimeout has passed since start,
// and returns when to look again; done once no handler runs, or every queue's second
// ShutdownTimeout has passed.
func (rt *runtime) shutdownStep(start time.Time, cancelled map[*queueRun]bool) (next time.Time, done bool) {
	now := time.Now()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.busy == 0 {
		return now, true
	}
	done = true
	for _, q := range rt.queues {
		if q.busy == 0 {
			continue
		}
		cancelAt, giveUpAt := start.Add(q.opts.ShutdownTimeout), start.Add(2*q.opts.ShutdownTimeout)
		if !cancelled[q] && !now.Before(cancelAt) {
			cancelled[q] = true
			for _, a := range rt.attempts {
				if a.q == q && (a.state == attemptRunning || a.state == attemptInTx) {
					a.cancel(ErrShutdown)
				}
			}
		}
		if now.Before(giveUpAt) {
			done = false
			at := giveUpAt
			if !cancelled[q] {
				at = cancelAt
			}
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return next, done
}

// abandonStuck hands back the jobs of handlers that still run after shutdown, and reports them.
func (rt *runtime) abandonStuck() error {
	rt.mu.Lock()
	stuck := map[string]int{}
	for _, a := range rt.attempts {
		if a.state == attemptRunning || a.state == attemptInTx {
			a.state = attemptAbandoned
			stuck[a.q.name]++
			rt.outcomes = append(rt.outcomes, outcome{a: a, kind: outcomeRequeue, elapsed: time.Since(a.started)})
		}
	}
	rt.mu.Unlock()
	if len(stuck) == 0 {
		return nil
	}
	signal(rt.settle)
	err := fmt.Errorf("%w: handlers still running, by queue: %v; their jobs were handed back",
		ErrHandlersStuck, stuck)
	rt.c.cfg.Logger.Error("pgqueue: shutdown", "error", err)
	return err
}
