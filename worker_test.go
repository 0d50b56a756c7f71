package pgqueue

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// A worker that is never woken by the poll: anything it runs came through NOTIFY, a timer or a
// reconnect.
const noPoll = time.Hour

func TestWorkerRunsJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[email](t, b.client, "run")
	got := make(chan *Job[email], 10)
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[email]) error {
		got <- job
		return nil
	}, &WorkerOptions{OnEvent: ev.on}))

	enq, err := q.Enqueue(t.Context(), email{To: "ada@example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	job := receive(t, got, 10*time.Second, "the job to run")
	if job.ID != enq.ID || job.Payload.To != "ada@example.com" || job.Attempt != 1 || job.Status != StatusRunning {
		t.Fatalf("handler got %+v", job)
	}
	completed := ev.next(t, EventCompleted)
	if completed.JobID != enq.ID || completed.Queue != "run" || completed.Attempt != 1 {
		t.Fatalf("completed event = %+v", completed)
	}
	ev.next(t, EventDrained)
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs left; a succeeded job is deleted", n)
	}
}

func TestWorkerOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[string](t, b.client, "order")

	// A delayed job at the front of the line must not block those behind it.
	if _, err := q.Enqueue(ctx, "delayed-high", &EnqueueOptions{Priority: 100, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	want := []string{"p9-first", "p9-second", "p5", "p0-first", "p0-second", "p-3"}
	for _, e := range []struct {
		name     string
		priority int
	}{{"p0-first", 0}, {"p5", 5}, {"p9-first", 9}, {"p0-second", 0}, {"p-3", -3}, {"p9-second", 9}} {
		if _, err := q.Enqueue(ctx, e.name, &EnqueueOptions{Priority: e.priority}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var ran []string
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[string]) error {
		mu.Lock()
		ran = append(ran, job.Payload)
		mu.Unlock()
		return nil
	}, &WorkerOptions{Concurrency: 1, OnEvent: ev.on}))
	startWorker(t, w)
	ev.next(t, EventDrained)
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(ran, " ") != strings.Join(want, " ") {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	if n := b.count("status = 'scheduled'"); n != 1 {
		t.Fatalf("the delayed job ran early or vanished (%d scheduled)", n)
	}
}

// Two clients, as two processes would be, compete for 1,000 jobs: each job runs exactly once
// and none is left.
func TestWorkersCompete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 1000
	payloads := make([]int, n)
	for i := range payloads {
		payloads[i] = i
	}
	var runs [n]atomic.Int32
	var done atomic.Int32
	handler := func(ctx context.Context, job *Job[int]) error {
		runs[job.Payload].Add(1)
		done.Add(1)
		return nil
	}
	var perClient [2]atomic.Int32
	for i, c := range []*Client{b.client, b.newClient()} {
		q := newQueue[int](t, c, "compete")
		w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
			perClient[i].Add(1)
			return handler(ctx, job)
		}, &WorkerOptions{Concurrency: 8}))
		startWorker(t, w)
	}
	q := newQueue[int](t, b.client, "compete")
	if _, err := q.EnqueueMany(t.Context(), payloads[:n/2], nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads[n/2:] {
		if _, err := q.Enqueue(t.Context(), p, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 60*time.Second, "all jobs to run", func() bool { return done.Load() >= n })
	waitFor(t, 10*time.Second, "the table to empty", func() bool { return b.count("true") == 0 })
	for i := range runs {
		if r := runs[i].Load(); r != 1 {
			t.Errorf("job %d ran %d times", i, r)
		}
	}
	t.Logf("client 1 ran %d jobs, client 2 ran %d", perClient[0].Load(), perClient[1].Load())
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
	if errs[1].Error != "panic: boom" || !strings.Contains(errs[1].Stack, "worker_test.go") {
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

func TestWorkerUndecodablePayload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[email](t, b.client, "decode")
	job, err := NewQueue[int](b.client, "decode")
	if err != nil {
		t.Fatal(err)
	}
	// Written by an older version whose payload was an int.
	old, err := job.Enqueue(t.Context(), 42, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[email]) error {
		t.Error("the handler ran on a payload that does not decode")
		return nil
	}, &WorkerOptions{OnEvent: ev.on}))
	startWorker(t, w)
	failed := ev.next(t, EventFailed)
	if failed.JobID != old.ID || !strings.Contains(failed.Err.Error(), "does not decode") {
		t.Fatalf("failed event = %+v", failed)
	}
	if n := b.count("status = 'failed' AND attempt = 1 AND errors->0->>'error' LIKE '%does not decode%'"); n != 1 {
		t.Fatal("the job did not end failed at once with the decode error recorded")
	}
}

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

