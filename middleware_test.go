package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// recorder records what middleware and handlers saw, from any goroutine.
type recorder struct {
	mu    sync.Mutex
	steps []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.steps = append(r.steps, s)
	r.mu.Unlock()
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.steps)
}

// tracing returns a middleware that records its name around next.
func tracing(r *recorder, name string) Middleware {
	return func(ctx context.Context, _ *JobInfo, next func(context.Context) error) error {
		r.add(name + ">")
		err := next(ctx)
		r.add("<" + name)
		return err
	}
}

type ctxKey string

// TestMiddlewareOrder runs a job under Run with client and worker middleware: the client's wrap
// the worker's, each in the order given, around the handler, on the handler's goroutine; a
// context value set by one reaches the handler; JobInfo describes the job.
func TestMiddlewareOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := &recorder{}
	infos := make(chan JobInfo, 1)
	withValue := func(ctx context.Context, job *JobInfo, next func(context.Context) error) error {
		infos <- *job
		return next(context.WithValue(ctx, ctxKey("k"), "from client"))
	}
	client, err := NewClient(b.pool, &Config{Logger: testLogger(t),
		Middleware: []Middleware{tracing(rec, "c1"), tracing(rec, "c2"), withValue}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[map[string]int](t, client, "mw-order")
	done := make(chan struct{})
	events := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[map[string]int]) error {
		rec.add("handler:" + ctx.Value(ctxKey("k")).(string))
		close(done)
		return nil
	}, &WorkerOptions{OnEvent: events.on, Middleware: []Middleware{tracing(rec, "w1"), tracing(rec, "w2")}}))
	job := must(q.Enqueue(t.Context(), map[string]int{"n": 7}, &EnqueueOptions{Priority: 3, MaxAttempts: 4}))
	startWorker(t, w)
	receive(t, done, 30*time.Second, "the handler")
	events.next(t, EventCompleted)

	want := []string{"c1>", "c2>", "w1>", "w2>", "handler:from client", "<w2", "<w1", "<c2", "<c1"}
	if got := rec.get(); !slices.Equal(got, want) {
		t.Errorf("steps = %v; want %v", got, want)
	}
	info := receive(t, infos, time.Second, "the JobInfo")
	if info.ID != job.ID || info.Queue != "mw-order" || info.Attempt != 1 || info.MaxAttempts != 4 ||
		info.Priority != 3 || info.RunAt.IsZero() || info.CreatedAt.IsZero() {
		t.Errorf("JobInfo = %+v; want job %s of mw-order, attempt 1 of 4, priority 3, with times", info, job.ID)
	}
	var payload map[string]int
	if err := json.Unmarshal(info.Payload, &payload); err != nil || payload["n"] != 7 {
		t.Errorf("JobInfo.Payload = %s (%v); want {\"n\": 7}", info.Payload, err)
	}
}

// TestMiddlewareDecidesOutcome checks that the error the middleware returns decides the job's
// outcome, as a handler's would, including when it replaces the handler's or skips it.
func TestMiddlewareDecidesOutcome(t *testing.T) {
	t.Parallel()
	b := setup(t)
	boom := errors.New("boom")
	for _, tc := range []struct {
		name     string
		mw       func(next func(context.Context) error, ctx context.Context) error
		handler  error
		kind     EventKind
		status   Status
		ranInner bool
	}{
		{"error after success", func(next func(context.Context) error, ctx context.Context) error {
			_ = next(ctx)
			return boom
		}, nil, EventRetrying, StatusScheduled, true},
		{"snooze", func(next func(context.Context) error, ctx context.Context) error {
			_ = next(ctx)
			return Snooze(time.Hour)
		}, nil, EventSnoozed, StatusScheduled, true},
		{"permanent", func(next func(context.Context) error, ctx context.Context) error {
			return Permanent(next(ctx))
		}, boom, EventFailed, StatusFailed, true},
		{"swallows the handler's error", func(next func(context.Context) error, ctx context.Context) error {
			_ = next(ctx)
			return nil
		}, boom, EventCompleted, StatusCompleted, true},
		{"skips the handler", func(func(context.Context) error, context.Context) error {
			return nil
		}, boom, EventCompleted, StatusCompleted, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newQueue[int](t, b.client, "mw-"+randomName(""))
			ran := false
			mw := func(ctx context.Context, _ *JobInfo, next func(context.Context) error) error {
				return tc.mw(next, ctx)
			}
			w := must(q.NewWorker(func(context.Context, *Job[int]) error {
				ran = true
				return tc.handler
			}, &WorkerOptions{Middleware: []Middleware{mw}}))
			must(q.Enqueue(t.Context(), 1, &EnqueueOptions{MaxAttempts: 3}))
			r, err := w.WorkOne(t.Context())
			if err != nil || r == nil {
				t.Fatalf("WorkOne = %v, %v", r, err)
			}
			if r.Kind != tc.kind || r.Status != tc.status || ran != tc.ranInner {
				t.Errorf("WorkOne = %s %s, handler ran %v; want %s %s, %v", r.Kind, r.Status, ran,
					tc.kind, tc.status, tc.ranInner)
			}
		})
	}
}

