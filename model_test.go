package pgqueue

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"pgregory.net/rapid"
)

// The model-based test drives a queue through random sequences of operations and, after every
// step, compares what the public API reports (Jobs, Job, Stats) with a small in-memory model of
// the queue. rapid generates the sequences and, on failure, shrinks them to a minimal one.
//
// Workers run one job per "work" step, deterministically: a worker of concurrency 1 is started,
// its handler hands the claimed job to the test, the worker's context is ended (so it claims
// nothing more), the queue is compared with the model while the job runs, and only then is the
// handler told what to return (or the job cancelled or deleted under it). Every delay is an hour or
// more, so no scheduled job falls due during a run, and no lease runs out.

// modelJob is the model's view of one job.
type modelJob struct {
	id          ulid.ULID
	payload     int
	status      Status
	priority    int
	attempt     int
	maxAttempts int
	key         string
	dueKey      int64 // order among scheduled jobs: hours of delay, then the order they were scheduled
}

// queueModel is the model of one queue.
type queueModel struct {
	jobs    map[ulid.ULID]*modelJob
	known   []ulid.ULID // every id ever enqueued, deleted ones included
	paused  bool
	seq     int64 // orders the transitions to scheduled
	payload int
}

func (m *queueModel) schedule(j *modelJob, delay time.Duration) {
	m.seq++
	j.status = StatusScheduled
	j.dueKey = int64(delay/time.Hour)<<32 + m.seq
}

// liveWithKey returns the live job holding key, if any.
func (m *queueModel) liveWithKey(key string) *modelJob {
	for _, j := range m.jobs {
		if j.key == key && (j.status == StatusScheduled || j.status == StatusAvailable || j.status == StatusRunning) {
			return j
		}
	}
	return nil
}

// line returns the waiting jobs in the order they will run: available ones by priority and id,
// then scheduled ones by due time.
func (m *queueModel) line() []*modelJob {
	var avail, sched []*modelJob
	for _, j := range m.jobs {
		switch j.status {
		case StatusAvailable:
			avail = append(avail, j)
		case StatusScheduled:
			sched = append(sched, j)
		}
	}
	slices.SortFunc(avail, func(a, b *modelJob) int {
		return cmp.Or(cmp.Compare(b.priority, a.priority), a.id.Compare(b.id))
	})
	slices.SortFunc(sched, func(a, b *modelJob) int { return cmp.Compare(a.dueKey, b.dueKey) })
	return append(avail, sched...)
}

// handedJob is a job a model worker's handler received, waiting to be told what to return.
type handedJob struct {
	job   *Job[int]
	reply chan func(context.Context) error
}

var modelQueues atomic.Int64

// modelChecksDefault is how many sequences TestModel runs unless -rapid.checks or RAPID_CHECKS
// asks for another number: every step costs a few round trips, and a work step starts and
// stops a worker, so rapid's default of 100 would take most of a minute.
const modelChecksDefault = 25

