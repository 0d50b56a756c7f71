package pgqueue

import (
	"context"
	"errors"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

func TestWorkOneEmptyOrPausedQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "work-empty")
	w := must(q.NewWorker(func(context.Context, *Job[int]) error {
		t.Error("the handler ran")
		return nil
	}, nil))
	if r, err := w.WorkOne(t.Context()); r != nil || err != nil {
		t.Fatalf("WorkOne of an empty queue = %+v, %v; want nil, nil", r, err)
	}
	must(q.Enqueue(t.Context(), 1, nil))
	if err := q.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r, err := w.WorkOne(t.Context()); r != nil || err != nil {
		t.Fatalf("WorkOne of a paused queue = %+v, %v; want nil, nil", r, err)
	}
}

// TestWorkOneOutcomes checks what WorkOne reports and saves for each way a handler can end.
func TestWorkOneOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name        string
		maxAttempts int
		handler     func() error
		kind        EventKind
		status      Status
		errIs       func(error) bool
	}{
		{"success", 3, func() error { return nil }, EventCompleted, StatusCompleted, isNil},
		{"error", 3, func() error { return errors.New("boom") }, EventRetrying, StatusScheduled, hasText("boom")},
		{"last attempt", 1, func() error { return errors.New("boom") }, EventFailed, StatusFailed, hasText("boom")},
		{"permanent", 3, func() error { return Permanent(errors.New("no")) }, EventFailed, StatusFailed, hasText("no")},
		{"panic", 1, func() error { panic("bug") }, EventFailed, StatusFailed, func(err error) bool {
			var p *PanicError
			return errors.As(err, &p)
		}},
		{"snooze now", 3, func() error { return Snooze(0) }, EventSnoozed, StatusAvailable, isSnooze},
		{"snooze later", 3, func() error { return Snooze(time.Hour) }, EventSnoozed, StatusScheduled, isSnooze},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newQueue[int](t, b.client, "work-"+randomName(""))
			evs := newEvents()
			w := must(q.NewWorker(func(context.Context, *Job[int]) error { return tc.handler() },
				&WorkerOptions{OnEvent: evs.on}))
			job := must(q.Enqueue(t.Context(), 7, &EnqueueOptions{MaxAttempts: tc.maxAttempts}))
			r, err := w.WorkOne(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if r.JobID != job.ID || r.Attempt != 1 || r.Kind != tc.kind || r.Status != tc.status || !tc.errIs(r.Err) {
				t.Fatalf("WorkOne = %+v; want job %s, attempt 1, %s, %s", r, job.ID, tc.kind, tc.status)
			}
			// EventStarted first, then the outcome's (next skips other kinds: in the other order
			// the outcome's event would be skipped while looking for EventStarted).
			if ev := evs.next(t, EventStarted); ev.JobID != job.ID || ev.Attempt != 1 {
				t.Fatalf("event %+v is not the start of job %s", ev, job.ID)
			}
			if ev := evs.next(t, tc.kind); ev.JobID != job.ID {
				t.Fatalf("event %+v is not of job %s", ev, job.ID)
			}
			if tc.status == StatusCompleted {
				if n := b.count("id = $1", job.ID); n != 0 {
					t.Fatalf("the completed job is still in the table")
				}
				return
			}
			e := must(q.Job(t.Context(), job.ID))
			if e.Status != tc.status {
				t.Fatalf("the table says %s, WorkOne %s", e.Status, tc.status)
			}
			if tc.status == StatusScheduled && !e.RunAt.Equal(r.RunAt) {
				t.Fatalf("RunAt %s, the table says %s", r.RunAt, e.RunAt)
			}
		})
	}
}

func isNil(err error) bool { return err == nil }

func isSnooze(err error) bool {
	var s *SnoozeError
	return errors.As(err, &s)
}

func hasText(s string) func(error) bool {
	return func(err error) bool { return err != nil && strings.Contains(err.Error(), s) }
}

// goroutineID returns the number of the calling goroutine, from the first line of its stack.
func goroutineID() string {
	var buf [64]byte
	n := goruntime.Stack(buf[:], false)
	return strings.Fields(string(buf[:n]))[1]
}

