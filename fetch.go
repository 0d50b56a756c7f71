package pgqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// claimWant is one queue's part of a claim round trip: how many jobs to ask for, and how many of
// them, the last in line, are claimed ahead of a free slot: they wait for a slot a running handler
// frees, and their start is recorded when they start (claim.sql).
type claimWant struct {
	q     *queueRun
	limit int
	ahead int
}

// fetchLoop claims jobs and starts their handlers until ctx ends. It sleeps until a queue that
// wants a claim (a wake-up, a full batch last time, a promotion, a rescue or the poll) may claim
// (queueRun.claimable: it has free slots, or handlers expected to return before a claim comes
// back), then claims for every such queue in one round trip on each of its connections
// (claimPipes), which share out the queues. While rounds are in flight it sends more, for the
// queues whose last claim came back full, and it reads the rounds in the order sent. After a
// failure it sends nothing until the rounds still in flight are read, then reports the failure
// and pauses (claimFailed). Each time round, jobs claimed ahead that have waited for a slot longer
// than aheadWaitMax go back to the table (handBackOverdue).
func (rt *runtime) fetchLoop(ctx context.Context) {
	defer rt.stopClaimTimers()
	p := newClaimPipes(rt)
	defer p.release()
	var f claimFailure
	for {
		handBackAt := rt.handBackOverdue(time.Now())
		if ctx.Err() == nil && !p.full() && len(f.rounds) == 0 {
			if p.inFlight() == 0 && rt.fewSlotsFree() {
				// Handlers are returning: give the others a moment to, and claim one batch for all.
				sleepCtx(ctx, gatherFor)
			}
			if wants := rt.wantedClaims(p.inFlight(), p.room); len(wants) > 0 {
				for i, wants := range p.split(wants) {
					if len(wants) == 0 {
						continue
					}
					if lost, err := p.send(ctx, i, newClaimRound(wants)); err != nil {
						f.add(err, lost...)
					}
				}
				continue
			}
		}
		if p.inFlight() == 0 && len(f.rounds) > 0 {
			rt.claimFailed(ctx, &f)
			continue
		}
		if p.inFlight() == 0 {
			p.release()
			if ctx.Err() != nil {
				return
			}
			rt.reportDrained()
			select {
			case <-ctx.Done():
			case <-rt.wakeFetch:
			case <-timerAt(handBackAt):
			}
			continue
		}
		rt.readRound(ctx, p, &f)
	}
}

// claimFailure is what the claim loop holds of failed claims: how many failed in a row, and the
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
// is noted in f. If a statement of it failed on the server, the rounds behind it on its
// connection ran, and claimed their jobs, and are read as usual; after any other failure its
// connection is discarded, with the rounds in flight on it, which are noted in f too. The rounds
// on the other connections are read as usual either way.
func (rt *runtime) readRound(ctx context.Context, p *claimPipes, f *claimFailure) {
	round, all, lim, err := p.read()
	if err != nil {
		f.add(err, round)
		if !p.skipFailed(err) {
			f.rounds = append(f.rounds, p.discardLast()...)
		}
		return
	}
	if len(f.rounds) == 0 {
		f.inRow = 0
	}
	rt.unreserve(round)
	rt.claimRTT = movingAverage(rt.claimRTT, time.Since(round.sent))
	rt.took(ctx, round, all, lim)
}