func TestModel(t *testing.T) {
	t.Parallel()
	setModelChecks()
	b := setup(t)
	client, err := NewClient(b.pool, &Config{
		Logger:    slog.New(slog.DiscardHandler),
		Retention: Retention{Completed: KeepForever},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })

	var checks, steps atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		checks.Add(1)
		ctx := context.Background()
		q := newQueue[int](t, client, fmt.Sprintf("model-%d", modelQueues.Add(1)))
		m := &queueModel{jobs: map[ulid.ULID]*modelJob{}}

		// pick draws an id the queue has known, or an unknown one now and then.
		pick := func(rt *rapid.T) (ulid.ULID, *modelJob) {
			if len(m.known) == 0 || rapid.IntRange(0, 9).Draw(rt, "unknown") == 0 {
				return client.ids.next(1)[0], nil
			}
			id := rapid.SampledFrom(m.known).Draw(rt, "id")
			return id, m.jobs[id]
		}

		rt.Repeat(map[string]func(*rapid.T){
			"enqueue": func(rt *rapid.T) {
				opts := &EnqueueOptions{
					Priority:    rapid.SampledFrom([]int{-1, 0, 5}).Draw(rt, "priority"),
					Delay:       rapid.SampledFrom([]time.Duration{0, time.Hour, 2 * time.Hour}).Draw(rt, "delay"),
					MaxAttempts: rapid.IntRange(1, 3).Draw(rt, "maxAttempts"),
					UniqueKey:   rapid.SampledFrom([]string{"", "", "k1", "k2"}).Draw(rt, "key"),
					RetryDelay:  time.Hour,
				}
				m.payload++
				job, err := q.Enqueue(ctx, m.payload, opts)
				if err != nil {
					rt.Fatalf("Enqueue: %v", err)
				}
				if opts.UniqueKey != "" {
					if live := m.liveWithKey(opts.UniqueKey); live != nil {
						if !job.Duplicate || job.ID != live.id {
							rt.Fatalf("Enqueue with the key of live job %s returned %s (duplicate %v)", live.id, job.ID, job.Duplicate)
						}
						return
					}
				}
				if job.Duplicate {
					rt.Fatalf("Enqueue returned duplicate %s, but no live job has key %q", job.ID, opts.UniqueKey)
				}
				j := &modelJob{id: job.ID, payload: m.payload, status: StatusAvailable, priority: opts.Priority,
					maxAttempts: opts.MaxAttempts, key: opts.UniqueKey}
				if opts.Delay > 0 {
					m.schedule(j, opts.Delay)
				}
				if job.Status != j.status {
					rt.Fatalf("Enqueue returned status %s, want %s", job.Status, j.status)
				}
				m.jobs[j.id] = j
				m.known = append(m.known, j.id)
			},
			"enqueueMany": func(rt *rapid.T) {
				n := rapid.IntRange(1, 3).Draw(rt, "n")
				opts := &EnqueueOptions{
					Priority:    rapid.SampledFrom([]int{-1, 0, 5}).Draw(rt, "priority"),
					Delay:       rapid.SampledFrom([]time.Duration{0, time.Hour}).Draw(rt, "delay"),
					MaxAttempts: rapid.IntRange(1, 3).Draw(rt, "maxAttempts"),
					RetryDelay:  time.Hour,
				}
				payloads := make([]int, n)
				for i := range payloads {
					m.payload++
					payloads[i] = m.payload
				}
				ids, err := q.EnqueueMany(ctx, payloads, opts)
				if err != nil {
					rt.Fatalf("EnqueueMany: %v", err)
				}
				for i, id := range ids {
					j := &modelJob{id: id, payload: payloads[i], status: StatusAvailable, priority: opts.Priority,
						maxAttempts: opts.MaxAttempts}
					if opts.Delay > 0 {
						m.schedule(j, opts.Delay)
					}
					m.jobs[id] = j
					m.known = append(m.known, id)
				}
			},
			"work": func(rt *rapid.T) {
				outcome := rapid.SampledFrom([]string{"complete", "fail", "permanent", "snooze0", "snooze1h", "shutdown",
					"cancel", "deleteCancel"}).Draw(rt, "outcome")
				modelWork(rt, q, m, outcome)
			},
			"pause": func(rt *rapid.T) {
				if err := q.Pause(ctx); err != nil {
					rt.Fatalf("Pause: %v", err)
				}
				m.paused = true
			},
			"resume": func(rt *rapid.T) {
				if err := q.Resume(ctx); err != nil {
					rt.Fatalf("Resume: %v", err)
				}
				m.paused = false
			},
			"cancel": func(rt *rapid.T) {
				id, j := pick(rt)
				err := q.Cancel(ctx, id)
				var want error
				switch {
				case j == nil:
					want = ErrNotFound
				case j.status == StatusCompleted || j.status == StatusFailed:
					want = ErrJobFinished
				default:
					j.status = StatusCancelled
				}
				checkErr(rt, "Cancel", err, want)
			},
			"retry": func(rt *rapid.T) {
				id, j := pick(rt)
				err := q.Retry(ctx, id)
				var want error
				switch {
				case j == nil:
					want = ErrNotFound
				case j.status == StatusScheduled:
					j.status = StatusAvailable
				case j.status.finished():
					if live := m.liveWithKey(j.key); j.key != "" && live != nil {
						want = ErrDuplicate
						break
					}
					j.status, j.attempt = StatusAvailable, 0
				}
				checkErr(rt, "Retry", err, want)
			},
			"delete": func(rt *rapid.T) {
				id, j := pick(rt)
				err := q.Delete(ctx, id, nil)
				var want error
				if j == nil {
					want = ErrNotFound
				}
				delete(m.jobs, id)
				checkErr(rt, "Delete", err, want)
			},
			"deleteWaiting": func(rt *rapid.T) {
				n, err := q.DeleteWaiting(ctx)
				if err != nil {
					rt.Fatalf("DeleteWaiting: %v", err)
				}
				want := 0
				for id, j := range m.jobs {
					if j.status == StatusScheduled || j.status == StatusAvailable {
						delete(m.jobs, id)
						want++
					}
				}
				if n != want {
					rt.Fatalf("DeleteWaiting deleted %d, want %d", n, want)
				}
			},
			"": func(rt *rapid.T) {
				steps.Add(1)
				checkModel(rt, q, m)
			},
		})
	})
	t.Logf("%d checks, %d steps (each step followed by a comparison of the queue with the model)", checks.Load(), steps.Load())
}

