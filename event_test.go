package pgqueue

import (
	"context"
	"testing"
	"time"
)

// An OnEvent that blocks stalls nothing but its own worker's later events: here it blocks on
// the cancellation of a running job (which the runtime learns of from the listener), and another
// queue of the same Run still wakes up at once for a new job, and the blocked queue's own jobs
// keep running.
func TestBlockingOnEventStallsNothingElse(t *testing.T) {
	t.Parallel()
	b := setup(t)
	slow, fast := newQueue[int](t, b.client, "slow"), newQueue[int](t, b.client, "fast")
	release := make(chan struct{})
	blocked := make(chan struct{})
	started := make(chan int, 10)
	slowWorker := must(slow.NewWorker(func(ctx context.Context, job *Job[int]) error {
		started <- job.Payload
		if job.Payload == 1 {
			<-ctx.Done() // runs until cancelled
		}
		return nil
	}, &WorkerOptions{PollInterval: noPoll, OnEvent: func(ev Event) {
		if ev.Kind == EventCancelled {
			close(blocked)
			<-release
		}
	}}))
	ran := make(chan int, 10)
	fastWorker := must(fast.NewWorker(func(ctx context.Context, job *Job[int]) error {
		ran <- job.Payload
		return nil
	}, &WorkerOptions{PollInterval: noPoll}))
	runWorkers(t, b.client, slowWorker, fastWorker)
	t.Cleanup(func() { close(release) }) // before Run stops: cleanups run last first

	job, err := slow.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	receive(t, started, 30*time.Second, "the slow queue's job to start")
	if err := slow.Cancel(t.Context(), job.ID); err != nil {
		t.Fatal(err)
	}
	receive(t, blocked, 30*time.Second, "OnEvent to block on the cancellation")

	if _, err := fast.Enqueue(t.Context(), 2, nil); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, ran, 10*time.Second, "the other queue's job, woken by NOTIFY"); got != 2 {
		t.Fatalf("ran %d", got)
	}
	if _, err := slow.Enqueue(t.Context(), 3, nil); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, started, 10*time.Second, "the blocked queue's next job"); got != 3 {
		t.Fatalf("started %d", got)
	}
}

// Run returns although an OnEvent waits for it to return: Run gives OnEvent ShutdownTimeout to
// take the last events, then leaves it running.
func TestOnEventWaitingForRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "waits")
	returned := make(chan struct{})
	inside, left := make(chan struct{}), make(chan struct{})
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{
		PollInterval: noPoll, ShutdownTimeout: 100 * time.Millisecond,
		OnEvent: func(ev Event) {
			if ev.Kind == EventCompleted {
				close(inside)
				<-returned
				close(left)
			}
		},
	}))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	if _, err := q.Enqueue(t.Context(), 1, nil); err != nil {
		t.Fatal(err)
	}
	receive(t, inside, 30*time.Second, "OnEvent to wait for Run")
	cancel()
	if err := receive(t, done, 30*time.Second, "Run to return"); err != nil {
		t.Fatalf("Run = %v", err)
	}
	close(returned)
	receive(t, left, 10*time.Second, "OnEvent to return") // leaves no goroutine behind
}