// TestMiddlewarePanic checks that a panic in a middleware is recovered by the worker and
// recorded as a *PanicError, and that a middleware can recover the handler's panic itself.
func TestMiddlewarePanic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "mw-panic")
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{
		Middleware: []Middleware{func(context.Context, *JobInfo, func(context.Context) error) error {
			panic("middleware bug")
		}},
	}))
	job := must(q.Enqueue(t.Context(), 1, &EnqueueOptions{MaxAttempts: 1}))
	r, err := w.WorkOne(t.Context())
	if err != nil || r == nil {
		t.Fatalf("WorkOne = %v, %v", r, err)
	}
	var pe *PanicError
	if r.Kind != EventFailed || !errors.As(r.Err, &pe) || pe.Value != "middleware bug" {
		t.Fatalf("WorkOne = %s, %v; want failed with the middleware's *PanicError", r.Kind, r.Err)
	}
	entry := must(b.client.Job(t.Context(), job.ID))
	if len(entry.Errors) != 1 || !strings.Contains(entry.Errors[0].Error, "middleware bug") || entry.Errors[0].Stack == "" {
		t.Errorf("recorded errors = %+v; want the panic with its stack", entry.Errors)
	}

	recovering := func(ctx context.Context, _ *JobInfo, next func(context.Context) error) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = Permanent(errors.New("recovered"))
			}
		}()
		return next(ctx)
	}
	q2 := newQueue[int](t, b.client, "mw-recover")
	w2 := must(q2.NewWorker(func(context.Context, *Job[int]) error { panic("handler bug") },
		&WorkerOptions{Middleware: []Middleware{recovering}}))
	must(q2.Enqueue(t.Context(), 1, &EnqueueOptions{MaxAttempts: 3}))
	r, err = w2.WorkOne(t.Context())
	if err != nil || r == nil {
		t.Fatalf("WorkOne = %v, %v", r, err)
	}
	if r.Kind != EventFailed || r.Err == nil || r.Err.Error() != "recovered" || errors.As(r.Err, &pe) {
		t.Errorf("WorkOne = %s, %v; want failed with the middleware's own error", r.Kind, r.Err)
	}
}

// TestMiddlewareWorkOne checks that WorkOne runs the client's and the worker's middleware in
// the same order as Run.
func TestMiddlewareWorkOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	rec := &recorder{}
	client, err := NewClient(b.pool, &Config{Logger: testLogger(t), Middleware: []Middleware{tracing(rec, "c")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[int](t, client, "mw-workone")
	w := must(q.NewWorker(func(context.Context, *Job[int]) error {
		rec.add("handler")
		return nil
	}, &WorkerOptions{Middleware: []Middleware{tracing(rec, "w")}}))
	must(q.Enqueue(t.Context(), 1, nil))
	if r, err := w.WorkOne(t.Context()); err != nil || r == nil || r.Kind != EventCompleted {
		t.Fatalf("WorkOne = %+v, %v; want completed", r, err)
	}
	if got, want := rec.get(), []string{"c>", "w>", "handler", "<w", "<c"}; !slices.Equal(got, want) {
		t.Errorf("steps = %v; want %v", got, want)
	}
}

// TestMiddlewareInvalid checks that a nil middleware is refused by NewClient and NewWorker.
func TestMiddlewareInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ok := func(ctx context.Context, _ *JobInfo, next func(context.Context) error) error { return next(ctx) }
	_, err := NewClient(b.pool, &Config{Middleware: []Middleware{ok, nil}})
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "Config.Middleware[1] is nil") {
		t.Errorf("NewClient with a nil middleware: %v; want ErrInvalidOption naming Config.Middleware[1]", err)
	}
	q := newQueue[int](t, b.client, "mw-invalid")
	_, err = q.NewWorker(func(context.Context, *Job[int]) error { return nil },
		&WorkerOptions{Middleware: []Middleware{nil}})
	if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "mw-invalid: Middleware[0] is nil") {
		t.Errorf("NewWorker with a nil middleware: %v; want ErrInvalidOption naming the queue and Middleware[0]", err)
	}
}

