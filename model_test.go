package pgqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// The model-based test drives a queue through random sequences of operations and, after every
// step, compares what the public API reports (Jobs, Job, Stats) with a small in-memory model of
// the queue. A seeded generator (seqT, below) draws the sequences; a failure prints the seed and
// the steps so far, and PGQUEUE_MODEL_SEED=<seed> replays that sequence alone.
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

// modelSequencesDefault is how many sequences TestModel runs unless PGQUEUE_MODEL_SEQUENCES asks
// for another number: every step costs a few round trips, and a work step starts and stops a
// worker, so 100 sequences take most of a minute.
const modelSequencesDefault = 25

// modelStepsAverage is the average number of operations of a sequence; each sequence has
// between 1 and 2·modelStepsAverage-1.
const modelStepsAverage = 24

// TestModel stays one function: its table of operations is the model's whole vocabulary, each
// entry's call on the queue beside its effect on the model, all sharing one queue and model;
// splitting it would part the two.
//
// newModelClient returns the model tests' client on b's pool: quiet, and keeping completed jobs
// so that the listings show them.
func newModelClient(t *testing.T, b *bundle) *Client {
	t.Helper()
	client, err := NewClient(b.pool, &Config{
		Logger:    slog.New(slog.DiscardHandler),
		Retention: Retention{Completed: KeepForever},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// TestModel runs random sequences of operations (PGQUEUE_MODEL_SEQUENCES of them, by default
// modelSequencesDefault), each on a queue of its own, and after every step compares the queue
// with the model (see the top of this file).
func TestModel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := newModelClient(t, b)

	var checks, steps atomic.Int64
	runSequences(t, func(rt *seqT) {
		checks.Add(1)
		ctx := context.Background()
		q := newQueue[int](t, client, fmt.Sprintf("model-%d", modelQueues.Add(1)))
		m := &queueModel{jobs: map[ulid.ULID]*modelJob{}}

		// pick draws an id the queue has known, or an unknown one now and then.
		pick := func(rt *seqT) (ulid.ULID, *modelJob) {
			if len(m.known) == 0 || drawInt(rt, "unknown", 0, 9) == 0 {
				return client.ids.next(1)[0], nil
			}
			id := draw(rt, "id", m.known...)
			return id, m.jobs[id]
		}

		rt.repeat(map[string]func(*seqT){
			"enqueue": func(rt *seqT) {
				opts := &EnqueueOptions{
					Priority:    draw(rt, "priority", -1, 0, 5),
					Delay:       draw(rt, "delay", 0, time.Hour, 2*time.Hour),
					MaxAttempts: drawInt(rt, "maxAttempts", 1, 3),
					UniqueKey:   draw(rt, "key", "", "", "k1", "k2"),
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
			"enqueueMany": func(rt *seqT) {
				n := drawInt(rt, "n", 1, 3)
				opts := &EnqueueOptions{
					Priority:    draw(rt, "priority", -1, 0, 5),
					Delay:       draw(rt, "delay", 0, time.Hour),
					MaxAttempts: drawInt(rt, "maxAttempts", 1, 3),
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
			"work": func(rt *seqT) {
				outcome := draw(rt, "outcome", "complete", "fail", "permanent", "snooze0", "snooze1h", "shutdown",
					"cancel", "deleteCancel")
				modelWork(rt, q, m, outcome)
			},
			"pause": func(rt *seqT) {
				if err := q.Pause(ctx); err != nil {
					rt.Fatalf("Pause: %v", err)
				}
				m.paused = true
			},
			"resume": func(rt *seqT) {
				if err := q.Resume(ctx); err != nil {
					rt.Fatalf("Resume: %v", err)
				}
				m.paused = false
			},
			"cancel": func(rt *seqT) {
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
			"retry": func(rt *seqT) {
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
			"delete": func(rt *seqT) {
				id, j := pick(rt)
				err := q.Delete(ctx, id, nil)
				var want error
				if j == nil {
					want = ErrNotFound
				}
				delete(m.jobs, id)
				checkErr(rt, "Delete", err, want)
			},
			"deleteWaiting": func(rt *seqT) {
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
			"": func(rt *seqT) {
				steps.Add(1)
				checkModel(rt, q, m)
			},
		})
	})
	t.Logf("%d checks, %d steps (each step followed by a comparison of the queue with the model)", checks.Load(), steps.Load())
}

func checkErr(rt *seqT, op string, err, want error) {
	rt.Helper()
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		rt.Fatalf("%s = %v, want %v", op, err, want)
	}
}

// modelWork stays one function: it follows one job from its claim through its outcome to the
// worker's events, each step using what the ones before it saw, in the order they happen.
//
// modelWork runs one job of q, if the model says one is runnable, with a handler that ends as
// outcome says, and checks the worker's events against the model.
func modelWork(rt *seqT, q *Queue[int], m *queueModel, outcome string) {
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
func checkModel(rt *seqT, q *Queue[int], m *queueModel) {
	rt.Helper()
	ctx := context.Background()
	place := checkModelListing(ctx, rt, q, m)
	checkModelLookups(ctx, rt, q, m, place)
	checkModelStats(ctx, rt, q, m)
}

// checkModelListing compares the listing of every job with the model's: running ones, then
// waiting ones in run order with their places, then finished ones. It returns each job's
// expected place (0 for a running job).
func checkModelListing(ctx context.Context, rt *seqT, q *Queue[int], m *queueModel) map[ulid.ULID]int {
	rt.Helper()

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
	return place
}

// checkModelLookups looks up a few jobs the model knows (deleted ones included) and compares
// each with the model.
func checkModelLookups(ctx context.Context, rt *seqT, q *Queue[int], m *queueModel, place map[ulid.ULID]int) {
	rt.Helper()
	for range min(2, len(m.known)) {
		id := draw(rt, "lookup", m.known...)
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
}

// checkModelStats compares the queue's counts with the model's.
func checkModelStats(ctx context.Context, rt *seqT, q *Queue[int], m *queueModel) {
	rt.Helper()
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

// seqT drives one sequence of the model test: it draws every choice from a generator seeded with
// seed, so that the seed alone replays the sequence, and keeps the steps and their draws for the
// report of a failure. Fatalf ends the sequence.
type seqT struct {
	seed    uint64
	rng     *rand.Rand
	steps   []string // one line per step: its action and draws
	failure string
}

// seqFailed is what Fatalf panics with, to end a sequence from any depth of the test goroutine.
type seqFailed struct{}

func newSeqT(seed uint64) *seqT {
	return &seqT{seed: seed, rng: rand.New(rand.NewPCG(seed, seed)), steps: []string{"check"}}
}

// Helper is there so that the model's functions read as test helpers.
func (s *seqT) Helper() {}

// Fatalf records the failure and ends the sequence.
func (s *seqT) Fatalf(format string, args ...any) {
	s.failure = fmt.Sprintf(format, args...)
	panic(seqFailed{})
}

// note adds a draw to the current step.
func (s *seqT) note(name string, v any) {
	s.steps[len(s.steps)-1] += fmt.Sprintf(" %s=%v", name, v)
}

// draw returns one of options, chosen at random.
func draw[V any](s *seqT, name string, options ...V) V {
	v := options[s.rng.IntN(len(options))]
	s.note(name, v)
	return v
}

// drawInt returns an int in [lo, hi], chosen at random.
func drawInt(s *seqT, name string, lo, hi int) int {
	v := lo + s.rng.IntN(hi-lo+1)
	s.note(name, v)
	return v
}

// repeat runs the check actions[""] once, then a random number of steps (1 to
// 2·modelStepsAverage-1), each a random one of the other actions followed by the check.
func (s *seqT) repeat(actions map[string]func(*seqT)) {
	check := actions[""]
	var names []string
	for name := range actions {
		if name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	check(s)
	for range 1 + s.rng.IntN(2*modelStepsAverage-1) {
		name := names[s.rng.IntN(len(names))]
		s.steps = append(s.steps, name)
		actions[name](s)
		s.steps = append(s.steps, "check")
		check(s)
	}
}

// runSequences runs sequence with PGQUEUE_MODEL_SEQUENCES seeds (default modelSequencesDefault),
// drawn at random, or with the one seed PGQUEUE_MODEL_SEED names. A failure reports the seed,
// the steps up to the failing one, and how to replay it.
func runSequences(t *testing.T, sequence func(*seqT)) {
	t.Helper()
	var seeds []uint64
	if v := os.Getenv("PGQUEUE_MODEL_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("PGQUEUE_MODEL_SEED=%q: %v", v, err)
		}
		seeds = append(seeds, seed)
	} else {
		n := modelSequencesDefault
		if v := os.Getenv("PGQUEUE_MODEL_SEQUENCES"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				t.Fatalf("PGQUEUE_MODEL_SEQUENCES=%q: want a positive number", v)
			}
		}
		for range n {
			seeds = append(seeds, rand.Uint64())
		}
	}
	for _, seed := range seeds {
		if s := runSequence(seed, sequence); s != nil {
			t.Fatalf("sequence of seed %d failed: %s\nits steps (the last one failed):\n  %s\nreplay it with PGQUEUE_MODEL_SEED=%d go test -count=1 -run '%s$' -v .",
				seed, s.failure, strings.Join(s.steps, "\n  "), seed, t.Name())
		}
	}
}

// runSequence runs one sequence; it returns its seqT if the sequence failed, nil if it passed.
func runSequence(seed uint64, sequence func(*seqT)) (failed *seqT) {
	s := newSeqT(seed)
	defer func() {
		if v := recover(); v != nil {
			if _, ok := v.(seqFailed); !ok {
				s.failure = fmt.Sprintf("panic: %v\n%s", v, debug.Stack())
			}
			failed = s
		}
	}()
	sequence(s)
	return nil
}

// TestModelDriverReplays checks that a seed replays its sequence, draws and failure included.
func TestModelDriverReplays(t *testing.T) {
	t.Parallel()
	sequence := func(s *seqT) {
		n := 0
		s.repeat(map[string]func(*seqT){
			"a": func(s *seqT) { n += drawInt(s, "x", 0, 9) },
			"b": func(s *seqT) { n += draw(s, "y", 1, 2) },
			"": func(s *seqT) {
				if n > 20 {
					s.Fatalf("n = %d", n)
				}
			},
		})
	}
	for seed := range uint64(20) {
		first, again := runSequence(seed, sequence), runSequence(seed, sequence)
		if (first == nil) != (again == nil) {
			t.Fatalf("seed %d: failed once, passed once", seed)
		}
		if first != nil && (first.failure != again.failure || !slices.Equal(first.steps, again.steps)) {
			t.Fatalf("seed %d: two runs differ:\n%s %q\n%s %q", seed, first.failure, first.steps, again.failure, again.steps)
		}
		if first != nil && !strings.HasPrefix(first.steps[len(first.steps)-1], "check") {
			t.Fatalf("seed %d: the failing step is %q, want the check", seed, first.steps[len(first.steps)-1])
		}
	}
}
