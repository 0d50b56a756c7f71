package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// Pausing in one client stops the workers of another at once, without a poll; resuming starts
// them at once.
func TestPauseSeenByAnotherClient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	admin := newQueue[int](t, b.client, "pausable")
	other := b.newClient()
	q := newQueue[int](t, other, "pausable")
	ran := make(chan int, 10)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		ran <- job.Payload
		return nil
	}, &WorkerOptions{PollInterval: noPoll}))
	startWorker(t, w)
	waitListening(t, other, 1)

	if err := admin.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Enqueue(t.Context(), 1, nil); err != nil {
		t.Fatal(err)
	}
	// The worker was woken by the enqueue and found the queue paused; give it time to (wrongly) run.
	select {
	case <-ran:
		t.Fatal("a job started in a paused queue")
	case <-time.After(300 * time.Millisecond):
	}
	st, err := admin.Stats(t.Context())
	if err != nil || !st.Paused || st.Available != 1 {
		t.Fatalf("stats of the paused queue = %+v, %v", st, err)
	}
	if err := admin.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	receive(t, ran, 10*time.Second, "the job to start after resume")
}

func TestCancelRunningJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "cancel")
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	cause := make(chan error, 1)
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil // a late success must change nothing
	}, &WorkerOptions{OnEvent: ev.on, PollInterval: noPoll, LockDuration: time.Minute}))
	startWorker(t, w)
	<-started

	// Another client cancels it; heartbeats are 20 s apart, so only NOTIFY can tell the worker.
	other := newQueue[int](t, b.newClient(), "cancel")
	if err := other.Cancel(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	if c := receive(t, cause, 10*time.Second, "the handler's context to be cancelled"); !errors.Is(c, ErrCancelled) {
		t.Fatalf("cause = %v, want ErrCancelled", c)
	}
	if e := ev.next(t, EventCancelled); e.JobID != job.ID {
		t.Fatalf("cancelled event = %+v", e)
	}
	if n := b.count("id = $1 AND status = 'cancelled' AND finished_at IS NOT NULL AND lock_token IS NULL", [16]byte(job.ID)); n != 1 {
		t.Fatal("the job did not end cancelled")
	}
	// Cancelling again is a no-op.
	if err := other.Cancel(t.Context(), job.ID); err != nil {
		t.Fatalf("second Cancel = %v", err)
	}
}

