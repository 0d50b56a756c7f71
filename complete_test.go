package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// A job whose row is taken away from its worker (its lease ran out and another worker took it)
// is fenced: the first worker's late outcome changes nothing.
func TestWorkerLateCompletionIsFenced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "fenced")
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Worker A: its handler blocks until released; heartbeats are slow so the lease can be
	// broken before A notices.
	releaseA := make(chan struct{})
	startedA := make(chan struct{}, 1)
	evA := newEvents()
	wa := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		startedA <- struct{}{}
		<-releaseA
		return nil
	}, &WorkerOptions{
		// One slot, which A's blocked handler keeps, so that A cannot claim the job again itself.
		Concurrency:  1,
		LockDuration: 20 * time.Second, HeartbeatInterval: 10 * time.Second, OnEvent: evA.on, PollInterval: noPoll,
	}))
	startWorker(t, wa)
	receive(t, startedA, 10*time.Second, "worker A to start the job")

	// A's lease ran out and the job was taken back, as a rescue does (token cleared, available
	// again, the attempt kept); worker B claims it and runs it.
	b.exec(`UPDATE pgqueue_jobs SET status = 'available', lock_token = NULL, lock_until = NULL, locked_by = NULL
		WHERE id = $1`, [16]byte(job.ID))
	qb := newQueue[int](t, b.newClient(), "fenced")
	releaseB := make(chan struct{})
	startedB := make(chan int, 1)
	evB := newEvents()
	wb := must(qb.NewWorker(func(ctx context.Context, job *Job[int]) error {
		startedB <- job.Attempt
		<-releaseB
		return nil
	}, &WorkerOptions{PollInterval: 20 * time.Millisecond, OnEvent: evB.on}))
	startWorker(t, wb)
	if a := receive(t, startedB, 10*time.Second, "worker B to take the job over"); a != 2 {
		t.Fatalf("worker B ran attempt %d, want 2", a)
	}

	// A finishes late (whether its heartbeat noticed the loss first or its completion finds the
	// token changed): its success must not touch B's attempt.
	close(releaseA)
	lost := evA.next(t, EventLockLost)
	if lost.JobID != job.ID {
		t.Fatalf("lock lost event = %+v", lost)
	}
	if n := b.count("id = $1 AND status = 'running' AND attempt = 2", [16]byte(job.ID)); n != 1 {
		t.Fatal("worker A's late completion changed worker B's attempt")
	}
	close(releaseB)
	evB.next(t, EventCompleted)
	if n := b.count("true"); n != 0 {
		t.Fatal("the job was not completed by worker B")
	}
}

func TestWorkerRetriesThenFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "flaky")
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		if len(job.Errors) != job.Attempt-1 {
			return fmt.Errorf("attempt %d saw %d earlier errors", job.Attempt, len(job.Errors))
		}
		if job.Attempt == 2 {
			panic("boom")
		}
		return fmt.Errorf("attempt %d failed", job.Attempt)
	}, &WorkerOptions{OnEvent: ev.on, RetryBackoff: Backoff{Initial: 10 * time.Millisecond, Jitter: -1}}))
	job, err := q.Enqueue(t.Context(), 7, &EnqueueOptions{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)

	r1 := ev.next(t, EventRetrying)
	if r1.JobID != job.ID || r1.Attempt != 1 || r1.Err == nil || r1.RunAt.IsZero() {
		t.Fatalf("first retrying event = %+v", r1)
	}
	r2 := ev.next(t, EventRetrying)
	var pe *PanicError
	if r2.Attempt != 2 || !errors.As(r2.Err, &pe) || pe.Value != "boom" {
		t.Fatalf("second retrying event = %+v", r2)
	}
	failed := ev.next(t, EventFailed)
	if failed.Attempt != 3 || failed.Err == nil || failed.Err.Error() != "attempt 3 failed" {
		t.Fatalf("failed event = %+v", failed)
	}

	// The failed job stays, with every attempt's error.
	var status string
	var attempt int
	var finished *time.Time
	var errs []AttemptError
	err = b.pool.QueryRow(t.Context(), "SELECT status, attempt, finished_at, errors FROM pgqueue_jobs WHERE id = $1",
		[16]byte(job.ID)).Scan(&status, &attempt, &finished, &errs)
	if err != nil {
		t.Fatal(err)
	}
	if status != "failed" || attempt != 3 || finished == nil || len(errs) != 3 {
		t.Fatalf("row: status %s, attempt %d, finished %v, %d errors", status, attempt, finished, len(errs))
	}
	if errs[0].Error != "attempt 1 failed" || errs[0].Attempt != 1 || errs[0].At.IsZero() {
		t.Errorf("errors[0] = %+v", errs[0])
	}
	if errs[1].Error != "panic: boom" || !strings.Contains(errs[1].Stack, "complete_test.go") {
		t.Errorf("errors[1] = %+v, want the panic with its stack", errs[1])
	}
}