// TestWorkOneHoldsTheJob checks that the handler runs in WorkOne's caller's goroutine and that its
// Job is claimed for real: the row is running under a lock token while the handler runs, Update
// saves the payload under it, and CompleteTx completes the job in the handler's transaction.
func TestWorkOneHoldsTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "work-held")
	job := must(q.Enqueue(t.Context(), 1, nil))
	caller := goroutineID()
	w := must(q.NewWorker(func(ctx context.Context, j *Job[int]) error {
		if id := goroutineID(); id != caller {
			t.Errorf("the handler runs in goroutine %s, WorkOne's caller in %s", id, caller)
		}
		if n := b.count("id = $1 AND status = 'running' AND lock_token IS NOT NULL AND locked_by = $2", j.ID, b.client.cfg.ID); n != 1 {
			t.Errorf("the job is not running under a lock while its handler runs")
		}
		if err := j.Update(ctx, 2); err != nil {
			return err
		}
		if n := b.count("id = $1 AND payload = '2'", j.ID); n != 1 {
			t.Errorf("Update did not save the payload")
		}
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := j.CompleteTx(ctx, tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}, nil))
	r, err := w.WorkOne(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r.JobID != job.ID || r.Kind != EventCompleted || r.Status != StatusCompleted || r.Err != nil {
		t.Fatalf("WorkOne = %+v, want job %s completed", r, job.ID)
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs left, want none", n)
	}
}

// TestWorkOneFencing checks that the outcome of an attempt whose lock was taken from it changes
// nothing: the row now belongs to another attempt.
func TestWorkOneFencing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "work-fenced")
	job := must(q.Enqueue(t.Context(), 1, nil))
	w := must(q.NewWorker(func(ctx context.Context, j *Job[int]) error {
		// Another attempt takes the job: a new lock token, as a rescue and a claim elsewhere would give.
		b.exec("UPDATE pgqueue_jobs SET lock_token = gen_random_uuid() WHERE id = $1", j.ID)
		return nil
	}, nil))
	r, err := w.WorkOne(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != EventLockLost || r.Status != "" {
		t.Fatalf("WorkOne = %+v, want lock_lost", r)
	}
	if n := b.count("id = $1 AND status = 'running'", job.ID); n != 1 {
		t.Fatalf("the fenced outcome changed the row")
	}
}

func TestWorkOneCancelled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "work-cancel")
	job := must(q.Enqueue(t.Context(), 1, nil))
	causes := make(chan error, 1)
	w := must(q.NewWorker(func(ctx context.Context, j *Job[int]) error {
		if err := q.Cancel(context.Background(), j.ID); err != nil {
			t.Errorf("Cancel: %v", err)
		}
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
		case <-time.After(30 * time.Second):
			causes <- errors.New("the handler's context was not cancelled within 30s")
		}
		return ctx.Err()
	}, &WorkerOptions{HeartbeatInterval: 200 * time.Millisecond}))
	r, err := w.WorkOne(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if cause := <-causes; !errors.Is(cause, ErrCancelled) {
		t.Fatalf("the handler's context ended with %v, want ErrCancelled", cause)
	}
	if r.JobID != job.ID || r.Kind != EventCancelled || r.Status != StatusCancelled {
		t.Fatalf("WorkOne = %+v, want job %s cancelled", r, job.ID)
	}
}

// TestWorkOneContextEnds checks that a job whose WorkOne context ends while it runs goes back to
// the queue without using the attempt.
func TestWorkOneContextEnds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "work-ctx")
	job := must(q.Enqueue(t.Context(), 1, nil))
	ctx, cancel := context.WithCancel(t.Context())
	w := must(q.NewWorker(func(hctx context.Context, j *Job[int]) error {
		cancel()
		<-hctx.Done()
		if !errors.Is(context.Cause(hctx), ErrShutdown) {
			t.Errorf("the handler's context ended with %v, want ErrShutdown", context.Cause(hctx))
		}
		return hctx.Err()
	}, nil))
	r, err := w.WorkOne(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != EventHandedBack || r.Status != StatusAvailable || r.Err != nil {
		t.Fatalf("WorkOne = %+v, want the job handed back available", r)
	}
	if e := must(q.Job(t.Context(), job.ID)); e.Status != StatusAvailable || e.Attempt != 0 {
		t.Fatalf("the job is %s after %d attempts, want available after 0", e.Status, e.Attempt)
	}
}

func TestWorkOneRefusedWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "work-running")
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, nil))
	startWorker(t, w)
	waitFor(t, 10*time.Second, "Run to mark the worker running", w.spec.running.Load)
	if _, err := w.WorkOne(t.Context()); !errors.Is(err, ErrWorkerRunning) {
		t.Fatalf("WorkOne while Run serves the worker = %v, want ErrWorkerRunning", err)
	}
}

