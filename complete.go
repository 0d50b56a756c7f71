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

// completeLoop settles finished attempts of every queue of the runtime until ctx ends, then
// settles what is left once more. It batches by group commit: while one settle round trip runs,
// the outcomes that arrive meanwhile gather and go together in the next, so a busy runtime
// writes many results per round trip and an idle one adds no delay. Outcomes whose rows a settle
// skipped, locked by another transaction, wait a pause and go in a later batch.
func (rt *runtime) completeLoop(ctx context.Context) {
	failures := 0
	var skipped skippedOutcomes
	for {
		skipped.release(rt)
		batch := rt.takeOutcomes()
		starts, nextStart := rt.takeUnrecorded(time.Now())
		if len(batch) == 0 && len(starts) == 0 {
			select {
			case <-ctx.Done():
				rt.finalSettle(skipped.outcomes)
				return
			case <-rt.settle:
			case <-skipped.wait():
			case <-timerAt(nextStart):
			}
			continue
		}
		left, err := rt.settleOutcomes(ctx, batch, starts)
		if err != nil {
			rt.putBackOutcomes(batch)
			rt.putBackUnrecorded(starts)
			if ctx.Err() != nil {
				rt.finalSettle(skipped.outcomes)
				return
			}
			failures++
			rt.reportError(queuesOfOutcomes(batch), "pgqueue: settle finished jobs", err)
			if !sleepCtx(ctx, retryDelay(failures)) {
				rt.finalSettle(skipped.outcomes)
				return
			}
			continue
		}
		failures = 0
		skipped.add(rt, left)
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

// takeUnrecorded takes the attempts claimed ahead whose handlers have run startRecordAfter by now
// and still run, for the completer to record their starts, and returns when the next one will
// have (zero if none). Those whose handlers returned meanwhile are forgotten: their outcome
// records their start.
func (rt *runtime) takeUnrecorded(now time.Time) (due []*attempt, next time.Time) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	kept := rt.unrecorded[:0]
	for _, a := range rt.unrecorded {
		switch {
		case a.state != attemptRunning && a.state != attemptInTx:
		case now.Sub(a.started) >= startRecordAfter:
			due = append(due, a)
		default:
			if at := a.started.Add(startRecordAfter); next.IsZero() || at.Before(next) {
				next = at
			}
			kept = append(kept, a)
		}
	}
	clear(rt.unrecorded[len(kept):])
	rt.unrecorded = kept
	return due, next
}

// putBackUnrecorded puts back starts whose record failed, to be recorded with the next batch.
func (rt *runtime) putBackUnrecorded(starts []*attempt) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.unrecorded = append(starts, rt.unrecorded...)
}

// skipPauseFirst is how long an outcome whose row a settle skipped waits before it is settled
// again, the first time: long enough for a heartbeat statement to commit. The pause doubles each
// time its row is skipped again, up to a heartbeat interval.
const skipPauseFirst = 10 * time.Millisecond

// skippedOutcomes are the completer's outcomes whose rows a settle skipped because another
// transaction locked them (an application's CancelTx left open, a handler's CompleteTx
// transaction not yet ended, a heartbeat). They wait for their pause to pass, their leases kept
// by the heartbeat, then join the outcomes to settle again.
type skippedOutcomes struct {
	outcomes []outcome
	at       time.Time // when the first of them is due again
}

