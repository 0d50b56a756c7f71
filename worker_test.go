package pgqueue

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
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

// A handler that completed its job with CompleteTx and then ignores its context is given up
// after its JobTimeout and ShutdownTimeout as any other: its slot frees for the next job, and its
// job, committed, is reported completed. It was never given up, and kept its slot for good.
func TestJobTimeoutAfterCompleteTx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[string](t, b.client, "timeout-tx")
	ev := newEvents()
	release := make(chan struct{})
	returned := make(chan struct{})
	// The JobTimeout leaves CompleteTx time to commit first on a loaded machine: at 100 ms it once
	// ran out during CompleteTx in CI, and the job was retried instead.
	w := must(q.NewWorker(func(ctx context.Context, job *Job[string]) error {
		if job.Payload != "stuck" {
			return nil
		}
		defer close(returned)
		if err := completeCommitted(ctx, b.pool, job); err != nil {
			return err
		}
		<-release // ignores its context
		return nil
	}, &WorkerOptions{Concurrency: 1, JobTimeout: time.Second, ShutdownTimeout: 200 * time.Millisecond,
		LockDuration: 2 * time.Second, OnEvent: ev.on, PollInterval: noPoll}))
	stuck := must(q.Enqueue(t.Context(), "stuck", nil))
	next := must(q.Enqueue(t.Context(), "next", nil))
	startWorker(t, w)
	t.Cleanup(func() { // before the worker stops
		close(release)
		<-returned
	})
	ev.outcomes(t, map[ulid.ULID]EventKind{stuck.ID: EventCompleted, next.ID: EventCompleted})
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs left, want none", n)
	}
}

// The library's log lines about single jobs are at JobLogLevel, Debug by default, so a handler
// that logs its own failures is not doubled at Info; each names the queue, the job and the
// attempt. A lost lock, a problem of the worker itself, stays at Warn whatever JobLogLevel says.
func TestJobLogLevel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var out syncBuffer
	logger := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelInfo}))
	quiet, loud := newQueue[int](t, b.client, "quietlogs"), newQueue[int](t, b.client, "loudlogs")
	handler := func(ctx context.Context, job *Job[int]) error {
		switch job.Payload {
		case 0:
			return nil
		case 1:
			return errors.New("broken")
		}
		<-ctx.Done() // until the lock is lost
		return nil
	}
	quietEv, loudEv := newEvents(), newEvents()
	quietW := must(quiet.NewWorker(handler, &WorkerOptions{Logger: logger, OnEvent: quietEv.on,
		PollInterval: noPoll, LockDuration: 2 * time.Second, HeartbeatInterval: 50 * time.Millisecond}))
	loudW := must(loud.NewWorker(handler, &WorkerOptions{Logger: logger, OnEvent: loudEv.on,
		PollInterval: noPoll, JobLogLevel: slog.LevelWarn}))
	runWorkers(t, b.client, quietW, loudW)

	ids := map[string]ulid.ULID{}
	for _, c := range []struct {
		q       *Queue[int]
		payload int
		name    string
	}{{quiet, 0, "quiet ok"}, {quiet, 1, "quiet failed"}, {loud, 0, "loud ok"}, {loud, 1, "loud failed"}} {
		job, err := c.q.Enqueue(t.Context(), c.payload, &EnqueueOptions{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		ids[c.name] = job.ID
	}
	quietEv.outcomes(t, map[ulid.ULID]EventKind{ids["quiet ok"]: EventCompleted, ids["quiet failed"]: EventFailed})
	loudEv.outcomes(t, map[ulid.ULID]EventKind{ids["loud ok"]: EventCompleted, ids["loud failed"]: EventFailed})
	b.client.logs.flush(10 * time.Second)
	logs := out.String()
	if strings.Contains(logs, "quietlogs") {
		t.Errorf("per-job lines of a worker with the default JobLogLevel at Info:\n%s", logs)
	}
	for _, want := range []string{
		`level=WARN msg="pgqueue: job started" queue=loudlogs job_id=` + ids["loud ok"].String() + ` attempt=1 max_attempts=1`,
		`level=WARN msg="pgqueue: job completed" queue=loudlogs job_id=` + ids["loud ok"].String() + ` attempt=1 max_attempts=1 elapsed=`,
		`level=WARN msg="pgqueue: job failed" queue=loudlogs job_id=` + ids["loud failed"].String() + ` attempt=1 max_attempts=1 elapsed=`,
		` error=broken`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("no line with %q in:\n%s", want, logs)
		}
	}

	checkLockLostAtWarn(t, b, quiet, quietEv, &out)
}

// checkLockLostAtWarn runs a job of quiet until it starts, takes its lock away, and checks that
// its worker reports EventLockLost and logs the loss to out at Warn.
func checkLockLostAtWarn(t testing.TB, b *bundle, quiet *Queue[int], quietEv *events, out *syncBuffer) {
	t.Helper()
	held, err := quiet.Enqueue(t.Context(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e := quietEv.nextOf(t, held.ID); e.Kind != EventStarted {
		t.Fatalf("event %s, want started", e.Kind)
	}
	b.exec("UPDATE pgqueue_jobs SET lock_token = gen_random_uuid() WHERE id = $1", [16]byte(held.ID))
	if e := quietEv.nextOf(t, held.ID); e.Kind != EventLockLost {
		t.Fatalf("event %s, want lock_lost", e.Kind)
	}
	want := `level=WARN msg="pgqueue: lost the lock of a running job; its outcome will be ignored" queue=quietlogs job_id=` +
		held.ID.String() + ` attempt=1`
	b.client.logs.flush(10 * time.Second)
	if logs := out.String(); !strings.Contains(logs, want) {
		t.Errorf("no line with %q in:\n%s", want, logs)
	}
}