func TestWorkerFixedRetryDelay(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "fixed")
	ev := newEvents()
	attempts := make(chan int, 3)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		attempts <- job.Attempt
		if job.Attempt == 1 {
			return errors.New("once")
		}
		return nil
	}, &WorkerOptions{OnEvent: ev.on, PollInterval: noPoll}))
	if _, err := q.Enqueue(t.Context(), 1, &EnqueueOptions{RetryDelay: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	receive(t, attempts, 10*time.Second, "the first attempt")
	retrying := ev.next(t, EventRetrying)
	var gap time.Duration
	var attemptedAt, runAt time.Time
	if err := b.pool.QueryRow(t.Context(), "SELECT attempted_at, run_at FROM pgqueue_jobs WHERE id = $1",
		[16]byte(retrying.JobID)).Scan(&attemptedAt, &runAt); err != nil {
		t.Fatal(err)
	}
	if gap = runAt.Sub(attemptedAt); gap < 300*time.Millisecond {
		t.Fatalf("retry scheduled %s after the attempt started, want at least the job's RetryDelay", gap)
	}
	// The retry is promoted by the worker's due-time timer, not by a poll.
	if a := receive(t, attempts, 10*time.Second, "the retry"); a != 2 {
		t.Fatalf("second run was attempt %d", a)
	}
	ev.next(t, EventCompleted)
}

// Two outcomes of one job wait for the completer when its lease ran out while the first waited
// (the database was away) and this runtime claimed the job again and ran it: the first is
// settled and reported lost (its token is gone), and only then the second, completed. Settled
// in one batch, the second's result answered for both, and the lost attempt was reported
// completed.
func TestSettleTwoAttemptsOfOneJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rt, ev := oneJobRuntime(t, b, "twice")
	first := finishedAttempt(t, rt)
	b.exec("UPDATE pgqueue_jobs SET status = 'available'") // as a rescue of its expired lease would
	second := finishedAttempt(t, rt)
	settleFirstLostThenCompleted(t, rt, ev, first, second)
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs left, want none", n)
	}
}

// An outcome a settle skipped, its row locked by another transaction, keeps its place ahead of a
// newer attempt of its job: the other transaction took the job back (as a rescue would) and this
// runtime claimed and finished it again meanwhile, but the newer outcome waits until the skipped
// one has been settled again and reported lost.
func TestSkippedOutcomeKeepsItsPlace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	rt, ev := oneJobRuntime(t, b, "skipped-first")
	first := finishedAttempt(t, rt)
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT FROM pgqueue_jobs FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	c := rt.completer
	left, err := c.settle(ctx, c.takeOutcomes(), starts{}, false)
	if err != nil || len(left) != 1 || left[0].a != first {
		t.Fatalf("settle of the locked job's outcome: %d skipped, %v; want it skipped", len(left), err)
	}
	c.addSkipped(left)
	if _, err := tx.Exec(ctx, "UPDATE pgqueue_jobs SET status = 'available'"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	second := finishedAttempt(t, rt)
	if batch := c.takeOutcomes(); len(batch) != 0 {
		t.Fatalf("the newer attempt's outcome was taken (%d outcomes) while the older one waited to be settled again", len(batch))
	}
	c.putBackSkipped()
	settleFirstLostThenCompleted(t, rt, ev, first, second)
}