// Cancel, Retry and Delete act on waiting jobs: a cancelled job retried is available again with
// fresh attempts, a scheduled one retried runs now, Delete of a running job needs Cancel, and ids
// unknown or of another queue are not found.
func TestCancelRetryDeleteWaitingJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "ops")
	waiting, err := q.Enqueue(ctx, 1, &EnqueueOptions{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(ctx, waiting.ID); err != nil {
		t.Fatal(err)
	}
	if n := b.count("id = $1 AND status = 'cancelled'", [16]byte(waiting.ID)); n != 1 {
		t.Fatal("the waiting job was not cancelled")
	}
	// Retry puts it back, available now, with a fresh set of attempts.
	b.exec("UPDATE pgqueue_jobs SET attempt = 3 WHERE id = $1", [16]byte(waiting.ID))
	if err := q.Retry(ctx, waiting.ID); err != nil {
		t.Fatal(err)
	}
	if n := b.count("id = $1 AND status = 'available' AND attempt = 0 AND finished_at IS NULL AND run_at <= now()", [16]byte(waiting.ID)); n != 1 {
		t.Fatal("the cancelled job was not made available again")
	}
	// A scheduled job is made runnable now.
	later, err := q.Enqueue(ctx, 2, &EnqueueOptions{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Retry(ctx, later.ID); err != nil {
		t.Fatal(err)
	}
	if n := b.count("id = $1 AND status = 'available'", [16]byte(later.ID)); n != 1 {
		t.Fatal("the scheduled job was not made available")
	}

	// Delete refuses a running job unless told to cancel it.
	b.exec("UPDATE pgqueue_jobs SET status = 'running', lock_token = gen_random_uuid(), lock_until = now() + interval '1 hour' WHERE id = $1", [16]byte(later.ID))
	if err := q.Delete(ctx, later.ID, nil); !errors.Is(err, ErrJobRunning) {
		t.Fatalf("Delete of a running job = %v, want ErrJobRunning", err)
	}
	if err := q.Retry(ctx, later.ID); !errors.Is(err, ErrJobRunning) {
		t.Fatalf("Retry of a running job = %v, want ErrJobRunning", err)
	}
	if err := q.Delete(ctx, later.ID, &DeleteOptions{Cancel: true}); err != nil {
		t.Fatal(err)
	}
	if err := q.Delete(ctx, waiting.ID, nil); err != nil {
		t.Fatal(err)
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs left after deleting both", n)
	}

	// Unknown ids, and ids of another queue, are not found; nothing changes.
	checkOtherIDsNotFound(t, b, q)
}

// checkOtherIDsNotFound checks that Cancel, Retry, Delete and Job of q return ErrNotFound for
// an unknown id and for the id of a job of another queue, and leave that job as it was.
func checkOtherIDsNotFound(t testing.TB, b *bundle, q *Queue[int]) {
	t.Helper()
	ctx := t.Context()
	otherQueue := newQueue[int](t, b.client, "elsewhere")
	foreign, err := otherQueue.Enqueue(ctx, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []ulid.ULID{ulid.Make(), foreign.ID} {
		if err := q.Cancel(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Cancel(%s) = %v, want ErrNotFound", id, err)
		}
		if err := q.Retry(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Retry(%s) = %v, want ErrNotFound", id, err)
		}
		if err := q.Delete(ctx, id, nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("Delete(%s) = %v, want ErrNotFound", id, err)
		}
		if _, err := q.Job(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Job(%s) = %v, want ErrNotFound", id, err)
		}
	}
	if n := b.count("id = $1 AND status = 'available'", [16]byte(foreign.ID)); n != 1 {
		t.Fatal("an operation on the wrong queue changed the job")
	}
}

func TestCancelFinishedJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "finished")
	ev := newEvents()
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return Permanent(errors.New("no")) },
		&WorkerOptions{OnEvent: ev.on}))
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	ev.next(t, EventFailed)
	if err := q.Cancel(t.Context(), job.ID); !errors.Is(err, ErrJobFinished) {
		t.Fatalf("Cancel of a failed job = %v, want ErrJobFinished", err)
	}
	if err := q.Retry(t.Context(), job.ID); err != nil {
		t.Fatalf("Retry of a failed job = %v", err)
	}
	ev.next(t, EventFailed) // it ran again
}