// add notes the outcomes a settle skipped. Until they are settled again, a newer outcome of any
// of their jobs waits (takeOutcomes).
func (s *skippedOutcomes) add(rt *runtime, skipped []outcome) {
	if len(skipped) == 0 {
		return
	}
	rt.mu.Lock()
	for _, o := range skipped {
		rt.skippedJobs[o.a.id] = true
	}
	rt.mu.Unlock()
	at := time.Now().Add(skipPause(skipped, rt.heartbeatEvery))
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

// release hands the skipped outcomes back to be settled once their pause has passed.
func (s *skippedOutcomes) release(rt *runtime) {
	if len(s.outcomes) > 0 && !time.Now().Before(s.at) {
		rt.putBackSkipped(s.outcomes)
		s.outcomes = nil
	}
}

// wait returns a channel that fires when the skipped outcomes are due again; nil if none waits.
func (s *skippedOutcomes) wait() <-chan time.Time {
	if len(s.outcomes) == 0 {
		return nil
	}
	return time.After(time.Until(s.at))
}

// finalSettle makes one last attempt, within the longest ShutdownTimeout, to settle what is
// left, and the outcomes skipped earlier; a settle still under way then is cut off. Jobs it
// cannot settle stay running in the table until their leases run out and another process takes
// them back: they are not lost, and run again.
func (rt *runtime) finalSettle(skipped []outcome) {
	var timeout time.Duration
	for _, q := range rt.queues {
		timeout = max(timeout, q.opts.ShutdownTimeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rt.putBackSkipped(skipped)
	// More than one batch when a job has two outcomes (takeOutcomes), or rows were skipped.
	for batch := rt.takeOutcomes(); len(batch) > 0; batch = rt.takeOutcomes() {
		left, err := rt.settleOutcomes(ctx, batch, nil)
		if err == nil && len(left) > 0 {
			rt.putBackOutcomes(left)
			if !sleepCtx(ctx, skipPause(left, timeout)) {
				batch, err = left, fmt.Errorf("pgqueue: complete: %d jobs' rows stay locked by other transactions", len(left))
			}
		}
		if err != nil {
			rt.reportError(queuesOfOutcomes(batch),
				"pgqueue: settle finished jobs at shutdown; they will be taken back when their leases run out", err)
			return
		}
	}
}

// takeOutcomes takes the outcomes waiting for the completer, at most one of each job. A job
// whose lease ran out while its outcome waited (the database was away) can be claimed again, by
// this runtime too, and its newer attempt's outcome then joins the older one. The settle
// statements' results name jobs by id, so the newer outcome waits for the next batch, after
// the older one has been settled (as lost: its token is gone) and reported. So does an outcome
// of a job whose older outcome a settle skipped and that waits to be settled again.
func (rt *runtime) takeOutcomes() []outcome {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	batch := rt.outcomes
	rt.outcomes = nil
	seen := make(map[ulid.ULID]bool, len(batch))
	n := 0
	for _, o := range batch {
		if seen[o.a.id] || rt.skippedJobs[o.a.id] {
			rt.outcomes = append(rt.outcomes, o)
			continue
		}
		seen[o.a.id] = true
		batch[n] = o
		n++
	}
	return batch[:n]
}

// putBackOutcomes puts a batch back, ahead of the outcomes that came since.
func (rt *runtime) putBackOutcomes(batch []outcome) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.outcomes = append(batch, rt.outcomes...)
}

// putBackSkipped puts outcomes a settle skipped back, ahead of the outcomes that came since, and
// lets the newer outcomes of their jobs that waited for them follow.
func (rt *runtime) putBackSkipped(skipped []outcome) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, o := range skipped {
		delete(rt.skippedJobs, o.a.id)
	}
	rt.outcomes = append(skipped, rt.outcomes...)
}

// settleArgs are the columns of one batch, as the settle statements take them.
type settleArgs struct {
	ids, tokens             [][16]byte // every job of the batch
	doneIDs, doneTokens     [][16]byte // succeeded, not repeating, deleted
	keptIDs, keptTokens     [][16]byte // succeeded, not repeating, kept by retention
	repeatIDs, repeatTokens [][16]byte // succeeded jobs that may repeat
	repeatNext              [][16]byte
	repeatKeep              []bool
	failIDs, failTokens     [][16]byte
	failDelays              []int64 // µs
	failFinal               []bool
	failErrors, failStacks  []string
	backIDs, backTokens     [][16]byte
	backDelays              []int64    // µs
	backStarted             []bool     // the handler started (a snooze, a shutdown), or not (a job claimed ahead)
	startIDs, startTokens   [][16]byte // started attempts claimed ahead, whose starts are to be recorded
	inTxIDs, inTxTokens     [][16]byte // completed with Job.CompleteTx, and the transactions
	inTxXacts               []string
	inTxNext                []ulid.ULID // the next runs those transactions enqueued
	// Limited queues whose claims may find room now (freedQueues): those woken on every end of a
	// job, and those with only a MaxRunning, in name order.
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

// settleOutcomes writes a batch of outcomes, of any queues, in one round trip, then reports
// them. Every statement matches on (id, lock_token), so an outcome whose lock was lost changes
// nothing; it is reported as EventLockLost. No statement waits for a row another transaction
// locks: such an outcome is skipped, and returned to be settled again later, so that one locked
// row holds up neither the batch nor the outcomes that follow it.
func (rt *runtime) settleOutcomes(ctx context.Context, batch []outcome, starts []*attempt) (skipped []outcome, err error) {
	args := rt.buildSettle(batch)
	args.recordStarts(starts)
	results, err := rt.sendSettle(ctx, args)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Concat(args.freed, args.capped) {
		rt.byName[name].wantClaim.Store(true) // applySettled wakes the claim loop
	}
	batch, skipped = splitSkipped(batch, results)
	rt.applySettled(ctx, batch, results)
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

// buildSettle sorts a batch into the columns of the settle statements, in id order: rows are
// locked in id order, as the heartbeat locks them.
func (rt *runtime) buildSettle(batch []outcome) *settleArgs {
	slices.SortFunc(batch, func(x, y outcome) int { return x.a.id.Compare(y.a.id) })
	a := &settleArgs{}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, o := range batch {
		id, token := [16]byte(o.a.id), o.a.token
		a.ids, a.tokens = append(a.ids, id), append(a.tokens, token)
		if o.a.xact != "" {
			// Completed in its handler's transaction, whatever the handler did next (returned an
			// error, panicked, was stopped or given up): if that transaction committed, the row
			// says completed, and so does the report.
			a.inTxIDs, a.inTxTokens = append(a.inTxIDs, id), append(a.inTxTokens, token)
			a.inTxXacts, a.inTxNext = append(a.inTxXacts, o.a.xact), append(a.inTxNext, o.a.nextRun)
		}
		switch o.kind {
		case outcomeDone:
			switch {
			case o.a.repeats:
				a.repeatIDs, a.repeatTokens = append(a.repeatIDs, id), append(a.repeatTokens, token)
				a.repeatKeep = append(a.repeatKeep, o.a.q.keep)
			case o.a.q.keep:
				a.keptIDs, a.keptTokens = append(a.keptIDs, id), append(a.keptTokens, token)
			default:
				a.doneIDs, a.doneTokens = append(a.doneIDs, id), append(a.doneTokens, token)
			}
		case outcomeRequeue:
			a.backIDs, a.backTokens = append(a.backIDs, id), append(a.backTokens, token)
			a.backDelays = append(a.backDelays, o.delay.Microseconds())
			a.backStarted = append(a.backStarted, !o.a.started.IsZero())
		case outcomeFailed:
			a.failIDs, a.failTokens = append(a.failIDs, id), append(a.failTokens, token)
			a.failDelays = append(a.failDelays, o.a.q.opts.RetryBackoff.Delay(o.a.attempt).Microseconds())
			a.failFinal = append(a.failFinal, o.final)
			msg, stack := describeError(o.err)
			a.failErrors, a.failStacks = append(a.failErrors, msg), append(a.failStacks, stack)
		}
	}
	a.freed, a.capped = freedQueues(batch)
	for _, id := range rt.c.ids.next(len(a.repeatIDs)) {
		a.repeatNext = append(a.repeatNext, id) // ids for the next runs
	}
	return a
}

// recordStarts adds the starts of attempts claimed ahead to record (record_starts.sql) to the
// batch.
func (a *settleArgs) recordStarts(starts []*attempt) {
	for _, s := range starts {
		a.startIDs, a.startTokens = append(a.startIDs, s.id), append(a.startTokens, s.token)
	}
}

// sendSettle sends the statements a batch needs in one round trip and returns what became of
// each job (and, if some were not settled, which of them were skipped: findSkipped). The end of
// ctx does not interrupt it, but its deadline does (at shutdown), as does the longest lease: the
// statements' effect is then unknown, and the batch fails.
func (rt *runtime) sendSettle(ctx context.Context, a *settleArgs) (map[ulid.ULID]settled, error) {
	b := &pgx.Batch{}
	a.queue(b)
	qctx, cancel := withoutCancelUntil(ctx, rt.longestLease())
	defer cancel()
	br := rt.c.pool.SendBatch(qctx, b)
	defer br.Close()
	results, err := readSettled(br, a)
	if err != nil {
		return nil, err
	}
	if err := br.Close(); err != nil {
		return nil, fmt.Errorf("pgqueue: settle: %w", err)
	}
	rt.findSkipped(qctx, a, results)
	return results, nil
}

// findSkipped marks in results the jobs of a committed settle that it skipped, their rows locked
// by another transaction, among those it did not settle (rare: most were). The others had lost
// their locks. Should that be unknown (the read failed), they all count as skipped: settled
// again, they are found settled or lost then.
func (rt *runtime) findSkipped(ctx context.Context, a *settleArgs, results map[ulid.ULID]settled) {
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
	rows, _ := rt.c.pool.Query(ctx, settleSkippedSQL, ids, tokens)
	if err := collectSkipped(rows, results); err != nil {
		rt.c.cfg.Logger.Warn("pgqueue: settle: read which rows were skipped; settling them again", "error", err)
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
	if len(a.doneIDs) > 0 {
		b.Queue(completeSQL, a.doneIDs, a.doneTokens)
	}
	if len(a.keptIDs) > 0 {
		b.Queue(completeKeepSQL, a.keptIDs, a.keptTokens)
	}
	if len(a.repeatIDs) > 0 {
		b.Queue(completeRepeatSQL, a.repeatIDs, a.repeatTokens, a.repeatNext, a.repeatKeep)
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
		b.Queue(notifySQL, wakeMessage(StatusAvailable, q))
	}
	if len(a.capped) > 0 {
		b.Queue(wakeHeldSQL, a.capped)
	}
}

// freedQueues returns the queues of a batch with limits: the jobs' ends free places that a
// claim, here or in another process, may have found taken, so the settle wakes their workers
// with a notification sent on its commit; queues without limits send none. Those with per-key
// limits or rates (freed) are woken every time; those with only a MaxRunning (capped, in name
// order) only if a claim of theirs was held back by the limit (wake_held.sql), so that a
// MaxRunning never reached costs no wake-ups.
func freedQueues(batch []outcome) (freed, capped []string) {
	for _, o := range batch {
		q := o.a.q
		switch claimWay(q.way.Load()) {
		case claimLimited:
			if !slices.Contains(freed, q.name) {
				freed = append(freed, q.name)
			}
		case claimCapped:
			if !slices.Contains(capped, q.name) {
				capped = append(capped, q.name)
			}
		}
	}
	slices.Sort(capped)
	return freed, capped
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

// longestLease is the longest LockDuration of the runtime's queues: how long a settle or claim
// round trip may take before its jobs' leases could run out anyway.
func (rt *runtime) longestLease() time.Duration {
	var d time.Duration
	for _, q := range rt.queues {
		d = max(d, q.opts.LockDuration)
	}
	return d
}

// applySettled reports a settled batch and forgets its attempts. Events first: EventDrained,
// which the claim loop may emit once the jobs are gone, must follow the events of the jobs it
// covers.
func (rt *runtime) applySettled(ctx context.Context, batch []outcome, results map[ulid.ULID]settled) {
	var notes announcements
	for _, o := range batch {
		r, ok := results[o.a.id]
		rt.report(o, r, ok, &notes)
	}
	rt.announce(ctx, notes)
	// The outcomes are reported: the events that waited for them (the EventStarted of a newer
	// attempt of a job, claimed before the report; see runtime.start) go out now.
	var waited []*attempt
	rt.mu.Lock()
	for _, o := range batch {
		rt.forget(o.a)
		o.a.reported = true
		if len(o.a.next) > 0 {
			waited = append(waited, o.a)
		}
	}
	rt.mu.Unlock()
	for _, a := range waited {
		a.q.events.emitAll(a.next) // nothing appends to next once reported is set
	}
	signal(rt.wakeFetch)
}

// report emits the event of one settled outcome, logs it, wakes the runtime's loops for jobs it
// put back in line, and notes what watchers of the queue are to hear.
func (rt *runtime) report(o outcome, r settled, ok bool, notes *announcements) {
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
			rt.wantWork(q, true, true)
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
	rt.wantWork(q, r.status == StatusAvailable, r.status == StatusScheduled)
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

// wantWork tells the claim loop that q has available jobs, and the maintenance loop that it has
// newly scheduled ones.
func (rt *runtime) wantWork(q *queueRun, available, scheduled bool) {
	if available {
		q.wantClaim.Store(true)
		signal(rt.wakeFetch)
	}
	if scheduled {
		q.wantPromote.Store(true)
		signal(rt.wakeMaint)
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