// The last settle at shutdown keeps within the longest ShutdownTimeout, however long the leases:
// here no connection frees for it, and it gives up after the ShutdownTimeout, not the
// LockDuration. The outcome it could not save is left: the job stays running under its lease.
func TestFinalSettleKeepsToShutdownTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	pool := newPool(t, b.schema, 2)
	c, err := NewClient(pool, &Config{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	q := newQueue[int](t, c, "final")
	if _, err := q.Enqueue(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	const shutdown = 300 * time.Millisecond
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil },
		&WorkerOptions{LockDuration: time.Minute, ShutdownTimeout: shutdown}))
	rt := newRuntime(c, []*workerSpec{&w.spec})
	finishedAttempt(t, rt)
	for range pool.Config().MaxConns { // every connection taken: the settle waits for one
		conn, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
	}
	start := time.Now()
	rt.completer.finalSettle()
	if took := time.Since(start); took > 10*shutdown {
		t.Fatalf("the last settle took %s, want about the ShutdownTimeout (%s)", took, shutdown)
	}
	if n := b.count("status = 'running' AND lock_until > now() + interval '30 seconds'"); n != 1 {
		t.Fatal("the job whose outcome was not saved is not left running under its lease")
	}
}

// oneJobRuntime enqueues one job to queue and returns a runtime serving the queue with a worker
// that completes its jobs, not running (its events delivered to ev until the test ends), for a
// test to claim and settle by hand.
func oneJobRuntime(t *testing.T, b *bundle, queue string) (*runtime, *events) {
	t.Helper()
	q := newQueue[int](t, b.client, queue)
	if _, err := q.Enqueue(t.Context(), 1, nil); err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{OnEvent: ev.on}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	rt.queues[0].events.start()
	t.Cleanup(rt.closeEvents)
	return rt, ev
}

// settleFirstLostThenCompleted settles the outcomes of two attempts of one job, first the older,
// whose lock was gone, then the newer, each alone in its batch, and checks that they are reported
// in that order: EventLockLost, then EventCompleted.
func settleFirstLostThenCompleted(t *testing.T, rt *runtime, ev *events, first, second *attempt) {
	t.Helper()
	for i, want := range []struct {
		a    *attempt
		kind EventKind
	}{{first, EventLockLost}, {second, EventCompleted}} {
		batch := rt.completer.takeOutcomes()
		if len(batch) != 1 || batch[0].a != want.a {
			t.Fatalf("batch %d: %d outcomes, want attempt %d's alone", i+1, len(batch), want.a.attempt)
		}
		if left, err := rt.completer.settle(t.Context(), batch, starts{}, false); err != nil || len(left) > 0 {
			t.Fatalf("settle: %d outcomes skipped, %v", len(left), err)
		}
		if e := ev.nextOf(t, first.id); e.Kind != want.kind || e.Attempt != want.a.attempt {
			t.Fatalf("attempt %d reported %s, want %s", e.Attempt, e.Kind, want.kind)
		}
	}
}

// finishedAttempt claims the first job of the only queue of rt, a runtime made by hand, and gives
// it an attempt whose handler succeeded, its outcome waiting for the completer; the lease is the
// queue's LockDuration, from the claim.
func finishedAttempt(t testing.TB, rt *runtime) *attempt {
	t.Helper()
	q := rt.queues[0]
	claimed, _, sent, err := claimOnce(t.Context(), rt.c, []claimWant{{q: q, limit: 1}})
	if err != nil || len(claimed[0]) != 1 {
		t.Fatalf("claim: %d jobs, %v", len(claimed[0]), err)
	}
	a := newAttempt(q, claimed[0][0], sent.Add(q.opts.LockDuration))
	s := rt.set
	s.mu.Lock()
	s.byID[a.id] = a
	s.move(a, attemptFinishing)
	s.outcomes = append(s.outcomes, outcome{a: a, kind: outcomeDone})
	s.mu.Unlock()
	return a
}