// setModelChecks lowers rapid's number of checks to modelChecksDefault unless it was chosen on the
// command line or in the environment.
func setModelChecks() {
	if os.Getenv("RAPID_CHECKS") != "" {
		return
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		_ = flag.Set("rapid.checks", strconv.Itoa(modelChecksDefault))
	}
}

func checkErr(rt *rapid.T, op string, err, want error) {
	rt.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		rt.Fatalf("%s = %v, want %v", op, err, want)
	}
}

// modelWork runs one job of q, if the model says one is runnable, with a handler that ends as
// outcome says, and checks the worker's events against the model.
func modelWork(rt *rapid.T, q *Queue[int], m *queueModel, outcome string) {
	rt.Helper()
	handed := make(chan handedJob)
	evs := newEvents()
	// Heartbeats often, so that a cancellation whose notification the listener missed (it may
	// still be connecting) is found soon all the same.
	opts := &WorkerOptions{Concurrency: 1, ShutdownTimeout: time.Minute, HeartbeatInterval: 500 * time.Millisecond,
		OnEvent: evs.on}
	if outcome == "shutdown" {
		opts.ShutdownTimeout = 20 * time.Millisecond
	}
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		h := handedJob{job: job, reply: make(chan func(context.Context) error, 1)}
		handed <- h
		return (<-h.reply)(ctx)
	}, opts))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()

	var want *modelJob
	if line := m.line(); !m.paused && len(line) > 0 && line[0].status == StatusAvailable {
		want = line[0]
	}
	var got handedJob
	var early []Event // events of the job read while waiting for its handler
	deadline := time.After(30 * time.Second)
