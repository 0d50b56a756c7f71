package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
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

// nextOf waits for the next event of job id, whatever its kind, skipping drained and error
// events and other jobs' events.
func (e *events) nextOf(t testing.TB, id ulid.ULID) Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-e.ch:
			if ev.JobID == id {
				return ev
			}
		case <-deadline:
			t.Fatalf("timed out waiting for an event of job %s", id)
		}
	}
}

// outcomes reads events until each job of want has had an outcome, whatever the order in which
// the jobs' events interleave, and fails unless every job had its wanted one (a job may start
// first, and nothing else).
func (e *events) outcomes(t testing.TB, want map[ulid.ULID]EventKind) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for left := len(want); left > 0; {
		select {
		case ev := <-e.ch:
			kind, ok := want[ev.JobID]
			switch {
			case !ok || ev.Kind == EventStarted:
			case ev.Kind != kind:
				t.Fatalf("job %s: event %s, want %s", ev.JobID, ev.Kind, kind)
			default:
				left--
			}
		case <-deadline:
			t.Fatalf("timed out waiting for the outcomes of %d jobs", left)
		}
	}
}

// Each attempt is reported as started before its outcome, and every event carries what a log
// line needs: the queue, the job, the attempt out of how many, the worker, how long the handler
// ran, the error and when the job runs again.
func TestEventsOfAJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "evjob")
	ev := newEvents()
	release := make(chan struct{})
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		<-release
		if job.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}, &WorkerOptions{PollInterval: noPoll, OnEvent: ev.on}))
	runWorkers(t, b.client, w)
	job, err := q.Enqueue(t.Context(), 1, &EnqueueOptions{MaxAttempts: 3, RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	common := func(e Event, kind EventKind, attempt int) {
		t.Helper()
		if e.Kind != kind || e.Queue != q.Name() || e.JobID != job.ID || e.Attempt != attempt ||
			e.MaxAttempts != 3 || e.WorkerID != b.client.cfg.ID {
			t.Fatalf("event %+v, want %s of job %s in %s, attempt %d of 3, worker %s",
				e, kind, job.ID, q.Name(), attempt, b.client.cfg.ID)
		}
	}

	started := ev.nextOf(t, job.ID)
	common(started, EventStarted, 1)
	if started.Elapsed != 0 || started.Err != nil || !started.RunAt.IsZero() {
		t.Fatalf("started event %+v has outcome fields", started)
	}
	release <- struct{}{}
	retrying := ev.nextOf(t, job.ID)
	common(retrying, EventRetrying, 1)
	if retrying.Err == nil || retrying.Err.Error() != "first attempt fails" || retrying.RunAt.IsZero() || retrying.Elapsed <= 0 {
		t.Fatalf("retrying event %+v: want the error, the next run time and the run time", retrying)
	}
	common(ev.nextOf(t, job.ID), EventStarted, 2)
	release <- struct{}{}
	completed := ev.nextOf(t, job.ID)
	common(completed, EventCompleted, 2)
	if completed.Elapsed <= 0 || completed.Err != nil {
		t.Fatalf("completed event %+v", completed)
	}
}

// A job whose handler is stopped by shutdown is reported as handed back, with its uncharged
// attempt, the time it ran and when it may run again; the row says the same.
func TestEventHandedBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "evback")
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		<-ctx.Done()
		return ctx.Err()
	}, &WorkerOptions{PollInterval: noPoll, ShutdownTimeout: 50 * time.Millisecond, OnEvent: ev.on}))
	stop := runWorkers(t, b.client, w)
	job, err := q.Enqueue(t.Context(), 1, &EnqueueOptions{MaxAttempts: 2})
	if err != nil {
		t.Fatal(err)
	}
	if e := ev.nextOf(t, job.ID); e.Kind != EventStarted {
		t.Fatalf("first event %s, want started", e.Kind)
	}
	stop()
	back := ev.nextOf(t, job.ID)
	if back.Kind != EventHandedBack || back.Attempt != 1 || back.MaxAttempts != 2 || back.Queue != q.Name() ||
		back.WorkerID != b.client.cfg.ID || back.RunAt.IsZero() || back.Elapsed < 50*time.Millisecond || back.Err != nil {
		t.Fatalf("event %+v, want handed_back of attempt 1 of 2 with run_at and elapsed ≥ ShutdownTimeout", back)
	}
	if n := b.count("id = $1 AND status = 'available' AND attempt = 0", [16]byte(job.ID)); n != 1 {
		t.Fatal("the handed-back job is not available with its attempt uncharged")
	}
	select {
	case e := <-ev.ch:
		t.Fatalf("event after the hand-back: %+v", e)
	default:
	}
}