// took starts the jobs a round claimed, or hands them back if Run has ended, and notes for each
// of its queues whether to claim again.
func (rt *runtime) took(ctx context.Context, round *claimRound, all []*jobRow, lim *limitedResult) {
	claimed, again := round.results(all, lim)
	if ctx.Err() != nil {
		// Shutdown began while the claim was under way: hand the jobs back.
		for i, w := range round.wants {
			rt.handBack(w.q, claimed[i], round.sent.Add(w.q.opts.LockDuration))
		}
		return
	}
	for i, w := range round.wants {
		if w.q.paused.Load() && len(claimed[i]) > 0 {
			// Paused while the claim was under way: no job of the queue starts once the pause
			// is heard.
			rt.handBack(w.q, claimed[i], round.sent.Add(w.q.opts.LockDuration))
			claimed[i] = nil
		}
	}
	rt.announceStarts(ctx, round.wants, claimed)
	for i, w := range round.wants {
		rows := claimed[i]
		markAhead(rows, w)
		// A full batch means more may be waiting: claim again as soon as a slot frees.
		if len(rows) == w.limit {
			w.q.wantClaim.Store(true)
		}
		if again[i].after > 0 && len(rows) < w.limit {
			rt.claimAfter(w.q, again[i].after)
		}
		w.q.empty = len(rows) < w.limit
		near := w.q.exclusive
		if w.q.chooseLockMode(again[i], len(rows) < w.limit) {
			w.q.wantClaim.Store(true)
		}
		if w.q.exclusive && !near {
			// Found near its MaxRunning: the jobs claimed ahead here could keep another process
			// from starting one.
			rt.handBackQueue(w.q)
		}
		if len(rows) > 0 {
			w.q.drainPending = true
			rt.start(w.q, rows, round.sent.Add(w.q.opts.LockDuration))
		}
	}
	rt.reportDrained()
}

// markAhead sorts the rows claimed for w in line order and marks those its claim took ahead of a
// free slot: the last w.ahead of what w asked for, whose start claim.sql did not record.
func markAhead(rows []*jobRow, w claimWant) {
	slices.SortFunc(rows, rowsInLine)
	for i, r := range rows {
		r.ahead = i >= w.limit-w.ahead
	}
}

// chooseLockMode picks how the next claim of a MaxRunning-only queue takes its claim lock, after
// a claim that got the lock (a) and came back short or not, and reports whether to claim again at
// once. A claim under the shared lock that came back short may have been cut by its ticket's
// share, not by the limit or a lack of jobs: the next one takes the lock exclusively, at once,
// and counts exactly. A claim under the exclusive lock that came back full found the queue far
// from its limit, or at least not at it: the next one shares the lock again.
func (q *queueRun) chooseLockMode(a claimAgain, short bool) (now bool) {
	if claimWay(q.way.Load()) != claimCapped || a.lockedOut {
		return false
	}
	switch {
	case a.shared && short:
		q.exclusive = true
		return true
	case !a.shared && !short:
		q.exclusive = false
	}
	return false
}

// unreserve stops counting the jobs a round asked for as on their way (wantedClaims counted
// them), once it has been read or lost.
func (rt *runtime) unreserve(round *claimRound) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, w := range round.wants {
		w.q.claiming -= w.limit
		w.q.rounds--
	}
}

// gatherFor is how long the claim loop waits for more slots to free when a queue that wants a
// claim has few free and handlers still running: slots freed one by one would otherwise be
// refilled one claim each.
const gatherFor = 500 * time.Microsecond

// fewSlotsFree reports whether every queue that wants a claim and may claim has less than half
// its Concurrency to claim and handlers running.
func (rt *runtime) fewSlotsFree() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	few := false
	for _, q := range rt.queues {
		if !q.wantClaim.Load() {
			continue
		}
		switch free, _ := q.claimable(rt.claimRTT); {
		case free == 0:
		case 2*free >= q.opts.Concurrency || q.busy == 0:
			return false
		default:
			few = true
		}
	}
	return few
}

// movingAverage adds the sample d to the moving average avg (zero: no sample yet), weighing it
// an eighth.
func movingAverage(avg, d time.Duration) time.Duration {
	if avg == 0 {
		return max(d, 1)
	}
	return max(avg+(d-avg)/8, 1)
}

// wantedClaims returns the queues that want a claim and may claim, taking their wish, and
// counts the jobs it asks for as on their way (queueRun.claiming) until the round is read. While
// rounds are in flight (inFlight of them), a queue whose last claim came back full wants one
// too, without a wish: its next jobs are likely there; but only a batch of at least half its
// Concurrency is worth another round, and only while it has fewer rounds in flight than it may
// (roundsInFlight). A queue for whose claim no connection has room (room, see claimPipes) waits
// for the next.
func (rt *runtime) wantedClaims(inFlight int, room func(*queueRun) bool) []claimWant {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var wants []claimWant
	for _, q := range rt.queues {
		more := inFlight > 0 && !q.empty
		if !more && !q.wantClaim.Load() || !room(q) || q.rounds >= q.roundsInFlight() {
			continue
		}
		if q.paused.Load() {
			continue // its claims would find nothing; Resume wakes it
		}
		free, ahead := q.claimable(rt.claimRTT)
		if free == 0 || inFlight > 0 && 2*free < q.opts.Concurrency {
			continue
		}
		if q.wantClaim.Swap(false) || more {
			q.claiming += free
			q.rounds++
			wants = append(wants, claimWant{q: q, limit: free, ahead: ahead})
		}
	}
	return wants
}