wait:
	for {
		select {
		case got = <-handed:
			break wait
		case ev := <-evs.ch:
			if ev.Kind == EventDrained {
				break wait
			}
			if ev.Kind != EventError {
				early = append(early, ev)
			}
		case <-deadline:
			cancel()
			<-done
			rt.Fatalf("the worker neither ran a job nor reported drained within 30s")
		}
	}
	if got.job == nil {
		cancel()
		if err := <-done; err != nil {
			rt.Fatalf("Run: %v", err)
		}
		if want != nil {
			rt.Fatalf("the worker ran nothing, want job %s", want.id)
		}
		return
	}
	if want == nil {
		cancel()
		got.reply <- func(context.Context) error { return nil }
		<-done
		rt.Fatalf("the worker ran job %s, want none (paused %v)", got.job.ID, m.paused)
	}
	if got.job.ID != want.id || got.job.Payload != want.payload || got.job.Attempt != want.attempt+1 {
		cancel()
		got.reply <- func(context.Context) error { return nil }
		<-done
		rt.Fatalf("the worker ran job %s (payload %d, attempt %d), want %s (payload %d, attempt %d)",
			got.job.ID, got.job.Payload, got.job.Attempt, want.id, want.payload, want.attempt+1)
	}

	// While it runs: place 0 in the listing, and refused by Retry and by Delete without Cancel.
	// The worker, its only slot taken, claims nothing meanwhile.
	want.status, want.attempt = StatusRunning, want.attempt+1
	running := *want
	checkModel(rt, q, m)
	checkErr(rt, "Retry of a running job", q.Retry(context.Background(), want.id), ErrJobRunning)
	checkErr(rt, "Delete of a running job", q.Delete(context.Background(), want.id, nil), ErrJobRunning)
	cancel() // the worker stops claiming, and waits for its handler

	var wantEvent EventKind
	causes := make(chan error, 1)
	untilCancelled := func(ctx context.Context) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}
	switch outcome {
	case "complete":
		got.reply <- func(context.Context) error { return nil }
		want.status, wantEvent = StatusCompleted, EventCompleted
	case "fail":
		got.reply <- func(context.Context) error { return errors.New("fail") }
		if want.attempt >= want.maxAttempts {
			want.status, wantEvent = StatusFailed, EventFailed
		} else {
			m.schedule(want, time.Hour)
			wantEvent = EventRetrying
		}
	case "permanent":
		got.reply <- func(context.Context) error { return Permanent(errors.New("no")) }
		want.status, wantEvent = StatusFailed, EventFailed
	case "snooze0":
		got.reply <- func(context.Context) error { return Snooze(0) }
		want.status, want.attempt, wantEvent = StatusAvailable, want.attempt-1, EventSnoozed
	case "snooze1h":
		got.reply <- func(context.Context) error { return Snooze(time.Hour) }
		m.schedule(want, time.Hour)
		want.attempt, wantEvent = want.attempt-1, EventSnoozed
	case "shutdown":
		// The handler outlives the grace period; the job is handed back uncharged: neither
		// snoozed nor failed.
		got.reply <- untilCancelled
		want.status, want.attempt, wantEvent = StatusAvailable, want.attempt-1, EventHandedBack
	case "cancel":
		got.reply <- untilCancelled
		checkErr(rt, "Cancel of a running job", q.Cancel(context.Background(), want.id), nil)
		want.status, wantEvent = StatusCancelled, EventCancelled
	case "deleteCancel":
		got.reply <- untilCancelled
		checkErr(rt, "Delete with Cancel of a running job", q.Delete(context.Background(), want.id, &DeleteOptions{Cancel: true}), nil)
		delete(m.jobs, want.id)
		wantEvent = EventCancelled
	}
	if err := <-done; err != nil {
		rt.Fatalf("Run: %v", err)
	}
	if len(causes) > 0 {
		wantCause := ErrCancelled
		if outcome == "shutdown" {
			wantCause = ErrShutdown
		}
		cause := <-causes
		// A deleted job has no row left to say it was cancelled: a heartbeat that comes before the
		// notification reports the lock lost (ErrLockLost covers rows deleted under a handler).
		deletedFirst := outcome == "deleteCancel" && errors.Is(cause, ErrLockLost)
		if deletedFirst {
			wantEvent = EventLockLost
		}
		if !errors.Is(cause, wantCause) && !deletedFirst {
			rt.Fatalf("outcome %s: the handler's context ended with %v, want %v", outcome, cause, wantCause)
		}
	}
	for len(evs.ch) > 0 {
		// EventError reports a statement that timed out or failed (a busy machine can delay a
		// heartbeat); the worker retries, and the comparison with the model checks the outcome.
		if ev := <-evs.ch; ev.Kind != EventDrained && ev.Kind != EventError {
			early = append(early, ev)
		}
	}
	var kinds []EventKind
	var errs []error
	for _, ev := range early {
		kinds = append(kinds, ev.Kind)
		errs = append(errs, ev.Err)
		if ev.JobID != running.id || ev.Attempt != running.attempt || ev.MaxAttempts != running.maxAttempts {
			rt.Fatalf("outcome %s: event %s of job %s attempt %d/%d, want job %s attempt %d/%d", outcome, ev.Kind,
				ev.JobID, ev.Attempt, ev.MaxAttempts, running.id, running.attempt, running.maxAttempts)
		}
	}
	if !slices.Equal(kinds, []EventKind{EventStarted, wantEvent}) {
		rt.Fatalf("outcome %s: events %v (errors %v), want [%s %s]", outcome, kinds, errs, EventStarted, wantEvent)
	}
}

