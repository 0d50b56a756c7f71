package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// completer settles the outcomes of a runtime's finished attempts, of every queue, and records
// the starts of jobs claimed ahead, writing them in batches by group commit: while one settle
// round trip runs, the outcomes that arrive meanwhile gather and go together in the next, so a
// busy runtime writes many results per round trip and an idle one adds no delay. It owns the
// outcomes whose rows a settle skipped, locked by another transaction, until they are settled
// again.
type completer struct {
	rt      *runtime
	skipped skippedOutcomes
	// skippedJobs are the jobs of skipped: a newer outcome of one waits for it (takeOutcomes).
	skippedJobs map[ulid.ULID]bool
}

func newCompleter(rt *runtime) *completer {
	return &completer{rt: rt, skippedJobs: make(map[ulid.ULID]bool)}
}

// loop settles finished attempts until ctx ends, then settles what is left once more. Outcomes
// whose rows a settle skipped wait a pause and go in a later batch.
func (c *completer) loop(ctx context.Context) {
	failures := 0
	for {
		c.releaseSkipped()
		batch := c.takeOutcomes()
		starts, nextStart := c.rt.set.takeStarts(time.Now())
		if len(batch) == 0 && starts.empty() {
			select {
			case <-ctx.Done():
				c.finalSettle()
				return
			case <-c.rt.w.settle:
			case <-c.skipped.wait():
			case <-timerAt(nextStart):
			}
			continue
		}
		left, err := c.settle(ctx, batch, starts, ctx.Err() == nil) // the claim loop stops with ctx
		if err != nil {
			c.rt.set.putBackOutcomes(batch)
			c.rt.set.putBackStarts(starts)
			if ctx.Err() != nil {
				c.finalSettle()
				return
			}
			failures++
			c.rt.reportError(queuesOfOutcomes(batch), "pgqueue: settle finished jobs", err)
			if !sleepCtx(ctx, retryDelay(failures)) {
				c.finalSettle()
				return
			}
			continue
		}
		failures = 0
		c.addSkipped(left)
	}
}

// timerAt returns a channel that fires at t; nil (never) if t is zero.
func timerAt(t time.Time) <-chan time.Time {
	if t.IsZero() {
		return nil
	}
	return time.After(time.Until(t))
}

// startRecordAfter is how long the handler of a job claimed ahead of a free slot runs before the
// completer records its start (record_starts.sql): by then most short jobs have returned, and
// their outcome records it with no write of its own; a longer job's start is recorded within this
// and a round trip. Should its process die before, the attempt is not counted against the job,
// once (rescue.sql).
const startRecordAfter = 20 * time.Millisecond

// ratedReportAfter is how long after the handler of a job of a queue with a rate limit started
// the completer reports its start (record_rate_starts.sql): long enough for the handler to be
// under way, so that the report comes after the handler's start by any clock; short, since the
// start holds its place in the rate's windows until a period after it is reported.
const ratedReportAfter = 2 * time.Millisecond

// skipPauseFirst is how long an outcome whose row a settle skipped waits before it is settled
// again, the first time: long enough for a heartbeat statement to commit. The pause doubles each
// time its row is skipped again, up to a heartbeat interval.
const skipPauseFirst = 10 * time.Millisecond

// skippedOutcomes are the outcomes whose rows a settle skipped because another transaction
// locked them (an application's CancelTx left open, a handler's CompleteTx transaction not yet
// ended, a heartbeat). They wait for their pause to pass, their leases kept by the heartbeat,
// then join the outcomes to settle again.
type skippedOutcomes struct {
	outcomes []outcome
	at       time.Time // when the first of them is due again
}

// addSkipped notes the outcomes a settle skipped. Until they are settled again, a newer outcome
// of any of their jobs waits (takeOutcomes).
func (c *completer) addSkipped(skipped []outcome) {
	if len(skipped) == 0 {
		return
	}
	for _, o := range skipped {
		c.skippedJobs[o.a.id] = true
	}
	s := &c.skipped
	at := time.Now().Add(skipPause(skipped, c.rt.heart.every))
	if len(s.outcomes) == 0 || at.Before(s.at) {
		s.at = at
	}
	s.outcomes = append(s.outcomes, skipped...)
}

