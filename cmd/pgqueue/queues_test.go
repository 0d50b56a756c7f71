package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

func TestQueuesTable(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	// Fixed data without available jobs: nothing in the table depends on the clock.
	e.ok("", "enqueue", "emails", "{}", "--delay", "1h")
	e.ok("", "enqueue", "emails", "{}", "--delay", "2h")
	e.failJobs("reports", 2, false)
	e.ok("", "limits", "reports", "--max-running", "5", "--rate", "100/1m")
	e.ok("", "pause", "reports")
	golden(t, "queues", mask(e.ok("", "queues")))

	var stats pgqueue.Stats
	e.okJSON(&stats, "queues")
	if len(stats.Queues) != 2 || stats.Queues[1].Failed != 2 || !stats.Queues[1].Paused ||
		stats.Queues[1].Limits.Rate != (pgqueue.Rate{Starts: 100, Per: time.Minute}) {
		t.Errorf("queues --json: %+v", stats)
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.ok("", "enqueue", "emails", "{}")
	var state queueStateJSON
	e.okJSON(&state, "pause", "emails")
	if state != (queueStateJSON{Queue: "emails", Paused: true}) {
		t.Errorf("pause --json: %+v", state)
	}
	if out := e.ok("", "queues"); !strings.Contains(out, "emails  paused") {
		t.Errorf("queues after pause:\n%s", out)
	}
	if !e.stats()["emails"].Paused {
		t.Error("queues --json: not paused")
	}
	if out := e.ok("", "resume", "emails"); out != "resumed emails\n" {
		t.Errorf("resume said %q", out)
	}
	if e.stats()["emails"].Paused {
		t.Error("queues --json: still paused after resume")
	}
}

func TestLimitsSetAndShow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	var l pgqueue.Limits
	e.okJSON(&l, "limits", "emails")
	if l != (pgqueue.Limits{}) {
		t.Errorf("limits of a new queue: %+v", l)
	}
	out := e.ok("", "limits", "emails", "--max-running", "20", "--key-max-running", "1", "--rate", "100/1m", "--key-rate", "5/1s")
	golden(t, "limits", out)

	// Flags change the limits they name and keep the others.
	e.okJSON(&l, "limits", "emails", "--rate", "none", "--max-running", "10")
	want := pgqueue.Limits{MaxRunning: 10, KeyMaxRunning: 1, KeyRate: pgqueue.Rate{Starts: 5, Per: time.Second}}
	if l != want {
		t.Errorf("after --rate none --max-running 10: %+v, want %+v", l, want)
	}
	q, err := pgqueue.NewQueue[json.RawMessage](e.client, "emails")
	if err != nil {
		t.Fatal(err)
	}
	if stored, err := q.Limits(t.Context()); err != nil || stored != want {
		t.Errorf("stored limits %+v, %v", stored, err)
	}
	var cleared pgqueue.Limits
	e.okJSON(&cleared, "limits", "emails", "--clear")
	if cleared != (pgqueue.Limits{}) {
		t.Errorf("after --clear: %+v", cleared)
	}
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	if out := e.ok("", "schedules"); out != "no schedules\n" {
		t.Errorf("schedules of a new schema: %q", out)
	}
	e.runPeriodic("reports", "nightly")
	out := e.ok("", "schedules")
	if !strings.Contains(out, "reports") || !strings.Contains(out, "nightly") || !strings.Contains(out, "@every 1h0m0s") {
		t.Errorf("schedules:\n%s", out)
	}
	var schedules []scheduleJSON
	e.okJSON(&schedules, "schedules")
	if len(schedules) != 1 || schedules[0].Queue != "reports" || schedules[0].Name != "nightly" ||
		schedules[0].Spec != "@every 1h0m0s" || !schedules[0].Recorded || schedules[0].Handled.IsZero() ||
		!schedules[0].Next.After(schedules[0].Handled) {
		t.Errorf("schedules --json: %+v", schedules)
	}
}

// runPeriodic runs a worker of queue that declares the schedule name (@every 1h) until the
// schedule is recorded in the database.
func (e *env) runPeriodic(queue, name string) {
	e.t.Helper()
	q, err := pgqueue.NewQueue[json.RawMessage](e.client, queue)
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := q.NewWorker(func(ctx context.Context, _ *pgqueue.Job[json.RawMessage]) error { return nil }, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := w.AddPeriodic(pgqueue.Periodic[json.RawMessage]{Name: name, Every: time.Hour, Payload: json.RawMessage(`{}`)}); err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.t.Context())
	done := make(chan error, 1)
	go func() { done <- e.client.Run(ctx, w) }()
	waitFor(e.t, "the schedule to be recorded", func() bool {
		s, err := e.client.Schedules(e.t.Context())
		return err == nil && len(s) == 1 && s[0].Recorded && !s[0].Handled.IsZero()
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			e.t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		e.t.Fatal("Run did not return")
	}
}