// A kept completed run of a repeating job has enqueued its next run already: retried, it runs
// once more without repeating, and the chain stays one. A failed or cancelled run ended its
// chain: retried, it continues it, once.
func TestRetryRepeatingRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := b.newClientWith(Config{Retention: Retention{Completed: KeepForever}})
	q := newQueue[int](t, client, "chain")
	var failing atomic.Bool
	w := must(q.NewWorker(func(context.Context, *Job[int]) error {
		if failing.Load() {
			return Permanent(errors.New("no"))
		}
		return nil
	}, nil))
	repeating := &EnqueueOptions{RepeatCount: 3, RepeatEvery: time.Hour}
	live := "status IN ('scheduled', 'available', 'running')"

	job, err := q.Enqueue(t.Context(), 1, repeating)
	if err != nil {
		t.Fatal(err)
	}
	first := workOneAs(t, w, job.ID, EventCompleted)
	if first.RepeatedAs == (ulid.ULID{}) {
		t.Fatal("the first run did not repeat")
	}
	if err := q.Retry(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	if again := workOneAs(t, w, job.ID, EventCompleted); again.RepeatedAs != (ulid.ULID{}) {
		t.Fatalf("the retried completed run repeated as %s besides its next run %s", again.RepeatedAs, first.RepeatedAs)
	}
	if n := b.count(live); n != 1 || b.count("id = $1 AND status = 'scheduled'", [16]byte(first.RepeatedAs)) != 1 {
		t.Fatalf("%d live jobs, want the chain's next run %s alone", n, first.RepeatedAs)
	}
	if err := q.Delete(t.Context(), first.RepeatedAs, nil); err != nil {
		t.Fatal(err)
	}

	failing.Store(true)
	failed, err := q.Enqueue(t.Context(), 2, repeating)
	if err != nil {
		t.Fatal(err)
	}
	workOneAs(t, w, failed.ID, EventFailed)
	cancelled, err := q.Enqueue(t.Context(), 3, &EnqueueOptions{RepeatCount: 3, RepeatEvery: time.Hour, Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(t.Context(), cancelled.ID); err != nil {
		t.Fatal(err)
	}
	failing.Store(false)
	for _, id := range []ulid.ULID{failed.ID, cancelled.ID} {
		if err := client.RetryJob(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if r := workOneAs(t, w, id, EventCompleted); r.RepeatedAs == (ulid.ULID{}) ||
			b.count("id = $1 AND repeat_remaining = 2", [16]byte(r.RepeatedAs)) != 1 {
			t.Fatalf("retried run %s repeated as %s, want a next run with 2 repeats left", id, r.RepeatedAs)
		}
	}
	if n := b.count(live); n != 2 {
		t.Fatalf("%d live jobs, want the next run of each of the two chains", n)
	}
}

// workOneAs works one job with w and checks that it was job id and ended as kind.
func workOneAs(t testing.TB, w *Worker[int], id ulid.ULID, kind EventKind) *WorkResult {
	t.Helper()
	r, err := w.WorkOne(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r == nil || r.JobID != id || r.Kind != kind {
		t.Fatalf("WorkOne = %+v, want job %s %s", r, id, kind)
	}
	return r
}

// DeleteWaiting removes every waiting job in one statement while a worker runs, and leaves the
// running ones alone.
func TestDeleteWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "purge")
	release := make(chan struct{})
	var started atomic.Int32
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		started.Add(1)
		<-release
		return nil
	}, &WorkerOptions{Concurrency: 2}))
	if _, err := q.EnqueueMany(t.Context(), make([]int, 1000), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueMany(t.Context(), make([]int, 500), &EnqueueOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	waitFor(t, 10*time.Second, "two jobs to start", func() bool { return started.Load() == 2 })
	n, err := q.DeleteWaiting(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if n != 1498 {
		t.Fatalf("DeleteWaiting deleted %d, want 1498", n)
	}
	if c := b.count("status = 'running'"); c != 2 {
		t.Fatalf("%d running jobs left, want 2", c)
	}
	close(release)
	waitFor(t, 10*time.Second, "the running jobs to finish", func() bool { return b.count("true") == 0 })
}

// forTest returns b for a subtest t: its helpers then fail t.
func (b *bundle) forTest(t testing.TB) *bundle {
	sub := *b
	sub.t = t
	return &sub
}

// inTx runs op in a transaction of b's pool, then commits it, or rolls it back when commit is
// false.
func (b *bundle) inTx(commit bool, op func(tx pgx.Tx) error) {
	b.t.Helper()
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := op(tx); err != nil {
		b.t.Fatal(err)
	}
	if commit {
		if err := tx.Commit(ctx); err != nil {
			b.t.Fatal(err)
		}
	}
}

// Each Tx variant changes nothing when its transaction rolls back, and makes its change when it
// commits: the typed calls on Queue and the untyped ones on Client.
func TestAdminTxCommitOrRollback(t *testing.T) {
	t.Parallel()
	parent := setup(t)
	for _, tc := range []struct {
		name    string
		prepare func(b *bundle, q *Queue[int]) ulid.ULID
		op      func(ctx context.Context, tx pgx.Tx, q *Queue[int], id ulid.ULID) error
		done    func(b *bundle, q *Queue[int], id ulid.ULID) bool
	}{
		{"Queue.CancelTx", waitingJob, func(ctx context.Context, tx pgx.Tx, q *Queue[int], id ulid.ULID) error {
			return q.CancelTx(ctx, tx, id)
		}, hasJob("status = 'cancelled' AND finished_at IS NOT NULL")},
		{"Client.CancelJobTx", waitingJob, func(ctx context.Context, tx pgx.Tx, q *Queue[int], id ulid.ULID) error {
			return q.c.CancelJobTx(ctx, tx, id)
		}, hasJob("status = 'cancelled' AND finished_at IS NOT NULL")},
		{"Queue.RetryTx", failedJob, func(ctx context.Context, tx pgx.Tx, q *Queue[int], id ulid.ULID) error {
			return q.RetryTx(ctx, tx, id)
		}, hasJob("status = 'available' AND attempt = 0")},
		{"Client.RetryJobTx", failedJob, func(ctx context.Context, tx pgx.Tx, q *Queue[int], id ulid.ULID) error {
			return q.c.RetryJobTx(ctx, tx, id)
		}, hasJob("status = 'available' AND attempt = 0")},
		{"Queue.DeleteTx", waitingJob, func(ctx context.Context, tx pgx.Tx, q *Queue[int], id ulid.ULID) error {
			return q.DeleteTx(ctx, tx, id, nil)
		}, jobDeleted},
		{"Client.DeleteJobTx", waitingJob, func(ctx context.Context, tx pgx.Tx, q *Queue[int], id ulid.ULID) error {
			return q.c.DeleteJobTx(ctx, tx, id, nil)
		}, jobDeleted},
		{"Queue.PauseTx", waitingJob, func(ctx context.Context, tx pgx.Tx, q *Queue[int], _ ulid.ULID) error {
			return q.PauseTx(ctx, tx)
		}, queuePaused(true)},
		{"Queue.ResumeTx", pausedQueue, func(ctx context.Context, tx pgx.Tx, q *Queue[int], _ ulid.ULID) error {
			return q.ResumeTx(ctx, tx)
		}, queuePaused(false)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := parent.forTest(t)
			q := newQueue[int](t, b.client, strings.NewReplacer(".", "-").Replace(tc.name))
			id := tc.prepare(b, q)
			b.inTx(false, func(tx pgx.Tx) error { return tc.op(t.Context(), tx, q, id) })
			if tc.done(b, q, id) {
				t.Fatal("the change survived the rollback of its transaction")
			}
			b.inTx(true, func(tx pgx.Tx) error { return tc.op(t.Context(), tx, q, id) })
			if !tc.done(b, q, id) {
				t.Fatal("the change is missing after its transaction committed")
			}
		})
	}
}

// The cases of TestAdminTxCommitOrRollback: a job or queue to start from, and what the change
// leaves.
func waitingJob(b *bundle, q *Queue[int]) ulid.ULID {
	job, err := q.Enqueue(context.Background(), 1, &EnqueueOptions{Delay: time.Hour})
	if err != nil {
		b.t.Fatal(err)
	}
	return job.ID
}

func failedJob(b *bundle, q *Queue[int]) ulid.ULID {
	id := waitingJob(b, q)
	b.exec("UPDATE pgqueue_jobs SET status = 'failed', attempt = 1, finished_at = now() WHERE id = $1", [16]byte(id))
	return id
}

func pausedQueue(b *bundle, q *Queue[int]) ulid.ULID {
	if err := q.Pause(context.Background()); err != nil {
		b.t.Fatal(err)
	}
	return ulid.ULID{}
}

func hasJob(where string) func(b *bundle, q *Queue[int], id ulid.ULID) bool {
	return func(b *bundle, q *Queue[int], id ulid.ULID) bool {
		return b.count("id = $1 AND "+where, [16]byte(id)) == 1
	}
}

func jobDeleted(b *bundle, q *Queue[int], id ulid.ULID) bool {
	return b.count("id = $1", [16]byte(id)) == 0
}

func queuePaused(want bool) func(b *bundle, q *Queue[int], id ulid.ULID) bool {
	return func(b *bundle, q *Queue[int], id ulid.ULID) bool {
		st, err := q.Stats(context.Background())
		if err != nil {
			b.t.Fatal(err)
		}
		return st.Paused == want
	}
}

// A nil transaction is refused before anything is done.
func TestAdminTxNilTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	c := b.client
	q := newQueue[int](t, c, "nil-tx")
	id := waitingJob(b, q)
	for name, err := range map[string]error{
		"CancelTx": q.CancelTx(ctx, nil, id), "RetryTx": q.RetryTx(ctx, nil, id), "DeleteTx": q.DeleteTx(ctx, nil, id, nil),
		"PauseTx": q.PauseTx(ctx, nil), "ResumeTx": q.ResumeTx(ctx, nil), "CancelJobTx": c.CancelJobTx(ctx, nil, id),
		"RetryJobTx": c.RetryJobTx(ctx, nil, id), "DeleteJobTx": c.DeleteJobTx(ctx, nil, id, nil),
	} {
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s with a nil transaction = %v, want ErrInvalidOption", name, err)
		}
	}
	if n := b.count("id = $1 AND status = 'scheduled'", [16]byte(id)); n != 1 {
		t.Fatal("a call with a nil transaction changed the job")
	}
}

