package pgqueue

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

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