// roundsInFlight is how many claim rounds for q may be in flight at once: two, one running and
// the next waiting its turn on the connection, as for every queue before the claim loop had two
// connections, so that the jobs claimed ahead stay within 2×Concurrency; for a queue claimed on
// either connection, three on each (claimPipe.claimsInFlight).
func (q *queueRun) roundsInFlight() int {
	if q.claimsInParallel() {
		return claimConns * claimsPerConn
	}
	return 2
}

// claimsInParallel reports whether q's next claim may run beside another claim of it, on any of
// the claim loop's connections (claimPipes): it has no claim lock to take exclusively, and
// Concurrency enough (parallelClaimMin).
func (q *queueRun) claimsInParallel() bool {
	switch claimWay(q.way.Load()) {
	case claimLimited:
		return false
	case claimCapped:
		if q.exclusive {
			return false
		}
	}
	return q.opts.Concurrency >= parallelClaimMin
}

// claimWay is how a queue's jobs are claimed, by the limits it has (limits.go). The maintenance
// loop reads it from the queue's row (queue_flags.sql); whichever way a stale reading picks,
// the statements apply the limits the row holds when they run.
type claimWay uint32

const (
	claimPlain   claimWay = iota // no limits: claim.sql
	claimCapped                  // MaxRunning only: claim_lock.sql, then claim.sql
	claimLimited                 // per-key limits or rates: claim_lock.sql, then claim_limited.sql
)

// claimArgs are the parameters of one claim statement: queues, how many of each, their leases
// in ms, how many of each start at once (the others are claimed ahead of a free slot).
type claimArgs struct {
	queues []string
	limits []int32
	leases []int64
	atOnce []int32
	rated  bool // a queue has a rate limit
}

func (a *claimArgs) add(w claimWant) {
	a.rated = a.rated || w.q.rated.Load()
	a.queues = append(a.queues, w.q.name)
	a.limits = append(a.limits, int32(w.limit))
	a.leases = append(a.leases, w.q.opts.LockDuration.Milliseconds())
	a.atOnce = append(a.atOnce, int32(w.limit-w.ahead))
}

// claimRound is one claim round trip: the wants it claims for, and its statements: claim.sql for
// plain, claim_limited.sql for limited, after claim_lock.sql for the queues of locks (the capped
// ones among plain, and limited).
type claimRound struct {
	wants          []claimWant
	index          map[string]int // want of each queue
	plain, limited claimArgs
	locks          []string      // queues whose claim lock the round takes exclusively
	shared         []string      // MaxRunning-only queues far from their limit: the lock shared, with a ticket
	timeout        time.Duration // the longest lease of its queues: how long its round trip may take
	sent           time.Time
}

// newClaimRound sorts wants into the statements of one round trip, by the way each queue is
// claimed, keeping their order: the runtime's queue order, which is name order (newRuntime).
func newClaimRound(wants []claimWant) *claimRound {
	round := &claimRound{wants: wants, index: make(map[string]int, len(wants))}
	for i, w := range wants {
		switch claimWay(w.q.way.Load()) {
		case claimPlain:
			round.plain.add(w)
		case claimCapped:
			round.plain.add(w)
			if w.q.exclusive {
				round.locks = append(round.locks, w.q.name)
			} else {
				round.shared = append(round.shared, w.q.name)
			}
		case claimLimited:
			round.limited.add(w)
			round.locks = append(round.locks, w.q.name)
		}
		round.index[w.q.name] = i
		round.timeout = max(round.timeout, w.q.opts.LockDuration)
	}
	return round
}