// A running job cancelled (or deleted with Cancel) in a transaction keeps running while the
// transaction is open or after it rolls back; once it commits, its worker cancels the handler's
// context with ErrCancelled — through the typed calls and the untyped ones alike.
func TestCancelTxRunningJob(t *testing.T) {
	t.Parallel()
	parent := setup(t)
	c := parent.client
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		op   func(tx pgx.Tx, q *Queue[int], id ulid.ULID) error
	}{
		{"Queue.CancelTx", func(tx pgx.Tx, q *Queue[int], id ulid.ULID) error { return q.CancelTx(ctx, tx, id) }},
		{"Client.CancelJobTx", func(tx pgx.Tx, q *Queue[int], id ulid.ULID) error { return c.CancelJobTx(ctx, tx, id) }},
		{"Queue.DeleteTx", func(tx pgx.Tx, q *Queue[int], id ulid.ULID) error {
			return q.DeleteTx(ctx, tx, id, &DeleteOptions{Cancel: true})
		}},
		{"Client.DeleteJobTx", func(tx pgx.Tx, q *Queue[int], id ulid.ULID) error {
			return c.DeleteJobTx(ctx, tx, id, &DeleteOptions{Cancel: true})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			checkCancelTxRunning(t, parent.forTest(t), tc.name, tc.op)
		})
	}
}