// A worker whose heartbeat finds the lock gone (the row re-claimed under a new token, or
// deleted) cancels the handler's context with ErrLockLost and leaves the row alone.
func TestWorkerHeartbeatDetectsLostLock(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, takeAway string
		rowsLeft       int // rows with the job's id once the worker gave up
	}{
		{"reclaimed", "UPDATE pgqueue_jobs SET lock_token = gen_random_uuid() WHERE id = $1", 1},
		{"deleted", "DELETE FROM pgqueue_jobs WHERE id = $1", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			q := newQueue[int](t, b.client, "heartbeat")
			job, err := q.Enqueue(t.Context(), 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{}, 1)
			cause := make(chan error, 1)
			ev := newEvents()
			w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
				started <- struct{}{}
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return ctx.Err()
			}, &WorkerOptions{LockDuration: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
				OnEvent: ev.on, PollInterval: noPoll}))
			startWorker(t, w)
			receive(t, started, 10*time.Second, "the job to start")

			// Heartbeats keep the lease alive past LockDuration. (A lease long against the
			// interval, so that a loaded machine cannot make the worker give it up first.)
			waitFor(t, 10*time.Second, "a heartbeat to extend the lease", func() bool {
				return b.count("id = $1 AND lock_until > attempted_at + interval '2200 milliseconds'", [16]byte(job.ID)) == 1
			})

			b.exec(c.takeAway, [16]byte(job.ID))
			if got := receive(t, cause, 10*time.Second, "the handler's context to be cancelled"); !errors.Is(got, ErrLockLost) {
				t.Fatalf("context cause = %v, want ErrLockLost", got)
			}
			if lost := ev.next(t, EventLockLost); lost.JobID != job.ID {
				t.Fatalf("lock lost event = %+v", lost)
			}
			// Whatever took the job away decides it: the worker neither completed nor re-inserted it.
			if n := b.count("id = $1 AND status = 'running'", [16]byte(job.ID)); n != c.rowsLeft {
				t.Fatal("the worker changed a row whose lock it lost")
			}
		})
	}
}

// A worker process killed with SIGKILL leaves its job running; once the lease has run out a
// live worker takes it back and runs it, with no leader involved.
func TestRescueAfterWorkerKilled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "rescue")
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd, out := startHelper(t, b, "rescue")
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "started "+job.ID.String()+"\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if n := b.count("id = $1 AND status = 'running' AND locked_by = 'helper'", [16]byte(job.ID)); n != 1 {
		t.Fatal("the killed worker's job is not left running")
	}

	ran := make(chan *Job[int], 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		ran <- job
		return nil
	}, &WorkerOptions{PollInterval: 50 * time.Millisecond}))
	startWorker(t, w)
	got := receive(t, ran, 30*time.Second, "the job to be rescued and run")
	if got.ID != job.ID || got.Attempt != 2 || len(got.Errors) != 1 || !strings.Contains(got.Errors[0].Error, "lock expired") {
		t.Fatalf("rescued job = %+v", got)
	}
	waitFor(t, 10*time.Second, "the job to complete", func() bool { return b.count("true") == 0 })
}

func TestWorkerGracefulShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[string](t, b.client, "shutdown")
	quick, err := q.Enqueue(ctx, "quick", nil)
	if err != nil {
		t.Fatal(err)
	}
	slow, err := q.Enqueue(ctx, "slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 2)
	releaseQuick := make(chan struct{})
	cause := make(chan error, 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[string]) error {
		started <- job.Payload
		if job.Payload == "quick" {
			<-releaseQuick
			return nil
		}
		<-ctx.Done() // slow: runs until cancelled
		cause <- context.Cause(ctx)
		return ctx.Err()
	}, &WorkerOptions{Concurrency: 2, ShutdownTimeout: 500 * time.Millisecond}))
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	receive(t, started, 10*time.Second, "a job to start")
	receive(t, started, 10*time.Second, "both jobs to start")

	cancel()
	// The quick job finishes within the grace period and completes normally.
	close(releaseQuick)
	if err := receive(t, done, 30*time.Second, "Run to return"); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if c := <-cause; !errors.Is(c, ErrShutdown) {
		t.Fatalf("slow job's context cause = %v, want ErrShutdown", c)
	}
	if n := b.count("id = $1", [16]byte(quick.ID)); n != 0 {
		t.Fatal("the job that finished during shutdown was not completed")
	}
	// The slow job is handed back, available and with its attempt not charged.
	if n := b.count("id = $1 AND status = 'available' AND attempt = 0 AND lock_token IS NULL", [16]byte(slow.ID)); n != 1 {
		t.Fatal("the interrupted job was not handed back uncharged")
	}
}