// Events marshal to snake_case JSON with zero fields left out, the error as its message and the
// run time as a duration string, and decode back.
func TestEventJSON(t *testing.T) {
	t.Parallel()
	id, next := ulid.MustParse("01JD6Y9QK4B3Z8X1V0W2T5R7NM"), ulid.MustParse("01JD6Y9QK4B3Z8X1V0W2T5R7NP")
	full := Event{Kind: EventRetrying, Queue: "emails", JobID: id, Attempt: 1, MaxAttempts: 25,
		Err: errors.New("smtp: 451"), RunAt: time.Date(2026, 11, 29, 14, 0, 3, 200e6, time.UTC),
		RepeatedAs: next, Elapsed: 212500 * time.Microsecond, WorkerID: "web-1"}
	for _, c := range []struct {
		ev   Event
		want string
	}{
		{full, `{"kind":"retrying","queue":"emails","job_id":"01JD6Y9QK4B3Z8X1V0W2T5R7NM","attempt":1,` +
			`"max_attempts":25,"error":"smtp: 451","run_at":"2026-11-29T14:00:03.2Z",` +
			`"repeated_as":"01JD6Y9QK4B3Z8X1V0W2T5R7NP","elapsed":"212.5ms","worker_id":"web-1"}`},
		{Event{Kind: EventDrained, Queue: "emails", WorkerID: "web-1"},
			`{"kind":"drained","queue":"emails","worker_id":"web-1"}`},
		{Event{Kind: EventError, Queue: "emails", Err: fmt.Errorf("pgqueue: claim: %w", ErrClosed)},
			`{"kind":"error","queue":"emails","error":"pgqueue: claim: ` + ErrClosed.Error() + `"}`},
	} {
		got, err := json.Marshal(c.ev)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("json of %s:\n got %s\nwant %s", c.ev.Kind, got, c.want)
		}
		var back Event
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if again, _ := json.Marshal(back); string(again) != c.want {
			t.Errorf("round trip of %s: %s", c.ev.Kind, again)
		}
	}
	var back Event
	if err := json.Unmarshal([]byte(`{"kind":"completed","elapsed":"soon"}`), &back); err == nil {
		t.Error("an unreadable elapsed decoded")
	}
}

// A job whose attempt failed goes back in line as its outcome is saved, and may be claimed again
// before the completer reports that outcome (here a slow log handler holds the report back):
// its events still come in the order of its attempts (started, retrying, started, completed).
func TestEventsInAttemptOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "evorder")
	ev := newEvents()
	slow := slog.New(slowLog{slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}),
		"pgqueue: job attempt failed; retrying", 20 * time.Millisecond})
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		if job.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}, &WorkerOptions{PollInterval: noPoll, OnEvent: ev.on, Concurrency: 20, Logger: slow}))
	const jobs = 30
	if _, err := q.EnqueueMany(t.Context(), make([]int, jobs), &EnqueueOptions{MaxAttempts: 3, RetryDelay: time.Microsecond}); err != nil {
		t.Fatal(err)
	}
	runWorkers(t, b.client, w)
	want := []EventKind{EventStarted, EventRetrying, EventStarted, EventCompleted}
	seen := map[ulid.ULID][]EventKind{}
	for done := 0; done < jobs; {
		e := receive(t, ev.ch, 30*time.Second, "the jobs' events")
		if e.Kind == EventDrained {
			continue
		}
		kinds := append(seen[e.JobID], e.Kind)
		seen[e.JobID] = kinds
		if i := len(kinds) - 1; i >= len(want) || kinds[i] != want[i] {
			t.Fatalf("job %s: events %v, want %v", e.JobID, kinds, want)
		}
		if len(kinds) == len(want) {
			done++
		}
	}
}

// slowLog is a slog handler that takes a while over records with one message.
type slowLog struct {
	slog.Handler
	msg   string
	delay time.Duration
}

func (h slowLog) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		time.Sleep(h.delay)
	}
	return h.Handler.Handle(ctx, r)
}

func (h slowLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	return slowLog{h.Handler.WithAttrs(attrs), h.msg, h.delay}
}