// checkModel compares the queue, read through the public API, with the model: the listing of
// every job (running ones, then waiting ones in run order, with their places), a look-up of a few
// jobs (deleted ones included), and the counts.
func checkModel(rt *rapid.T, q *Queue[int], m *queueModel) {
	rt.Helper()
	ctx := context.Background()

	page, err := q.Jobs(ctx, &ListOptions{Limit: ListLimitMax, Statuses: listSections})
	if err != nil {
		rt.Fatalf("Jobs: %v", err)
	}
	var running []*modelJob
	for _, j := range m.jobs {
		if j.status == StatusRunning {
			running = append(running, j)
		}
	}
	slices.SortFunc(running, func(a, b *modelJob) int { return a.id.Compare(b.id) })
	place := map[ulid.ULID]int{}
	for _, j := range running {
		place[j.id] = 0
	}
	line := m.line()
	for i, j := range line {
		place[j.id] = i + 1
	}
	line = append(running, line...)
	var got, want []string
	for _, e := range page.Jobs {
		got = append(got, describeEntry(e.ID, e.Status, e.Place, e.Attempt, e.Priority, e.Payload, e.MaxAttempts, e.UniqueKey))
	}
	for _, j := range line {
		want = append(want, describeJob(j, place))
	}
	var finished []string
	for _, j := range m.jobs {
		if j.status.finished() {
			finished = append(finished, describeJob(j, place))
		}
	}
	// Finished jobs come last, by finish time, which the model does not track.
	slices.Sort(finished)
	if len(got) >= len(line) {
		slices.Sort(got[len(line):])
	}
	want = append(want, finished...)
	if !slices.Equal(got, want) {
		rt.Fatalf("listing:\n got %q\nwant %q", got, want)
	}

	for range min(2, len(m.known)) {
		id := rapid.SampledFrom(m.known).Draw(rt, "lookup")
		j := m.jobs[id]
		e, err := q.Job(ctx, id)
		if j == nil {
			if !errors.Is(err, ErrNotFound) {
				rt.Fatalf("Job(%s) of a deleted job = %v, want ErrNotFound", id, err)
			}
			continue
		}
		if err != nil {
			rt.Fatalf("Job(%s): %v", id, err)
		}
		got := describeEntry(e.ID, e.Status, e.Place, e.Attempt, e.Priority, e.Payload, e.MaxAttempts, e.UniqueKey)
		if want := describeJob(j, place); got != want {
			rt.Fatalf("Job(%s) = %s, want %s", id, got, want)
		}
	}

	st, err := q.Stats(ctx)
	if err != nil {
		rt.Fatalf("Stats: %v", err)
	}
	wantStats := QueueStats{Queue: q.Name(), Paused: m.paused}
	for _, j := range m.jobs {
		switch j.status {
		case StatusScheduled:
			wantStats.Scheduled++
		case StatusAvailable:
			wantStats.Available++
		case StatusRunning:
			wantStats.Running++
		case StatusCompleted:
			wantStats.Completed++
		case StatusFailed:
			wantStats.Failed++
		case StatusCancelled:
			wantStats.Cancelled++
		}
	}
	gotStats := *st
	gotStats.OldestWait = 0
	if gotStats != wantStats {
		rt.Fatalf("Stats = %+v, want %+v", gotStats, wantStats)
	}
}

func describeEntry(id ulid.ULID, status Status, place, attempt, priority, payload, maxAttempts int, key string) string {
	return fmt.Sprintf("%s %s place=%d attempt=%d/%d priority=%d payload=%d key=%q",
		id, status, place, attempt, maxAttempts, priority, payload, key)
}

func describeJob(j *modelJob, place map[ulid.ULID]int) string {
	p, ok := place[j.id]
	if !ok {
		p = -1
	}
	return describeEntry(j.id, j.status, p, j.attempt, j.priority, j.payload, j.maxAttempts, j.key)
}