// skipPause is how long outcomes a settle skipped wait before they are settled again: the
// shortest pause of any of them, by the times its row was skipped, and at most most.
func skipPause(skipped []outcome, most time.Duration) time.Duration {
	pause := most
	for _, o := range skipped {
		pause = min(pause, skipPauseFirst<<min(o.skips-1, 20))
	}
	return pause
}

// releaseSkipped hands the skipped outcomes back to be settled once their pause has passed.
func (c *completer) releaseSkipped() {
	if len(c.skipped.outcomes) > 0 && !time.Now().Before(c.skipped.at) {
		c.putBackSkipped()
	}
}

// putBackSkipped puts the skipped outcomes back, ahead of the outcomes that came since, and lets
// the newer outcomes of their jobs that waited for them follow.
func (c *completer) putBackSkipped() {
	for _, o := range c.skipped.outcomes {
		delete(c.skippedJobs, o.a.id)
	}
	c.rt.set.putBackOutcomes(c.skipped.outcomes)
	c.skipped.outcomes = nil
}

// wait returns a channel that fires when the skipped outcomes are due again; nil if none waits.
func (s *skippedOutcomes) wait() <-chan time.Time {
	if len(s.outcomes) == 0 {
		return nil
	}
	return time.After(time.Until(s.at))
}

// takeOutcomes takes the outcomes to settle next from the attempt set: at most one of each job,
// none of a job whose older outcome waits among the skipped ones (attemptSet.takeOutcomes).
func (c *completer) takeOutcomes() []outcome { return c.rt.set.takeOutcomes(c.skippedJobs) }