// claim leases jobs for every queue of wants in one round trip (claimBatch), and returns the
// rows claimed for each want, when to claim again for each if it came back short, and when the
// round trip was sent. It does not let ctx interrupt the round trip: claimed rows whose result
// never arrived would stay locked until their lease ran out. The claim loop sends its rounds
// through its pipeline instead (claimpipe.go); this is for Work and the benchmarks.
func (rt *runtime) claim(ctx context.Context, wants []claimWant) (claimed [][]*jobRow, again []claimAgain, sent time.Time, err error) {
	round := newClaimRound(wants)
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), round.timeout)
	defer cancel()
	round.sent = time.Now()
	var lim limitedResult
	all, err := rt.claimBatch(qctx, round, &lim)
	if err != nil {
		return nil, nil, round.sent, fmt.Errorf("pgqueue: claim: %w", err)
	}
	claimed, again = round.results(all, &lim)
	return claimed, again, round.sent, nil
}

// results sorts the rows a round claimed by want, and says for each want when to claim again.
func (round *claimRound) results(all []*jobRow, lim *limitedResult) (claimed [][]*jobRow, again []claimAgain) {
	claimed = make([][]*jobRow, len(round.wants))
	for _, r := range all {
		i := round.index[r.queue]
		claimed[i] = append(claimed[i], r)
	}
	again = make([]claimAgain, len(round.wants))
	for _, lock := range []struct {
		asked, got []string
		shared     bool
	}{{round.locks, lim.locked, false}, {round.shared, lim.shared, true}} {
		for _, name := range lock.asked {
			a := &again[round.index[name]]
			a.after, a.shared = lim.waits[name], lock.shared
			if a.lockedOut = !slices.Contains(lock.got, name); a.lockedOut {
				a.after = lockedOutWait
			}
		}
	}
	return claimed, again
}

// claimAgain says when to claim again for a want that came back short: after (0: when a
// wake-up, the poll or a freed slot calls for it), because another process held the queue's
// claim lock (lockedOut) or a rate limit frees a start then. shared says the queue was claimed
// under its claim lock held shared.
type claimAgain struct {
	after     time.Duration
	lockedOut bool
	shared    bool
}

// limitedResult is what claimBatch learns besides the jobs: the limited queues whose claim
// lock the round trip took (exclusively: locked; shared, with a ticket: shared), and how long
// queues held back by a rate limit wait for a start to free.
type limitedResult struct {
	locked []string
	shared []string
	waits  map[string]time.Duration
}

// claimBatch sends a round's claim round trip through the pool as one batch (claimRound.read),
// and returns the rows claimed, filling in res.
func (rt *runtime) claimBatch(ctx context.Context, round *claimRound, res *limitedResult) ([]*jobRow, error) {
	br := rt.c.pool.SendBatch(ctx, round.batch(rt.c.cfg.ID))
	defer br.Close()
	all, err := round.read(br.Query, res)
	if err != nil {
		return nil, err
	}
	return all, br.Close()
}

// batch returns the round's statements (statements) as a batch, for worker id.
func (round *claimRound) batch(id string) *pgx.Batch {
	b := &pgx.Batch{}
	for _, s := range round.statements(id) {
		b.Queue(s.sql, s.args...)
	}
	return b
}

// claimStatement is one statement of a claim round trip, and its arguments.
type claimStatement struct {
	sql  string
	args []any
}

// statements returns the statements of the round's claim round trip, for worker id, to be run in
// one implicit transaction: claim_settings.sql; without limited queues, claim.sql; with them,
// claim_lock.sql, then claim.sql and claim_limited.sql for the queues that have any, and
// rate_wait.sql if a queue has a rate.
func (round *claimRound) statements(id string) []claimStatement {
	plain, limited := &round.plain, &round.limited
	s := []claimStatement{{sql: claimSettingsSQL}}
	if len(round.locks) > 0 || len(round.shared) > 0 {
		s = append(s, claimStatement{claimLockSQL, []any{round.locks, round.shared, claimTickets}})
	}
	if len(plain.queues) > 0 {
		s = append(s, claimStatement{claimSQL, []any{plain.queues, plain.limits, plain.leases, id, plain.atOnce}})
	}
	if len(limited.queues) > 0 {
		s = append(s, claimStatement{claimLimitedSQL, []any{limited.queues, limited.limits, limited.leases, id}})
	}
	if limited.rated {
		s = append(s, claimStatement{rateWaitSQL, []any{limited.queues}})
	}
	return s
}