// TestLoggerAttributes checks that Logger, in a handler and in a middleware, logs through the
// worker's logger with the job's queue, id and attempts, and is made once per attempt.
func TestLoggerAttributes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var out syncBuffer
	client, err := NewClient(b.pool, &Config{Logger: slog.New(slog.NewJSONHandler(&out, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[int](t, client, "mw-logger")
	logMW := func(ctx context.Context, _ *JobInfo, next func(context.Context) error) error {
		Logger(ctx).Info("from middleware")
		return next(ctx)
	}
	same := false
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		Logger(ctx).Info("from handler", "n", job.Payload)
		same = Logger(ctx) == Logger(context.WithValue(ctx, ctxKey("other"), 1))
		return nil
	}, &WorkerOptions{Middleware: []Middleware{logMW}}))
	job := must(q.Enqueue(t.Context(), 5, &EnqueueOptions{MaxAttempts: 2}))
	if _, err := w.WorkOne(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !client.logs.flush(10 * time.Second) {
		t.Fatal("the log lines were not written within 10s")
	}
	if !same {
		t.Error("Logger made another logger for the same attempt")
	}
	lines := map[string]map[string]any{}
	for line := range strings.Lines(out.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		lines[m["msg"].(string)] = m
	}
	for _, msg := range []string{"from middleware", "from handler"} {
		m := lines[msg]
		if m == nil || m["queue"] != "mw-logger" || m["job_id"] != job.ID.String() || m["attempt"] != 1.0 ||
			m["max_attempts"] != 2.0 {
			t.Errorf("line %q = %v; want queue mw-logger, job_id %s, attempt 1, max_attempts 2", msg, m, job.ID)
		}
	}
	if lines["from handler"]["n"] != 5.0 {
		t.Errorf("the handler's line lost its own attribute: %v", lines["from handler"])
	}
}

// TestLoggerOutsideHandler checks Logger's fallback.
func TestLoggerOutsideHandler(t *testing.T) {
	t.Parallel()
	if Logger(t.Context()) != slog.Default() {
		t.Error("Logger outside a handler is not slog.Default()")
	}
}

// An enqueue middleware that returns nil without calling next, or after next failed, does not
// make the enqueue succeed: every enqueue call returns an error (that nothing was enqueued, or
// the insert's) instead of a job or ids that do not exist, and nothing is written.
func TestEnqueueMiddlewareWithoutInsert(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	client, err := NewClient(b.pool, &Config{Logger: testLogger(t),
		EnqueueMiddleware: []EnqueueMiddleware{func(ctx context.Context, e *EnqueueInfo, next func(context.Context) error) error {
			switch e.Metadata["mode"] {
			case "skip":
				return nil
			case "swallow":
				e.Metadata[""] = "a key metadata cannot have: the insert fails"
				_ = next(ctx)
				return nil
			}
			return next(ctx)
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[int](t, client, "skipped")
	db := b.sqlDB()
	calls := map[string]func(*EnqueueOptions) error{
		"Enqueue":     func(o *EnqueueOptions) error { return errOf(q.Enqueue(ctx, 1, o)) },
		"EnqueueMany": func(o *EnqueueOptions) error { return errOf(q.EnqueueMany(ctx, []int{1, 2}, o)) },
		"EnqueueTx": func(o *EnqueueOptions) (err error) {
			b.inTx(true, func(tx pgx.Tx) error { err = errOf(q.EnqueueTx(ctx, tx, 1, o)); return nil })
			return err
		},
		"EnqueueManyTx": func(o *EnqueueOptions) (err error) {
			b.inTx(true, func(tx pgx.Tx) error { err = errOf(q.EnqueueManyTx(ctx, tx, []int{1, 2}, o)); return nil })
			return err
		},
		"EnqueueSQLTx": func(o *EnqueueOptions) error {
			tx := beginSQL(t, db)
			defer func() { _ = tx.Commit() }()
			return errOf(q.EnqueueSQLTx(ctx, tx, 1, o))
		},
		"EnqueueManySQLTx": func(o *EnqueueOptions) error {
			tx := beginSQL(t, db)
			defer func() { _ = tx.Commit() }()
			return errOf(q.EnqueueManySQLTx(ctx, tx, []int{1, 2}, o))
		},
	}
	for name, call := range calls {
		err := call(&EnqueueOptions{Metadata: map[string]string{"mode": "skip"}})
		if !errors.Is(err, errNotEnqueued) || err.Error() !=
			"pgqueue: enqueue to skipped: an enqueue middleware returned nil without calling next: nothing was enqueued" {
			t.Errorf("%s through a middleware that skips next: %v, want that nothing was enqueued", name, err)
		}
		err = call(&EnqueueOptions{Metadata: map[string]string{"mode": "swallow"}})
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s through a middleware that swallows the insert's error: %v, want that error", name, err)
		}
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs written by enqueues that reported errors", n)
	}
	for name, call := range calls {
		if err := call(nil); err != nil {
			t.Errorf("%s through the middleware calling next: %v", name, err)
		}
	}
	if n := b.count("true"); n != 9 {
		t.Fatalf("%d jobs written, want 9", n)
	}
}