// checkCancelTxRunning runs a job that waits for its context to end, then calls op on it in a
// transaction that rolls back (the job keeps running) and in one that commits (the handler runs
// on until the commit, then its context ends with ErrCancelled and EventCancelled follows).
func checkCancelTxRunning(t testing.TB, b *bundle, name string, op func(tx pgx.Tx, q *Queue[int], id ulid.ULID) error) {
	t.Helper()
	ctx := t.Context()
	worker := b.newClient()
	q := newQueue[int](t, worker, strings.NewReplacer(".", "-").Replace(name))
	started := make(chan struct{})
	cause := make(chan error, 1)
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil
	}, &WorkerOptions{OnEvent: ev.on, PollInterval: noPoll, LockDuration: time.Minute}))
	startWorker(t, w)
	// A deleted job's worker learns of the deletion only from the notification. (And
	// the listener's start, which has the worker check its leases, must not come while
	// the transactions below hold the job's row.)
	waitListening(t, worker, 1)
	job := must(q.Enqueue(ctx, 1, nil))
	receive(t, started, 10*time.Second, "the job to start")

	b.inTx(false, func(tx pgx.Tx) error { return op(tx, q, job.ID) })
	if n := b.count("id = $1 AND status = 'running' AND lock_token IS NOT NULL", [16]byte(job.ID)); n != 1 {
		t.Fatal("the job is no longer running after the rollback")
	}
	b.inTx(true, func(tx pgx.Tx) error {
		if err := op(tx, q, job.ID); err != nil {
			return err
		}
		// NOTIFY is delivered on commit: the handler runs on while tx is open.
		select {
		case err := <-cause:
			t.Fatalf("the handler was cancelled (%v) before the transaction committed", err)
		case <-time.After(300 * time.Millisecond):
		}
		return nil
	})
	if err := receive(t, cause, 10*time.Second, "the handler's context to be cancelled"); !errors.Is(err, ErrCancelled) {
		t.Fatalf("cause = %v, want ErrCancelled", err)
	}
	if e := ev.next(t, EventCancelled); e.JobID != job.ID {
		t.Fatalf("cancelled event = %+v", e)
	}
}