func TestWorkerShutdownWithStuckHandler(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "stuck")
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	returned := make(chan struct{})
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		defer close(returned)
		started <- struct{}{}
		<-release // ignores its context
		return nil
	}, &WorkerOptions{ShutdownTimeout: 50 * time.Millisecond}))
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(runCtx) }()
	receive(t, started, 10*time.Second, "the job to start")
	cancel()
	if err := receive(t, done, 30*time.Second, "Run to return"); !errors.Is(err, ErrHandlersStuck) {
		t.Fatalf("Run = %v, want ErrHandlersStuck", err)
	}
	if n := b.count("id = $1 AND status = 'available' AND attempt = 0", [16]byte(job.ID)); n != 1 {
		t.Fatal("the stuck job was not handed back")
	}
	// When the handler finally returns, its outcome is ignored.
	close(release)
	<-returned
	if n := b.count("id = $1 AND status = 'available'", [16]byte(job.ID)); n != 1 {
		t.Fatal("the abandoned handler's late success changed the job")
	}
}

func TestWorkerInvalidOptions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "opts")
	h := func(context.Context, *Job[int]) error { return nil }
	for _, o := range []WorkerOptions{
		{Concurrency: -1},
		{LockDuration: -time.Second},
		{LockDuration: time.Second, HeartbeatInterval: time.Second},
		{PollInterval: -1},
		{ShutdownTimeout: -1},
		{RetryBackoff: Backoff{Initial: time.Hour, Max: time.Minute}},
		{RetryBackoff: Backoff{Jitter: 2}},
		{JobTimeout: -time.Second},
	} {
		w, err := q.NewWorker(h, &o)
		if !errors.Is(err, ErrInvalidOption) || w != nil {
			t.Errorf("NewWorker with %+v = %v, want ErrInvalidOption", o, err)
		} else if !strings.Contains(err.Error(), "queue "+q.Name()) {
			t.Errorf("NewWorker's error %q does not name the queue", err)
		}
	}
	if _, err := q.NewWorker(nil, nil); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("NewWorker without handler = %v", err)
	}

	w := must(q.NewWorker(h, nil))
	stop := startWorker(t, w)
	defer stop()
	waitFor(t, 10*time.Second, "the worker to run", func() bool { return w.spec.running.Load() })
	if err := w.Run(t.Context()); !errors.Is(err, ErrWorkerRunning) {
		t.Errorf("second Run = %v, want ErrWorkerRunning", err)
	}
}

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	b := Backoff{Initial: time.Second, Max: time.Minute, Jitter: -1}.withDefaults()
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 7: time.Minute, 1000: time.Minute} {
		if got := b.Delay(attempt); got != want {
			t.Errorf("Delay(%d) = %s, want %s", attempt, got, want)
		}
	}
	j := Backoff{Initial: time.Second, Max: time.Minute, Jitter: 0.5}
	for range 100 {
		if d := j.Delay(3); d < 2*time.Second || d > 6*time.Second {
			t.Fatalf("Delay(3) with jitter 0.5 = %s, want within 2s..6s", d)
		}
	}
}

// JobTimeout: a handler that respects its context fails the attempt with ErrJobTimeout; one
// that ignores it is given up after ShutdownTimeout, its slot freed for the next job, and its
// late result ignored.
func TestJobTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[string](t, b.client, "timeout")
	ev := newEvents()
	release := make(chan struct{})
	returned := make(chan struct{})
	w := must(q.NewWorker(func(ctx context.Context, job *Job[string]) error {
		switch job.Payload {
		case "polite":
			<-ctx.Done()
			return ctx.Err()
		case "stuck":
			defer close(returned)
			<-release // ignores its context
			return nil
		}
		return nil
	}, &WorkerOptions{Concurrency: 1, JobTimeout: 100 * time.Millisecond, ShutdownTimeout: 200 * time.Millisecond,
		LockDuration: 2 * time.Second, OnEvent: ev.on}))
	polite, err := q.Enqueue(t.Context(), "polite", &EnqueueOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	f := ev.next(t, EventFailed)
	if f.JobID != polite.ID || !errors.Is(f.Err, ErrJobTimeout) {
		t.Fatalf("failed event = %+v, want ErrJobTimeout", f)
	}

	stuck, err := q.Enqueue(t.Context(), "stuck", &EnqueueOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	f = ev.next(t, EventFailed)
	if f.JobID != stuck.ID || !errors.Is(f.Err, ErrJobTimeout) {
		t.Fatalf("failed event = %+v, want the stuck job given up", f)
	}
	// Its slot is free again: with Concurrency 1 the next job runs while the stuck one still hangs.
	next, err := q.Enqueue(t.Context(), "next", nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := ev.next(t, EventCompleted); c.JobID != next.ID {
		t.Fatalf("completed %s, want %s", c.JobID, next.ID)
	}
	if n := b.count("id = $1 AND status = 'failed' AND errors->0->>'error' LIKE '%given up%'", [16]byte(stuck.ID)); n != 1 {
		t.Fatal("the stuck job was not recorded as given up")
	}
	close(release)
	<-returned
	if n := b.count("id = $1 AND status = 'failed'", [16]byte(stuck.ID)); n != 1 {
		t.Fatal("the abandoned handler's late success changed the job")
	}
}