// read reads the results of the round's statements, in order, each from next, and returns the
// rows claimed, filling in res.
func (round *claimRound) read(next func() (pgx.Rows, error), res *limitedResult) ([]*jobRow, error) {
	plain, limited := &round.plain, &round.limited
	rows, err := next() // claim_settings
	if err != nil {
		return nil, err
	}
	if rows.Close(); rows.Err() != nil {
		return nil, rows.Err()
	}
	if len(round.locks) > 0 || len(round.shared) > 0 {
		// Of what claim_lock returns, only the queues locked are read; the rest is its settings.
		rows, err := next()
		if err == nil {
			_, err = pgx.ForEachRow(rows, []any{nil, &res.locked, nil, &res.shared, nil}, func() error { return nil })
		}
		if err != nil {
			return nil, err
		}
	}
	var all []*jobRow
	for _, args := range []*claimArgs{plain, limited} {
		if len(args.queues) == 0 {
			continue
		}
		rows, err := next()
		if err != nil {
			return nil, err
		}
		got, err := pgx.CollectRows(rows, scanJobRow)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
	}
	if limited.rated {
		res.waits = make(map[string]time.Duration)
		var queue string
		var ms int64
		rows, err := next()
		if err == nil {
			_, err = pgx.ForEachRow(rows, []any{&queue, &ms}, func() error {
				res.waits[queue] = time.Duration(ms) * time.Millisecond
				return nil
			})
		}
		if err != nil {
			return nil, err
		}
	}
	return all, nil
}

// lockedOutWait is how long a limited queue whose claim lock another process held waits before
// its next claim: about one claim's round trip, after which that claim has committed.
const lockedOutWait = 2 * time.Millisecond

// claimTickets is how many claims of a MaxRunning-only queue far from its limit may run at once,
// each under the queue's claim lock held shared and one ticket (claim_lock.sql), each taking at
// most max_running / claimTickets less the running jobs (claim.sql). Every process must use the
// same number: the limit holds because no more than this many claims overlap.
const claimTickets = 8

// claimAfter makes the claim loop look at q again after d, replacing the time set before. One
// timer per queue, stopped when the claim loop ends (stopClaimTimers).
func (rt *runtime) claimAfter(q *queueRun, d time.Duration) {
	if q.again == nil {
		q.again = time.AfterFunc(d, func() {
			q.wantClaim.Store(true)
			signal(rt.wakeFetch)
		})
		return
	}
	q.again.Reset(d)
}

// stopClaimTimers stops the timers claimAfter set.
func (rt *runtime) stopClaimTimers() {
	for _, q := range rt.queues {
		if q.again != nil {
			q.again.Stop()
		}
	}
}

// claimFailed reports the failed claim rounds noted in f, forgets them, and waits before the next
// claim: a back-off that grows with the failures in a row, cut short when the listener is back
// (so is the database). Jobs a round may have locked without its
// result arriving are taken back by the maintenance loop once their lease has run out.
func (rt *runtime) claimFailed(ctx context.Context, f *claimFailure) {
	var qs []*queueRun
	for _, round := range f.rounds {
		rt.unreserve(round)
		for _, w := range round.wants {
			if !slices.Contains(qs, w.q) {
				qs = append(qs, w.q)
			}
			w.q.wantClaim.Store(true)
			w.q.rescueAt.Store(time.Now().Add(w.q.opts.LockDuration).UnixNano())
		}
	}
	err := f.err
	f.rounds, f.err = nil, nil
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // Run is ending, and its end cut the claim short (taking a connection): no error
	}
	signal(rt.wakeMaint)
	rt.reportError(qs, "pgqueue: claim jobs", fmt.Errorf("pgqueue: claim: %w", err))
	pause := time.NewTimer(retryDelay(f.inRow))
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
		idle := q.held == 0 && q.claiming == 0
		rt.mu.Unlock()
		if idle {
			q.drainPending = false
			q.events.emit(Event{Kind: EventDrained})
		}
	}
}