// RetryTx and ResumeTx wake a worker that never polls when their transaction commits, not
// before.
func TestTxVariantsWakeWorkersOnCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "wake-on-commit")
	ran := make(chan int, 10)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		ran <- job.Payload
		return nil
	}, &WorkerOptions{PollInterval: noPoll}))
	failed := must(q.Enqueue(ctx, 1, &EnqueueOptions{Delay: time.Hour}))
	b.exec("UPDATE pgqueue_jobs SET status = 'failed', attempt = 1, finished_at = now() WHERE id = $1", [16]byte(failed.ID))
	startWorker(t, w)
	waitListening(t, b.client, 1)
	notBefore := func(what string) {
		select {
		case <-ran:
			t.Fatalf("a job ran before the transaction of %s committed", what)
		case <-time.After(300 * time.Millisecond):
		}
	}

	b.inTx(true, func(tx pgx.Tx) error {
		if err := b.client.RetryJobTx(ctx, tx, failed.ID); err != nil {
			return err
		}
		notBefore("RetryJobTx")
		return nil
	})
	if got := receive(t, ran, 10*time.Second, "the retried job to run"); got != 1 {
		t.Fatalf("ran job %d, want 1", got)
	}

	if err := q.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, 2, nil); err != nil {
		t.Fatal(err)
	}
	b.inTx(true, func(tx pgx.Tx) error {
		if err := q.ResumeTx(ctx, tx); err != nil {
			return err
		}
		notBefore("ResumeTx")
		return nil
	})
	if got := receive(t, ran, 10*time.Second, "the job of the resumed queue to run"); got != 2 {
		t.Fatalf("ran job %d, want 2", got)
	}
}

// signup is the payload type of a queue that the admin code below does not know.
type signup struct {
	Email string `json:"email"`
	Plan  string `json:"plan"`
}