// A job's row that another transaction keeps locked (here an application's transaction left
// open, as a CancelTx would) holds up neither the settle of the other jobs nor their leases: the
// job of the other queue, finished after it, completes at once on its first attempt, instead of
// waiting behind it until its 1 s lease runs out, to be taken back and run again by this same
// worker. The locked job completes once its row is free.
func TestSettleSkipsLockedRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long, short := newQueue[int](t, b.client, "long"), newQueue[int](t, b.client, "short")
	ev := newEvents()
	release := map[int]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
	started := make(chan ulid.ULID, 10)
	hold := func(ctx context.Context, job *Job[int]) error {
		started <- job.ID
		<-release[job.Payload]
		return nil
	}
	longWorker := must(long.NewWorker(hold, &WorkerOptions{LockDuration: time.Hour, PollInterval: noPoll, OnEvent: ev.on}))
	shortWorker := must(short.NewWorker(hold, &WorkerOptions{LockDuration: time.Second,
		HeartbeatInterval: 100 * time.Millisecond, PollInterval: 200 * time.Millisecond, OnEvent: ev.on}))
	locked := must(long.Enqueue(t.Context(), 1, nil))
	other := must(short.Enqueue(t.Context(), 2, nil))
	runWorkers(t, b.client, longWorker, shortWorker)
	receive(t, started, 10*time.Second, "a job to start")
	receive(t, started, 10*time.Second, "the other job to start")

	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var freed sync.Once
	free := func() { freed.Do(func() { _ = tx.Rollback(context.Background()) }) }
	t.Cleanup(free) // before the workers stop, should the test fail
	if _, err := tx.Exec(t.Context(), "SELECT FROM pgqueue_jobs WHERE id = $1 FOR UPDATE", locked.ID); err != nil {
		t.Fatal(err)
	}
	close(release[1])
	time.Sleep(200 * time.Millisecond) // its settle meets the locked row
	close(release[2])
	deadline := time.After(10 * time.Second)
	for done := false; !done; {
		select {
		case id := <-started:
			t.Fatalf("job %s ran again while the other job's row was locked", id)
		case e := <-ev.ch:
			switch {
			case e.JobID != other.ID || e.Kind == EventStarted:
			case e.Kind != EventCompleted || e.Attempt != 1:
				t.Fatalf("the other job: %s on attempt %d, want completed on the first", e.Kind, e.Attempt)
			default:
				done = true
			}
		case <-deadline:
			t.Fatal("the other job was not settled while a row of the batch was locked")
		}
	}
	if n := b.count("id = $1 AND status = 'running'", locked.ID); n != 1 {
		t.Fatal("the locked job's row changed under the lock")
	}
	free()
	if e := ev.nextOf(t, locked.ID); e.Kind != EventCompleted || e.Attempt != 1 {
		t.Fatalf("the locked job: %s on attempt %d, want completed on the first", e.Kind, e.Attempt)
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs left, want none", n)
	}
}

// The completer records the start of a job claimed ahead (its attempted_at left empty by the
// claim) once its handler has run startRecordAfter, in its next round trip, and no sooner: a job
// that returns before that has its start recorded by its outcome.
func TestCompleterRecordsStarts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "starts")
	if _, err := q.EnqueueMany(t.Context(), make([]int, 2), nil); err != nil {
		t.Fatal(err)
	}
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 2}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	qr := rt.queues[0]
	want := claimWant{q: qr, limit: 2, ahead: 2}
	claimed, _, sent, err := claimOnce(t.Context(), rt.c, []claimWant{want})
	if err != nil || len(claimed[0]) != 2 {
		t.Fatalf("claim: %d jobs, %v", len(claimed[0]), err)
	}
	if n := b.count("status = 'running' AND attempted_at IS NULL"); n != 2 {
		t.Fatalf("%d jobs claimed ahead with no start recorded, want 2", n)
	}
	tasks, _ := rt.set.hold(qr, markAhead(claimed[0], want), sent.Add(time.Minute), time.Now())
	if len(tasks) != 2 {
		t.Fatalf("%d started, want 2", len(tasks))
	}
	if due, next := rt.set.takeStarts(time.Now()); !due.empty() || next.IsZero() {
		t.Fatalf("%d starts due at once (next %v), want none until startRecordAfter", len(due.ahead), next)
	}
	time.Sleep(startRecordAfter)
	due, _ := rt.set.takeStarts(time.Now())
	if len(due.ahead) != 2 || len(due.rated) != 0 {
		t.Fatalf("%d starts due after startRecordAfter (%d of a rate), want 2", len(due.ahead), len(due.rated))
	}
	if _, err := rt.completer.settle(t.Context(), nil, due, false); err != nil {
		t.Fatal(err)
	}
	if n := b.count("status = 'running' AND attempted_at IS NOT NULL"); n != 2 {
		t.Fatalf("%d starts recorded, want 2", n)
	}
}

