package pgqueueotel

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
	goruntime "runtime"
)

// task says what the handler of TestOutcomes returns for a job.
type task struct{ Do string }

// Completed, retried, failed (last attempt), permanently failed and snoozed jobs: their counters,
// the outcome and status of their spans, and the histograms.
func TestOutcomes(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	client := newClient(t, newPool(t, newSchema(t)), tel, pgqueue.Config{})
	tasks := newQueue[task](t, client, "tasks")
	boom := errors.New("boom")
	w, err := tasks.NewWorker(func(ctx context.Context, j *pgqueue.Job[task]) error {
		switch j.Payload.Do {
		case "fail":
			return boom
		case "permanent":
			return pgqueue.Permanent(boom)
		case "snooze":
			return pgqueue.Snooze(time.Hour)
		}
		return nil
	}, nil)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	type expect struct {
		do      string // what the handler does
		max     int    // MaxAttempts
		outcome string
		status  codes.Code
	}
	want := map[string]expect{
		"ok":        {"ok", 3, "completed", codes.Unset},
		"retried":   {"fail", 3, "retrying", codes.Error},
		"last":      {"fail", 1, "failed", codes.Error},
		"permanent": {"permanent", 3, "failed", codes.Error},
		"snoozed":   {"snooze", 3, "snoozed", codes.Unset},
	}
	ids := map[string]string{}
	for name, w := range want {
		job, err := tasks.Enqueue(ctx, task{Do: w.do}, &pgqueue.EnqueueOptions{MaxAttempts: w.max})
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		ids[job.ID.String()] = name
	}
	results, err := w.WorkUntilEmpty(ctx)
	if err != nil || len(results) != len(want) {
		t.Fatalf("WorkUntilEmpty = %d results, %v; want %d", len(results), err, len(want))
	}

	spans := tel.endedSpans()["process tasks"]
	if len(spans) != len(want) {
		t.Fatalf("%d process spans, want %d", len(spans), len(want))
	}
	for _, span := range spans {
		id, _ := attr(span, keyMessageID)
		w := want[ids[id.AsString()]]
		wantAttrs(t, span, keyJobOutcome.String(w.outcome))
		if span.Status().Code != w.status {
			t.Errorf("span of %q: status %v, want %v", ids[id.AsString()], span.Status(), w.status)
		}
	}
	wantOutcomeMetrics(t, tel.collect(t))
}

// wantOutcomeMetrics checks the counters and histograms of TestOutcomes' five attempts.
func wantOutcomeMetrics(t *testing.T, ms map[string]metricdata.Metrics) {
	t.Helper()
	for name, n := range map[string]int64{
		"pgqueue.jobs.enqueued": 5, "pgqueue.jobs.started": 5, "pgqueue.jobs.completed": 1,
		"pgqueue.jobs.retried": 1, "pgqueue.jobs.failed": 2, "pgqueue.jobs.snoozed": 1,
		"pgqueue.jobs.cancelled": 0, "pgqueue.jobs.lock_lost": 0,
	} {
		if got := counter(t, ms, name, "tasks"); got != n {
			t.Errorf("%s = %d, want %d", name, got, n)
		}
	}
	if n := histogramCount(t, ms, "pgqueue.job.wait", "tasks"); n != 5 {
		t.Errorf("pgqueue.job.wait has %d values, want 5", n)
	}
	for outcome, n := range map[string]uint64{"completed": 1, "retrying": 1, "failed": 2, "snoozed": 1} {
		if got := histogramCount(t, ms, "pgqueue.job.duration", "tasks", keyJobOutcome.String(outcome)); got != n {
			t.Errorf("pgqueue.job.duration{outcome=%s} has %d values, want %d", outcome, got, n)
		}
	}
	if unit := ms["pgqueue.job.duration"].Unit; unit != "s" {
		t.Errorf("pgqueue.job.duration unit %q, want s", unit)
	}
}