// Code that knows only ids — here a second client that never names the queue or its type —
// looks jobs up and cancels, retries and deletes them, with ids in ULID or uuid form.
func TestClientAdminByID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	app := newQueue[signup](t, b.client, "welcome_emails")
	first := must(app.Enqueue(ctx, signup{Email: "ada@example.com", Plan: "pro"}, nil))
	second := must(app.Enqueue(ctx, signup{Email: "bob@example.com"}, &EnqueueOptions{Delay: time.Hour}))
	admin := b.newClient()

	// The id as psql shows it, and as the API gives it, name the same job.
	checkAdminFindsByEitherForm(t, b, admin, second.ID)

	if err := admin.CancelJob(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if err := admin.CancelJob(ctx, first.ID); err != nil {
		t.Fatalf("cancelling a cancelled job again = %v", err)
	}
	if e := must(admin.Job(ctx, first.ID)); e.Status != StatusCancelled || e.Place != -1 || e.FinishedAt.IsZero() {
		t.Fatalf("after CancelJob, Job = %+v", e)
	}
	if err := admin.RetryJob(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	if n := b.count("id = $1 AND status = 'available' AND finished_at IS NULL", [16]byte(first.ID)); n != 1 {
		t.Fatal("RetryJob did not make the cancelled job available")
	}
	if err := admin.DeleteJob(ctx, second.ID, nil); err != nil {
		t.Fatal(err)
	}
	if n := b.count("id = $1", [16]byte(second.ID)); n != 0 {
		t.Fatal("DeleteJob left the job")
	}

	// The sentinels are those of the typed calls.
	checkAdminSentinels(t, b, admin, first.ID)
}

// checkAdminFindsByEitherForm checks that the text psql shows for job want's uuid is what
// FormatUUID gives, and that admin's Job finds the job (the second of
// TestClientAdminByID, with its payload, queue, status and place) from that text and from the
// ULID text alike.
func checkAdminFindsByEitherForm(t testing.TB, b *bundle, admin *Client, want ulid.ULID) {
	t.Helper()
	ctx := t.Context()
	var shown string
	if err := b.pool.QueryRow(ctx, "SELECT id::text FROM pgqueue_jobs WHERE id = $1", [16]byte(want)).Scan(&shown); err != nil {
		t.Fatal(err)
	}
	if shown != FormatUUID(want) {
		t.Fatalf("psql shows %s, FormatUUID gives %s", shown, FormatUUID(want))
	}
	for _, s := range []string{shown, want.String()} {
		id, err := ParseID(s)
		if err != nil {
			t.Fatal(err)
		}
		e, err := admin.Job(ctx, id)
		if err != nil {
			t.Fatalf("Job(%s): %v", s, err)
		}
		var got signup
		if err := json.Unmarshal(e.Payload, &got); err != nil || got != (signup{Email: "bob@example.com"}) {
			t.Fatalf("Job(%s) payload %s (%v)", s, e.Payload, err)
		}
		if e.ID != want || e.Queue != "welcome_emails" || e.Status != StatusScheduled || e.Place != 2 ||
			e.PayloadError != nil || string(e.RawPayload) != string(e.Payload) {
			t.Fatalf("Job(%s) = %+v", s, e)
		}
	}
}

// checkAdminSentinels checks that the untyped calls fail with the sentinels of the typed ones:
// ErrJobRunning for RetryJob and DeleteJob of job id while it runs, ErrJobFinished for CancelJob
// once it has failed, ErrNotFound for every call on an unknown id. It deletes job id.
func checkAdminSentinels(t testing.TB, b *bundle, admin *Client, id ulid.ULID) {
	t.Helper()
	ctx := t.Context()
	b.exec("UPDATE pgqueue_jobs SET status = 'running', lock_token = gen_random_uuid(), lock_until = now() + interval '1 hour' WHERE id = $1", [16]byte(id))
	if err := admin.RetryJob(ctx, id); !errors.Is(err, ErrJobRunning) {
		t.Errorf("RetryJob of a running job = %v, want ErrJobRunning", err)
	}
	if err := admin.DeleteJob(ctx, id, nil); !errors.Is(err, ErrJobRunning) {
		t.Errorf("DeleteJob of a running job = %v, want ErrJobRunning", err)
	}
	b.exec("UPDATE pgqueue_jobs SET status = 'failed', lock_token = NULL, lock_until = NULL, finished_at = now() WHERE id = $1", [16]byte(id))
	if err := admin.CancelJob(ctx, id); !errors.Is(err, ErrJobFinished) {
		t.Errorf("CancelJob of a failed job = %v, want ErrJobFinished", err)
	}
	if err := admin.DeleteJob(ctx, id, nil); err != nil {
		t.Fatal(err)
	}
	unknown := ulid.Make()
	for name, err := range map[string]error{
		"Job": errOf(admin.Job(ctx, unknown)), "CancelJob": admin.CancelJob(ctx, unknown),
		"RetryJob": admin.RetryJob(ctx, unknown), "DeleteJob": admin.DeleteJob(ctx, unknown, nil),
	} {
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("%s of an unknown id = %v, want ErrNotFound", name, err)
		}
	}
}

// checkAdminError checks that err, the error of the call name, wraps is and names the package
// once.
func checkAdminError(t testing.TB, name string, err, is error) {
	t.Helper()
	if !errors.Is(err, is) {
		t.Errorf("%s = %v, want %v", name, err, is)
		return
	}
	if n := strings.Count(err.Error(), "pgqueue:"); n != 1 {
		t.Errorf("%s: %q names the package %d times, want once", name, err, n)
	}
}

