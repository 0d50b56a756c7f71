package pgqueueotel

import (
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// Each kind of event adds to its counter, and those that end an attempt that ran record its run
// time; a handed-back job that never started and EventDrained record nothing.
func TestOnEventCounts(t *testing.T) {
	tel := newTelemetry(t)
	for _, ev := range []pgqueue.Event{
		{Kind: pgqueue.EventStarted, Queue: "q"},
		{Kind: pgqueue.EventCancelled, Queue: "q", Elapsed: time.Second},
		{Kind: pgqueue.EventLockLost, Queue: "q", Elapsed: time.Second},
		{Kind: pgqueue.EventHandedBack, Queue: "q", Elapsed: time.Second},
		{Kind: pgqueue.EventHandedBack, Queue: "q"},
		{Kind: pgqueue.EventError, Queue: "q"},
		{Kind: pgqueue.EventDrained, Queue: "q"},
		{Kind: pgqueue.EventCompleted, Queue: "other", Elapsed: 2 * time.Second},
	} {
		tel.inst.OnEvent(ev)
	}
	ms := tel.collect(t)
	for name, n := range map[string]int64{
		"pgqueue.jobs.started": 1, "pgqueue.jobs.cancelled": 1, "pgqueue.jobs.lock_lost": 1,
		"pgqueue.jobs.handed_back": 2, "pgqueue.worker.errors": 1, "pgqueue.jobs.completed": 0,
	} {
		if got := counter(t, ms, name, "q"); got != n {
			t.Errorf("%s{q} = %d, want %d", name, got, n)
		}
	}
	if got := counter(t, ms, "pgqueue.jobs.completed", "other"); got != 1 {
		t.Errorf("pgqueue.jobs.completed{other} = %d, want 1", got)
	}
	if got := histogramCount(t, ms, "pgqueue.job.duration", "q"); got != 3 {
		t.Errorf("pgqueue.job.duration{q} has %d values, want 3", got)
	}
	if got := histogramCount(t, ms, "pgqueue.job.duration", "other", keyJobOutcome.String("completed")); got != 1 {
		t.Errorf("pgqueue.job.duration{other, completed} has %d values, want 1", got)
	}
}

// Apply puts its middleware outermost and keeps the OnEvent already set, calling it first.
func TestApplyKeepsWhatIsSet(t *testing.T) {
	tel := newTelemetry(t)
	var calls []pgqueue.EventKind
	mine := func(pgqueue.Event) { calls = append(calls, "mine") }
	cfg := pgqueue.Config{
		OnEvent:           mine,
		Middleware:        []pgqueue.Middleware{tel.inst.Middleware()},
		EnqueueMiddleware: []pgqueue.EnqueueMiddleware{tel.inst.EnqueueMiddleware()},
	}
	tel.inst.Apply(&cfg)
	if len(cfg.Middleware) != 2 || len(cfg.EnqueueMiddleware) != 2 {
		t.Fatalf("%d middleware, %d enqueue middleware; want 2 each", len(cfg.Middleware), len(cfg.EnqueueMiddleware))
	}
	cfg.OnEvent(pgqueue.Event{Kind: pgqueue.EventStarted, Queue: "q"})
	if len(calls) != 1 {
		t.Errorf("the OnEvent set before was called %d times, want 1", len(calls))
	}
	if got := counter(t, tel.collect(t), "pgqueue.jobs.started", "q"); got != 1 {
		t.Errorf("pgqueue.jobs.started = %d, want 1", got)
	}

	var empty pgqueue.Config
	tel.inst.Apply(&empty)
	if empty.OnEvent == nil || len(empty.Middleware) != 1 || len(empty.EnqueueMiddleware) != 1 {
		t.Errorf("Apply on an empty Config: %+v", empty)
	}
}

// New with nil Options uses the global providers, and works.
func TestNewDefaults(t *testing.T) {
	inst, err := New(nil)
	if err != nil {
		t.Fatalf("New(nil): %v", err)
	}
	if inst.statsTimeout != StatsTimeoutDefault {
		t.Errorf("stats timeout %v, want %v", inst.statsTimeout, StatsTimeoutDefault)
	}
	inst.OnEvent(pgqueue.Event{Kind: pgqueue.EventCompleted, Queue: "q"})
}