// Wired by hand inside a middleware of the application that starts a span of its own, the
// attempt's span still continues the enqueuer's trace.
func TestProcessParentIsTheEnqueuerNotTheHandlerContext(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	var local trace.SpanContext
	outer := func(ctx context.Context, job *pgqueue.JobInfo, next func(context.Context) error) error {
		ctx, span := tel.tp.Tracer("app").Start(ctx, "worker loop")
		defer span.End()
		local = span.SpanContext()
		return next(ctx)
	}
	client := newClient(t, newPool(t, newSchema(t)), nil, pgqueue.Config{
		EnqueueMiddleware: []pgqueue.EnqueueMiddleware{tel.inst.EnqueueMiddleware()},
		Middleware:        []pgqueue.Middleware{outer, tel.inst.Middleware()},
		OnEvent:           tel.inst.OnEvent,
	})
	emails := newQueue[email](t, client, "emails")
	if _, err := emails.Enqueue(ctx, email{"a@x"}, nil); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	workOne(t, emails, func(context.Context, *pgqueue.Job[email]) error { return nil })

	send, process := tel.onlySpan(t, "send emails"), tel.onlySpan(t, "process emails")
	if process.Parent().SpanID() != send.SpanContext().SpanID() || process.SpanContext().TraceID() != send.SpanContext().TraceID() {
		t.Errorf("process span's parent %v, want the send span %v", process.Parent(), send.SpanContext())
	}
	if local.TraceID() == send.SpanContext().TraceID() {
		t.Errorf("the handler context's span is in the enqueuer's trace: the test proves nothing")
	}
}

// A job enqueued without trace context gets a span under the handler's context, without link.
func TestProcessWithoutTraceContext(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	pool := newPool(t, newSchema(t))
	plain := newQueue[email](t, newClient(t, pool, nil, pgqueue.Config{}), "emails")
	if _, err := plain.Enqueue(ctx, email{"a@x"}, nil); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	traced := newQueue[email](t, newClient(t, pool, tel, pgqueue.Config{}), "emails")
	workOne(t, traced, func(context.Context, *pgqueue.Job[email]) error { return nil })
	process := tel.onlySpan(t, "process emails")
	if process.Parent().IsValid() || len(process.Links()) != 0 {
		t.Errorf("parent %v, links %v; want a root span without links", process.Parent(), process.Links())
	}
}

// A handler that panics ends its span with an error status, the panic recorded as the
// *PanicError the worker records, with its stack, error.type and the outcome: retrying, or failed
// on the last attempt. The worker still recovers the panic, with the handler's stack.
func TestProcessPanic(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	client := newClient(t, newPool(t, newSchema(t)), tel, pgqueue.Config{})
	for queue, c := range map[string]struct {
		max     int
		kind    pgqueue.EventKind
		outcome string
	}{"emails": {3, pgqueue.EventRetrying, "retrying"}, "reports": {1, pgqueue.EventFailed, "failed"}} {
		q := newQueue[email](t, client, queue)
		if _, err := q.Enqueue(ctx, email{"a@x"}, &pgqueue.EnqueueOptions{MaxAttempts: c.max}); err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		res := workOne(t, q, func(context.Context, *pgqueue.Job[email]) error { panic("no mail today") })
		var perr *pgqueue.PanicError
		if res.Kind != c.kind || !errors.As(res.Err, &perr) || perr.Value != "no mail today" || !strings.Contains(perr.Stack, "TestProcessPanic") {
			t.Errorf("%s: result %v, %#v; want %v with the handler's panic and stack", queue, res.Kind, res.Err, c.kind)
		}
		span := tel.onlySpan(t, "process "+queue)
		if st := span.Status(); st.Code != codes.Error || st.Description != "panic: no mail today" {
			t.Errorf("%s: status %v, want error, panic: no mail today", queue, st)
		}
		wantAttrs(t, span, keyJobOutcome.String(c.outcome), keyErrorType.String("*pgqueue.PanicError"))
		events := span.Events()
		if len(events) != 1 || events[0].Name != "exception" {
			t.Fatalf("%s: events %v, want one exception", queue, events)
		}
		recorded := map[attribute.Key]string{}
		for _, kv := range events[0].Attributes {
			recorded[kv.Key] = kv.Value.AsString()
		}
		if recorded["exception.message"] != "panic: no mail today" || !strings.Contains(recorded["exception.stacktrace"], "TestProcessPanic") {
			t.Errorf("%s: exception %v, want the panic with the handler's stack", queue, recorded)
		}
	}
	if n := counter(t, tel.collect(t), "pgqueue.jobs.retried", "emails"); n != 1 {
		t.Errorf("pgqueue.jobs.retried = %d, want 1", n)
	}
}