// A settle that frees places of a limited queue wakes the queue's other workers only when this
// runtime cannot take the places again itself: with a slot free for each it wakes nobody; paused
// here, it wakes them.
func TestCompleterWakesOthersOnlyForPlacesItLeaves(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := limitedQueue(t, b, "retake", Limits{KeyMaxRunning: 1}, 0)
	for _, key := range []string{"a", "b", "c"} {
		if _, err := q.Enqueue(t.Context(), 0, &EnqueueOptions{Key: key}); err != nil {
			t.Fatal(err)
		}
	}
	rt, release := blockedRuntime(b, q)
	qr := rt.queues[0]
	qr.events.start()
	qr.way.Store(uint32(claimLimited))
	ctx, cancel := context.WithCancel(t.Context())
	rt.set.start(ctx)
	defer func() {
		cancel()
		close(release)
		rt.handlers.stop()
	}()
	claimed, _, sent, err := claimOnce(ctx, rt.c, []claimWant{{q: qr, limit: 2}})
	if err != nil || len(claimed[0]) != 2 {
		t.Fatalf("claim: %d jobs, %v; want 2", len(claimed[0]), err)
	}
	rt.claimer.hold(qr, claimed[0], sent)
	l := listenConn(t, b)
	settleOne := func() {
		t.Helper()
		release <- struct{}{}
		var batch []outcome
		waitFor(t, 10*time.Second, "a handler's outcome", func() bool {
			batch = append(batch, rt.completer.takeOutcomes()...)
			return len(batch) == 1
		})
		if skipped, err := rt.completer.settle(ctx, batch, starts{}, true); err != nil || len(skipped) > 0 {
			t.Fatalf("settle: %d skipped, %v", len(skipped), err)
		}
	}

	settleOne()
	if got := notificationsUntilMarker(t, b, l); slices.Contains(got, wakeFreedMessage("retake")) {
		t.Fatalf("a settle whose place this runtime takes again woke the queue's workers (notifications: %v)", got)
	}
	if !qr.wantClaim.Load() {
		t.Fatal("the settle left the queue's claim to nobody: the claim loop does not want a claim")
	}
	qr.paused.Store(true) // as when the pause was heard here
	settleOne()
	if got := notificationsUntilMarker(t, b, l); !slices.Contains(got, wakeFreedMessage("retake")) {
		t.Fatalf("a settle whose place this runtime cannot take again woke nobody (notifications: %v)", got)
	}
}

// A job completed with CompleteTx in a transaction that a failover lost (committed on the old
// primary, never replicated) counts as rolled back on the new one: its transaction id is one the
// new primary has not given out, which pg_xact_status refuses ("is in the future"), and which
// made the completer and the heartbeat fail on every try. A transaction that committed here,
// one that rolled back, and one in the future, each with its token gone from the row.
func TestLostAfterRollbackOfATransactionAFailoverLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var committed, aborted, future string
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(t.Context(), xactIDSQL).Scan(&committed); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	tx, err = b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(t.Context(), xactIDSQL).Scan(&aborted); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.pool.QueryRow(t.Context(), "SELECT (pg_current_xact_id()::text::bigint + 1000000)::text").Scan(&future); err != nil {
		t.Fatal(err)
	}
	ids := [][16]byte{ulid.Make(), ulid.Make(), ulid.Make()}
	tokens := [][16]byte{ulid.Make(), ulid.Make(), ulid.Make()}
	rows, _ := b.pool.Query(t.Context(), lostAfterRollbackSQL, ids, tokens, []string{committed, aborted, future})
	lost, err := pgx.CollectRows(rows, scanID)
	if err != nil {
		t.Fatalf("lost_after_rollback with a transaction id from a lost primary: %v", err)
	}
	if len(lost) != 2 || lost[0] == ulid.ULID(ids[0]) || lost[1] == ulid.ULID(ids[0]) {
		t.Fatalf("lost %v, want the rolled-back one %s and the future one %s", lost, ulid.ULID(ids[1]), ulid.ULID(ids[2]))
	}
}