// errOf returns the error of a call that returns a value and an error.
func errOf[V any](_ V, err error) error { return err }

// The errors of the admin calls name the package once, wrap their sentinel, and say which job.
func TestAdminErrorMessages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "welcome_emails")
	c := b.client
	unknown := ulid.Make()

	// A failed job with a unique key, and a live job holding that key now.
	failed := must(q.Enqueue(ctx, 1, &EnqueueOptions{UniqueKey: "k"}))
	b.exec("UPDATE pgqueue_jobs SET status = 'failed', finished_at = now() WHERE id = $1", [16]byte(failed.ID))
	running := must(q.Enqueue(ctx, 2, &EnqueueOptions{UniqueKey: "k"}))
	b.exec("UPDATE pgqueue_jobs SET status = 'running', lock_token = gen_random_uuid(), lock_until = now() + interval '1 hour' WHERE id = $1", [16]byte(running.ID))
	done, cancel := context.WithCancel(ctx)
	cancel()

	for _, tc := range []struct {
		name string
		err  error
		is   error
	}{
		{"Queue.Cancel unknown", q.Cancel(ctx, unknown), ErrNotFound},
		{"Queue.Retry unknown", q.Retry(ctx, unknown), ErrNotFound},
		{"Queue.Delete unknown", q.Delete(ctx, unknown, nil), ErrNotFound},
		{"Queue.Job unknown", errOf(q.Job(ctx, unknown)), ErrNotFound},
		{"Client.CancelJob unknown", c.CancelJob(ctx, unknown), ErrNotFound},
		{"Client.RetryJob unknown", c.RetryJob(ctx, unknown), ErrNotFound},
		{"Client.DeleteJob unknown", c.DeleteJob(ctx, unknown, nil), ErrNotFound},
		{"Client.Job unknown", errOf(c.Job(ctx, unknown)), ErrNotFound},
		{"Queue.Cancel failed", q.Cancel(ctx, failed.ID), ErrJobFinished},
		{"Client.CancelJob failed", c.CancelJob(ctx, failed.ID), ErrJobFinished},
		{"Queue.Retry duplicate", q.Retry(ctx, failed.ID), ErrDuplicate},
		{"Client.RetryJob duplicate", c.RetryJob(ctx, failed.ID), ErrDuplicate},
		{"Queue.Retry running", q.Retry(ctx, running.ID), ErrJobRunning},
		{"Client.DeleteJob running", c.DeleteJob(ctx, running.ID, nil), ErrJobRunning},
		{"Queue.Cancel cancelled context", q.Cancel(done, unknown), context.Canceled},
		{"Queue.Pause cancelled context", q.Pause(done), context.Canceled},
		{"Queue.Resume cancelled context", q.Resume(done), context.Canceled},
		{"Queue.DeleteWaiting cancelled context", errOf(q.DeleteWaiting(done)), context.Canceled},
		{"Queue.Stats cancelled context", errOf(q.Stats(done)), context.Canceled},
		{"Client.Stats cancelled context", errOf(c.Stats(done)), context.Canceled},
		{"Queue.Jobs cancelled context", errOf(q.Jobs(done, nil)), context.Canceled},
		{"Client.Jobs cancelled context", errOf(c.Jobs(done, nil)), context.Canceled},
		{"Client.Jobs bad queue", errOf(c.Jobs(ctx, &ListOptions{Queues: []string{"no spaces"}})), ErrInvalidOption},
		{"ParseID", errOf(ParseID("01M…")), ErrInvalidOption},
	} {
		checkAdminError(t, tc.name, tc.err, tc.is)
	}
	want := "pgqueue: cancel job " + unknown.String() + " in welcome_emails: job not found"
	if err := q.Cancel(ctx, unknown); err.Error() != want {
		t.Errorf("Cancel says %q, want %q", err, want)
	}
	want = "pgqueue: cancel job " + failed.ID.String() + " in welcome_emails: job already finished"
	if err := c.CancelJob(ctx, failed.ID); err.Error() != want {
		t.Errorf("CancelJob says %q, want %q", err, want)
	}
}