// Two clients, each with its own pool and Instrumentation, as two processes: one enqueues under
// a request's span, the other works the job, and the trace goes on.
func TestTraceAcrossClients(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	web, worker := newTelemetry(t), newTelemetry(t)
	enqueuer := newQueue[email](t, newClient(t, newPool(t, schema), web, pgqueue.Config{}), "emails")
	runner := newQueue[email](t, newClient(t, newPool(t, schema), worker, pgqueue.Config{}), "emails")

	reqCtx, req := web.tp.Tracer("app").Start(ctx, "POST /signup")
	if _, err := enqueuer.Enqueue(reqCtx, email{"a@x"}, nil); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	req.End()
	var handlerSpan trace.SpanContext
	workOne(t, runner, func(ctx context.Context, _ *pgqueue.Job[email]) error {
		handlerSpan = trace.SpanContextFromContext(ctx)
		return nil
	})
	send, process := web.onlySpan(t, "send emails"), worker.onlySpan(t, "process emails")
	if process.SpanContext().TraceID() != req.SpanContext().TraceID() || process.Parent().SpanID() != send.SpanContext().SpanID() {
		t.Errorf("process span %v with parent %v; want the trace %v under send span %v",
			process.SpanContext(), process.Parent(), req.SpanContext().TraceID(), send.SpanContext().SpanID())
	}
	if handlerSpan.SpanID() != process.SpanContext().SpanID() {
		t.Errorf("the handler's context holds span %v, want the process span %v", handlerSpan, process.SpanContext())
	}
	if got := len(worker.endedSpans()["send emails"]) + len(web.endedSpans()["process emails"]); got != 0 {
		t.Errorf("%d spans reported by the wrong client", got)
	}
}

// outcomeOf follows the cause of the handler's context as the worker does: a cancelled job or a
// lost lock discards the result, a shutdown hands the job back.
func TestOutcomeOfCancelledContexts(t *testing.T) {
	job := &pgqueue.JobInfo{Attempt: 1, MaxAttempts: 3}
	for cause, want := range map[error]string{
		pgqueue.ErrCancelled: "cancelled", pgqueue.ErrLockLost: "lock_lost", pgqueue.ErrShutdown: "handed_back",
		pgqueue.ErrJobTimeout: "retrying",
	} {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		if got := outcomeOf(ctx, job, context.Canceled); got != want {
			t.Errorf("outcome under cause %v = %q, want %q", cause, got, want)
		}
	}
	if got := outcomeOf(context.Background(), job, pgqueue.Snooze(0)); got != "snoozed" {
		t.Errorf("outcome of a snooze = %q", got)
	}
}

// workOne runs one job of q with h through WorkOne, failing t unless it ran one.
func workOne[T any](t *testing.T, q *pgqueue.Queue[T], h pgqueue.Handler[T]) *pgqueue.WorkResult {
	t.Helper()
	w, err := q.NewWorker(h, nil)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	res, err := w.WorkOne(context.Background())
	if err != nil || res == nil {
		t.Fatalf("WorkOne = %v, %v; want a job run", res, err)
	}
	return res
}

// A handler that calls runtime.Goexit instead of returning gets a span that says so, with the
// outcome the worker gives the attempt: a failure, here on the last attempt.
func TestProcessGoexit(t *testing.T) {
	ctx := context.Background()
	tel := newTelemetry(t)
	client := newClient(t, newPool(t, newSchema(t)), tel, pgqueue.Config{})
	q := newQueue[email](t, client, "goexit")
	if _, err := q.Enqueue(ctx, email{"a@x"}, &pgqueue.EnqueueOptions{MaxAttempts: 1}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	failed := make(chan pgqueue.Event, 1)
	w, err := q.NewWorker(func(context.Context, *pgqueue.Job[email]) error {
		goruntime.Goexit()
		return nil
	}, &pgqueue.WorkerOptions{OnEvent: func(ev pgqueue.Event) {
		if ev.Kind == pgqueue.EventFailed {
			failed <- ev
		}
	}})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { ran <- client.Run(runCtx, w) }()
	select {
	case <-failed:
	case <-time.After(30 * time.Second):
		t.Fatal("the attempt whose handler called runtime.Goexit did not end failed")
	}
	stop()
	if err := <-ran; err != nil {
		t.Fatalf("Run: %v", err)
	}
	span := tel.onlySpan(t, "process goexit")
	if st := span.Status(); st.Code != codes.Error || st.Description != "handler did not return" {
		t.Errorf("status %v, want error, handler did not return", st)
	}
	wantAttrs(t, span, keyJobOutcome.String("failed"))
}