// finalSettle makes one last attempt, within the longest ShutdownTimeout, to settle what is
// left, and the outcomes skipped earlier; a settle still under way then is cut off. Jobs it
// cannot settle stay running in the table until their leases run out and another process takes
// them back: they are not lost, and run again.
func (c *completer) finalSettle() {
	var timeout time.Duration
	for _, q := range c.rt.queues {
		timeout = max(timeout, q.opts.ShutdownTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c.putBackSkipped()
	// The starts of rated queues' handlers are reported, whenever they started: until they are,
	// they hold their places in the rates' windows.
	st, _ := c.rt.set.takeStarts(time.Now().Add(ratedReportAfter))
	st.ahead = nil // their outcomes record them, or a rescue does not count them, once
	// More than one batch when a job has two outcomes (takeOutcomes), or rows were skipped.
	for batch := c.takeOutcomes(); len(batch) > 0 || !st.empty(); batch = c.takeOutcomes() {
		left, err := c.settle(ctx, batch, st, false)
		st = starts{}
		if err == nil && len(left) > 0 {
			c.rt.set.putBackOutcomes(left)
			if !sleepCtx(ctx, skipPause(left, timeout)) {
				batch, err = left, fmt.Errorf("pgqueue: complete: %d jobs' rows stay locked by other transactions", len(left))
			}
		}
		if err != nil {
			c.rt.reportError(queuesOfOutcomes(batch),
				"pgqueue: settle finished jobs at shutdown; they will be taken back when their leases run out", err)
			return
		}
	}
}

// settleArgs are the columns of one batch, as the settle statements take them.
type settleArgs struct {
	ids, tokens             [][16]byte // every job of the batch
	doneIDs, doneTokens     [][16]byte // succeeded, not repeating, deleted
	keptIDs, keptTokens     [][16]byte // succeeded, not repeating, kept by retention or a workflow
	keptResults             []*string  // their results (Job.SetResult); nil: none
	repeatIDs, repeatTokens [][16]byte // succeeded jobs that may repeat
	repeatNext              [][16]byte
	repeatKeep              []bool
	repeatResults           []*string
	failIDs, failTokens     [][16]byte
	failDelays              []int64 // µs
	failFinal               []bool
	failErrors, failStacks  []string
	backIDs, backTokens     [][16]byte
	backDelays              []int64    // µs
	backStarted             []bool     // the handler started (a snooze, a shutdown), or not (a job claimed ahead)
	startIDs, startTokens   [][16]byte // started attempts claimed ahead, whose starts are to be recorded
	ratedIDs                [][16]byte // jobs of queues with a rate limit whose handlers' starts are to be reported
	inTxIDs, inTxTokens     [][16]byte // completed with Job.CompleteTx, and the transactions
	inTxXacts               []string
	inTxNext                []ulid.ULID // the next runs those transactions enqueued
	// Limited queues whose claims elsewhere may find room now (freedQueues): those woken on
	// every end of a job, and those with only a MaxRunning, in name order.
	freed, capped []string
}

// settled is what the table says became of one job of a batch.
type settled struct {
	// status after a failure or a requeue; StatusCompleted for a success; StatusRunning if the
	// settle skipped its row, which another transaction locks (to be settled again later).
	status Status
	runAt  time.Time // when it runs next (retry, requeue)
	repeat ulid.ULID // the next run of a repeating job; zero if none
}

// settle writes a batch of outcomes, of any queues, in one round trip, then reports
// them. Every statement matches on (id, lock_token), so an outcome whose lock was lost changes
// nothing; it is reported as EventLockLost. No statement waits for a row another transaction
// locks: such an outcome is skipped, and returned to be settled again later, so that one locked
// row holds up neither the batch nor the outcomes that follow it. With retake, the places the
// batch frees in limited queues that this runtime's claims take again wake no other worker
// (freedQueues).
func (c *completer) settle(ctx context.Context, batch []outcome, st starts, retake bool) (skipped []outcome, err error) {
	args := c.build(batch, retake)
	args.recordStarts(st)
	results, err := c.send(ctx, args)
	if err != nil {
		return nil, err
	}
	for _, o := range batch {
		if claimWay(o.a.q.way.Load()) != claimPlain {
			o.a.q.wantClaim.Store(true) // applySettled wakes the claim loop
		}
	}
	batch, skipped = splitSkipped(batch, results)
	c.applySettled(ctx, batch, results)
	return skipped, nil
}

// splitSkipped separates, in place, the outcomes of a settled batch whose rows the settle
// skipped, counting the skip on each.
func splitSkipped(batch []outcome, results map[ulid.ULID]settled) (done, skipped []outcome) {
	n := 0
	for _, o := range batch {
		if results[o.a.id].status == StatusRunning {
			o.skips++
			skipped = append(skipped, o)
			continue
		}
		batch[n] = o
		n++
	}
	return batch[:n], skipped
}

// build sorts a batch into the columns of the settle statements, in id order: rows are locked in
// id order, as the heartbeat locks them; and notes which limited queues' workers the settle wakes
// (freedQueues, with retake).
func (c *completer) build(batch []outcome, retake bool) *settleArgs {
	slices.SortFunc(batch, func(x, y outcome) int { return x.a.id.Compare(y.a.id) })
	a := &settleArgs{}
	inTx := c.rt.set.completedInTx(batch)
	for i, o := range batch {
		id, token := [16]byte(o.a.id), o.a.token
		a.ids, a.tokens = append(a.ids, id), append(a.tokens, token)
		if tx := inTx[i]; tx.xact != "" {
			// Completed in its handler's transaction, whatever the handler did next (returned an
			// error, panicked, was stopped or given up): if that transaction committed, the row
			// says completed, and so does the report.
			a.inTxIDs, a.inTxTokens = append(a.inTxIDs, id), append(a.inTxTokens, token)
			a.inTxXacts, a.inTxNext = append(a.inTxXacts, tx.xact), append(a.inTxNext, tx.next)
		}
		switch o.kind {
		case outcomeDone:
			switch {
			case o.a.repeats:
				a.repeatIDs, a.repeatTokens = append(a.repeatIDs, id), append(a.repeatTokens, token)
				a.repeatKeep, a.repeatResults = append(a.repeatKeep, o.a.keep()), append(a.repeatResults, o.a.resultArg())
			case o.a.keep():
				a.keptIDs, a.keptTokens = append(a.keptIDs, id), append(a.keptTokens, token)
				a.keptResults = append(a.keptResults, o.a.resultArg())
			default:
				a.doneIDs, a.doneTokens = append(a.doneIDs, id), append(a.doneTokens, token)
			}
		case outcomeRequeue:
			a.backIDs, a.backTokens = append(a.backIDs, id), append(a.backTokens, token)
			a.backDelays = append(a.backDelays, o.delay.Microseconds())
			a.backStarted = append(a.backStarted, o.ran)
		case outcomeFailed:
			a.failIDs, a.failTokens = append(a.failIDs, id), append(a.failTokens, token)
			a.failDelays = append(a.failDelays, o.a.q.opts.RetryBackoff.Delay(o.a.attempt).Microseconds())
			a.failFinal = append(a.failFinal, o.final)
			msg, stack := describeError(o.err)
			a.failErrors, a.failStacks = append(a.failErrors, msg), append(a.failStacks, stack)
		}
	}
	a.freed, a.capped = c.freedQueues(batch, retake)
	for _, id := range c.rt.c.ids.next(len(a.repeatIDs)) {
		a.repeatNext = append(a.repeatNext, id) // ids for the next runs
	}
	return a
}

// recordStarts adds the starts to write to the batch: of attempts claimed ahead
// (record_starts.sql), and of handlers of queues with a rate limit (record_rate_starts.sql).
func (a *settleArgs) recordStarts(st starts) {
	for _, s := range st.ahead {
		a.startIDs, a.startTokens = append(a.startIDs, s.id), append(a.startTokens, s.token)
	}
	for _, s := range st.rated {
		a.ratedIDs = append(a.ratedIDs, s.id)
	}
}

// send sends the statements a batch needs in one round trip and returns what became of
// each job (and, if some were not settled, which of them were skipped: findSkipped). The end of
// ctx does not interrupt it, but its deadline does (at shutdown), as does the longest lease: the
// statements' effect is then unknown, and the batch fails.
func (c *completer) send(ctx context.Context, a *settleArgs) (map[ulid.ULID]settled, error) {
	b := &pgx.Batch{}
	a.queue(b)
	qctx, cancel := withoutCancelUntil(ctx, c.rt.longestLease())
	defer cancel()
	br := c.rt.c.pool.SendBatch(qctx, b)
	defer br.Close()
	results, err := readSettled(br, a)
	if err != nil {
		return nil, err
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("pgqueue: settle: %w", err)
	}
	c.findSkipped(qctx, a, results)
	return results, nil
}

// findSkipped marks in results the jobs of a committed settle that it skipped, their rows locked
// by another transaction, among those it did not settle (rare: most were). The others had lost
// their locks. Should that be unknown (the read failed), they all count as skipped: settled
// again, they are found settled or lost then.
func (c *completer) findSkipped(ctx context.Context, a *settleArgs, results map[ulid.ULID]settled) {
	var ids, tokens [][16]byte
	for i, id := range a.ids {
		// A job completed with CompleteTx and missing from results was found lost already.
		if _, ok := results[ulid.ULID(id)]; !ok && !slices.Contains(a.inTxIDs, id) {
			ids, tokens = append(ids, id), append(tokens, a.tokens[i])
		}
	}
	if len(ids) == 0 {
		return
	}
	rows, _ := c.rt.c.pool.Query(ctx, settleSkippedSQL, ids, tokens)
	if err := collectSkipped(rows, results); err != nil {
		c.rt.c.cfg.Logger.Warn("pgqueue: settle: read which rows were skipped; settling them again", "error", err)
		for _, id := range ids {
			results[ulid.ULID(id)] = settled{status: StatusRunning}
		}
	}
}

// queue adds the statements the batch needs to b.
func (a *settleArgs) queue(b *pgx.Batch) {
	if len(a.startIDs) > 0 {
		b.Queue(recordStartsSQL, a.startIDs, a.startTokens)
	}
	if len(a.ratedIDs) > 0 {
		b.Queue(recordRateStartsSQL, a.ratedIDs)
	}
	if len(a.doneIDs) > 0 {
		b.Queue(completeSQL, a.doneIDs, a.doneTokens)
	}
	if len(a.keptIDs) > 0 {
		b.Queue(completeKeepSQL, a.keptIDs, a.keptTokens, a.keptResults)
	}
	if len(a.repeatIDs) > 0 {
		b.Queue(completeRepeatSQL, a.repeatIDs, a.repeatTokens, a.repeatNext, a.repeatKeep, a.repeatResults)
	}
	if len(a.failIDs) > 0 {
		b.Queue(failSQL, a.failIDs, a.failTokens, a.failDelays, a.failFinal, a.failErrors, a.failStacks, maxErrorsKept)
	}
	if len(a.backIDs) > 0 {
		b.Queue(requeueSQL, a.backIDs, a.backTokens, a.backDelays, a.backStarted)
	}
	if len(a.inTxIDs) > 0 {
		// A job whose transaction is still open was skipped above, its row locked; one that
		// rolled back since is held again. Those are settled again later.
		b.Queue(settleSkippedSQL, a.inTxIDs, a.inTxTokens)
		b.Queue(lostAfterRollbackSQL, a.inTxIDs, a.inTxTokens, a.inTxXacts)
	}
	for _, q := range a.freed {
		b.Queue(notifySQL, wakeFreedMessage(q))
	}
	if len(a.capped) > 0 {
		b.Queue(wakeHeldSQL, a.capped)
	}
}

// freedQueues returns the queues of a batch with limits whose workers the settle wakes: the
// jobs' ends free places that a claim, here or in another process, may have found taken, so the
// settle wakes their workers with a notification sent on its commit; queues without limits send
// none. Those with per-key limits or rates (freed) are woken every time; those with only a
// MaxRunning (capped, in name order) only if a claim of theirs was held back by the limit
// (wake_held.sql), so that a MaxRunning never reached costs no wake-ups.
//
// With retake, a queue whose places this runtime takes again wakes nobody (retakes): each place
// an end frees goes with a slot that end freed here, and this runtime's claim loop claims for
// the queue after every settle of it, so the places are taken again without a notification, which
// woke every worker of the queue, in every process, for one place. Their claims, all but one
// finding the claim lock taken and then no room, kept a machine of two cores busy enough that
// keys limited to one running job each were in use 37 % of the time with jobs of 5 ms, where the
// same slots without limits were 71 % (BenchmarkLimitUse). The workers elsewhere are woken when
// this runtime cannot take the places (too few slots free, paused here, shutting down), or by
// the ends of their own jobs.
func (c *completer) freedQueues(batch []outcome, retake bool) (freed, capped []string) {
	var ended map[*queueRun]int // nil, with no allocation, for a batch without limited queues
	for _, o := range batch {
		if claimWay(o.a.q.way.Load()) != claimPlain {
			if ended == nil {
				ended = make(map[*queueRun]int)
			}
			ended[o.a.q]++
		}
	}
	for q, n := range ended {
		if retake && c.retakes(q, n) {
			continue
		}
		if claimWay(q.way.Load()) == claimCapped {
			capped = append(capped, q.name)
		} else {
			freed = append(freed, q.name)
		}
	}
	slices.Sort(freed)
	slices.Sort(capped)
	return freed, capped
}

// retakes reports whether this runtime's next claim for q takes again the n places that ends of
// its jobs free: q is not paused here, and has a slot free for each.
func (c *completer) retakes(q *queueRun, n int) bool {
	s := c.rt.set.counts(q)
	return !q.paused.Load() && q.opts.Concurrency-s.busy-s.waiting >= n
}

// readSettled reads the results of the statements sendSettle queued, in their order. A job
// completed in its handler's transaction has no row left to match: it counts as completed unless
// its row was skipped (that transaction is still open, or rolled back since: StatusRunning), or
// that transaction rolled back and another attempt holds the job now: it is then missing from the
// results, as a job whose lock was lost. Other jobs the statements did not settle are missing
// too, until findSkipped tells the skipped ones apart.
func readSettled(br pgx.BatchResults, a *settleArgs) (map[ulid.ULID]settled, error) {
	results := make(map[ulid.ULID]settled)
	completed := func(what string, repeating bool) error {
		rows, _ := br.Query()
		var id ulid.ULID
		var next *[16]byte
		dst := []any{(*[16]byte)(&id)}
		if repeating {
			dst = append(dst, &next) // the id of the next run
		}
		_, err := pgx.ForEachRow(rows, dst, func() error {
			r := settled{status: StatusCompleted}
			if next != nil {
				r.repeat = *next
			}
			results[id] = r
			return nil
		})
		if err != nil {
			return fmt.Errorf("pgqueue: %s: %w", what, err)
		}
		return nil
	}
	for _, step := range []struct {
		n    int
		read func() error
	}{
		{len(a.startIDs), func() error {
			// Starts that were not recorded (their rows locked, or gone) are recorded by the
			// jobs' outcomes.
			rows, _ := br.Query()
			if rows.Close(); rows.Err() != nil {
				return fmt.Errorf("pgqueue: record starts: %w", rows.Err())
			}
			return nil
		}},
		{len(a.ratedIDs), func() error {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("pgqueue: report starts: %w", err)
			}
			return nil
		}},
		{len(a.doneIDs), func() error { return completed("complete", false) }},
		{len(a.keptIDs), func() error { return completed("complete", false) }},
		{len(a.repeatIDs), func() error { return completed("complete repeating", true) }},
		{len(a.failIDs), func() error { return collectMoved(br, results, "fail") }},
		{len(a.backIDs), func() error { return collectMoved(br, results, "requeue") }},
		{len(a.inTxIDs), func() error { rows, _ := br.Query(); return collectSkipped(rows, results) }},
		{len(a.inTxIDs), func() error { return collectInTx(br, a, results) }},
	} {
		if step.n > 0 {
			if err := step.read(); err != nil {
				return nil, err
			}
		}
	}
	return results, nil
}

// collectMoved reads the (id, status, run_at) rows of fail.sql or requeue.sql into results.
func collectMoved(br pgx.BatchResults, results map[ulid.ULID]settled, what string) error {
	rows, _ := br.Query()
	var id ulid.ULID
	var r settled
	_, err := pgx.ForEachRow(rows, []any{(*[16]byte)(&id), &r.status, &r.runAt}, func() error {
		results[id] = r
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgqueue: %s: %w", what, err)
	}
	return nil
}

// collectSkipped reads settle_skipped.sql (rows) into results: the jobs whose rows the settle
// skipped.
func collectSkipped(rows pgx.Rows, results map[ulid.ULID]settled) error {
	skipped, err := pgx.CollectRows(rows, scanID)
	if err != nil {
		return fmt.Errorf("pgqueue: complete: rows skipped: %w", err)
	}
	for _, id := range skipped {
		if _, ok := results[id]; !ok {
			results[id] = settled{status: StatusRunning}
		}
	}
	return nil
}

// collectInTx reads lost_after_rollback.sql: jobs of ids completed in their handler's
// transaction count as completed, but for those it returns (rolled back, taken by another
// attempt), those a statement of the batch matched (rolled back, settled here) and those it
// skipped (the transaction is still open). A completed job's next run is the one its transaction
// enqueued.
func collectInTx(br pgx.BatchResults, a *settleArgs, results map[ulid.ULID]settled) error {
	rows, _ := br.Query()
	rolledBack, err := pgx.CollectRows(rows, scanID)
	if err != nil {
		return fmt.Errorf("pgqueue: complete: transaction status: %w", err)
	}
	for i, id := range a.inTxIDs {
		if _, ok := results[id]; !ok && !slices.Contains(rolledBack, ulid.ULID(id)) {
			results[id] = settled{status: StatusCompleted, repeat: a.inTxNext[i]}
		}
	}
	return nil
}

// withoutCancelUntil returns a context with ctx's values that ends after timeout, or at ctx's
// deadline if that comes first, but not when ctx is cancelled: for a round trip that must not be
// cut short by the end of a loop's context, only by a bound on its time.
func withoutCancelUntil(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return context.WithDeadline(context.WithoutCancel(ctx), deadline)
}

// applySettled reports a settled batch and tells the attempt set, which forgets its attempts.
// Events first: EventDrained, which the claimer may emit once the jobs are gone, must follow the
// events of the jobs it covers.
func (c *completer) applySettled(ctx context.Context, batch []outcome, results map[ulid.ULID]settled) {
	var notes announcements
	for _, o := range batch {
		r, ok := results[o.a.id]
		c.report(o, r, ok, &notes)
	}
	c.rt.announce(ctx, notes)
	// The outcomes are reported: the events that waited for them (the EventStarted of a newer
	// attempt of a job, claimed before the report; see attemptSet.startWaiting) go out now.
	for _, a := range c.rt.set.settled(batch) {
		a.q.events.emitAll(a.next)
	}
	c.rt.w.claim.signal()
}

// report emits the event of one settled outcome, logs it, wakes the runtime's loops for jobs it
// put back in line, and notes what watchers of the queue are to hear.
func (c *completer) report(o outcome, r settled, ok bool, notes *announcements) {
	a, q := o.a, o.a.q
	ev := outcomeEvent(o, r, ok)
	elapsed := slog.Duration("elapsed", o.elapsed)
	switch ev.Kind {
	case EventLockLost:
		q.log.LogAttrs(context.Background(), slog.LevelWarn,
			"pgqueue: lost the lock of a job before its outcome was saved; the outcome is ignored", a.logAttrs()...)
		q.events.emit(ev)
		return
	case EventCompleted:
		notes.add(a, msgCompleted)
		if o.kind != outcomeDone && o.err != nil {
			q.log.LogAttrs(context.Background(), slog.LevelWarn, "pgqueue: job completed in its handler's "+
				"transaction; what the handler returned after is ignored", append(a.logAttrs(), slog.Any("error", o.err))...)
		}
		if r.repeat != (ulid.ULID{}) {
			c.wantWork(q, true, true)
			q.logJob(a, "pgqueue: job completed", elapsed, slog.String("repeated_as", r.repeat.String()))
		} else {
			q.logJob(a, "pgqueue: job completed", elapsed)
		}
	case EventHandedBack:
		q.logJob(a, "pgqueue: job handed back, attempt not charged", elapsed)
	case EventSnoozed:
		q.logJob(a, "pgqueue: job snoozed", elapsed, slog.Time("run_at", r.runAt))
	case EventFailed:
		notes.add(a, msgFailed)
		q.logJob(a, "pgqueue: job failed", elapsed, slog.Any("error", o.err))
	default:
		notes.add(a, msgRetrying)
		q.logJob(a, "pgqueue: job attempt failed; retrying", elapsed, slog.Any("error", o.err),
			slog.Time("run_at", r.runAt))
	}
	c.wantWork(q, r.status == StatusAvailable, r.status == StatusScheduled)
	q.events.emit(ev)
}

// outcomeEvent is the event of an outcome as the settle saved it (r; ok false: its lock was
// gone). A job completed in its handler's transaction is reported completed whatever the outcome.
// Worker.WorkOne describes its job's outcome by it too.
func outcomeEvent(o outcome, r settled, ok bool) Event {
	ev := o.a.event(EventLockLost, o.elapsed)
	switch {
	case !ok:
	case o.kind == outcomeDone, r.status == StatusCompleted:
		ev.Kind, ev.RepeatedAs = EventCompleted, r.repeat
	case o.kind == outcomeRequeue && o.err == nil:
		ev.Kind, ev.RunAt = EventHandedBack, r.runAt
	case o.kind == outcomeRequeue:
		ev.Kind, ev.RunAt = EventSnoozed, r.runAt
	case r.status == StatusFailed:
		ev.Kind, ev.Err = EventFailed, o.err
	default:
		ev.Kind, ev.Err, ev.RunAt = EventRetrying, o.err, r.runAt
	}
	return ev
}

// wantWork tells the claimer that q has available jobs, and the maintainer that it has newly
// scheduled ones.
func (c *completer) wantWork(q *queueRun, available, scheduled bool) {
	if available {
		q.wantClaim.Store(true)
		c.rt.w.claim.signal()
	}
	if scheduled {
		q.wantPromote.Store(true)
		c.rt.w.maintain.signal()
	}
}

// queuesOfOutcomes returns the distinct queues of a batch.
func queuesOfOutcomes(batch []outcome) []*queueRun {
	attempts := make([]*attempt, len(batch))
	for i, o := range batch {
		attempts[i] = o.a
	}
	return queuesOf(attempts)
}

func scanID(r pgx.CollectableRow) (ulid.ULID, error) {
	var id ulid.ULID
	err := r.Scan((*[16]byte)(&id))
	return id, err
}

// describeError returns the message and, for a panic, the stack to record for a failed
// attempt, made storable: valid UTF-8 without NUL bytes (which Postgres text cannot hold), and
// bounded in size.
func describeError(err error) (msg, stack string) {
	msg = err.Error()
	var p *PanicError
	if errors.As(err, &p) {
		stack = p.Stack
	}
	return storable(msg, maxErrorBytes), storable(stack, maxStackBytes)
}

func storable(s string, limit int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return s
}