// TestWorkUntilEmpty checks that jobs run one at a time in run order, due scheduled jobs
// included, and that a retry that is not yet due is left for later.
func TestWorkUntilEmpty(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "work-drain")
	low := must(q.Enqueue(t.Context(), 1, nil))
	high := must(q.Enqueue(t.Context(), 2, &EnqueueOptions{Priority: 5}))
	failing := must(q.Enqueue(t.Context(), 3, &EnqueueOptions{RetryDelay: time.Hour}))
	due := must(q.Enqueue(t.Context(), 4, &EnqueueOptions{Delay: time.Hour}))
	b.exec("UPDATE pgqueue_jobs SET run_at = now() - interval '1 second' WHERE id = $1", due.ID)
	later := must(q.Enqueue(t.Context(), 5, &EnqueueOptions{Delay: time.Hour}))
	running := 0
	w := must(q.NewWorker(func(ctx context.Context, j *Job[int]) error {
		running++
		defer func() { running-- }()
		if running != 1 {
			t.Errorf("%d handlers run at once", running)
		}
		if j.Payload == 3 {
			return errors.New("not yet")
		}
		return nil
	}, nil))
	results, err := w.WorkUntilEmpty(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ran []ulid.ULID
	var kinds []EventKind
	for _, r := range results {
		ran, kinds = append(ran, r.JobID), append(kinds, r.Kind)
	}
	wantRan := []ulid.ULID{high.ID, low.ID, failing.ID, due.ID}
	wantKinds := []EventKind{EventCompleted, EventCompleted, EventRetrying, EventCompleted}
	if !slices.Equal(ran, wantRan) || !slices.Equal(kinds, wantKinds) {
		t.Fatalf("ran %v (%v), want %v (%v)", ran, kinds, wantRan, wantKinds)
	}
	if n := b.count("status = 'scheduled' AND id IN ($1, $2)", failing.ID, later.ID); n != 2 {
		t.Fatalf("%d of the retry and the later job are scheduled, want both", n)
	}
}

func TestWorkOneExplainsAnUnmigratedSchema(t *testing.T) {
	t.Parallel()
	pool := newPool(t, newSchema(t), 2)
	c, err := NewClient(pool, &Config{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	w := must(newQueue[int](t, c, "work-unmigrated").NewWorker(func(context.Context, *Job[int]) error { return nil }, nil))
	if _, err := w.WorkOne(t.Context()); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("WorkOne without pgqueue's tables = %v, want ErrSchemaVersion", err)
	}
}

// A job cancelled after its handler's context had already ended (its JobTimeout passed, or
// WorkOne's context ended) is reported cancelled by WorkOne, as OnEvent and the row say, not as a
// lost lock.
func TestWorkOneCancelledAfterContextEnded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name       string
		jobTimeout time.Duration
		stop       bool // the handler ends WorkOne's context
	}{
		{"job timeout", 100 * time.Millisecond, false},
		{"WorkOne's context", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newQueue[int](t, b.client, "work-cancel-"+randomName(""))
			job := must(q.Enqueue(t.Context(), 1, nil))
			cancelled := make(chan struct{}, 1)
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			w := must(q.NewWorker(func(hctx context.Context, j *Job[int]) error {
				if tc.stop {
					stop()
				}
				<-hctx.Done()
				if err := q.Cancel(context.Background(), j.ID); err != nil {
					t.Errorf("Cancel: %v", err)
				}
				select { // the worker has heard of it
				case <-cancelled:
				case <-time.After(30 * time.Second):
					t.Error("no EventCancelled within 30s")
				}
				return hctx.Err()
			}, &WorkerOptions{JobTimeout: tc.jobTimeout, HeartbeatInterval: 200 * time.Millisecond,
				OnEvent: func(e Event) {
					if e.Kind == EventCancelled {
						cancelled <- struct{}{}
					}
				}}))
			r, err := w.WorkOne(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.JobID != job.ID || r.Kind != EventCancelled || r.Status != StatusCancelled {
				t.Fatalf("WorkOne = %+v, want job %s cancelled", r, job.ID)
			}
			if e := must(q.Job(t.Context(), job.ID)); e.Status != StatusCancelled {
				t.Fatalf("the table says %s", e.Status)
			}
		})
	}
}
