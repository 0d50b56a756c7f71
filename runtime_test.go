package pgqueue

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

func TestClientRunChecksItsWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := func(context.Context, *Job[int]) error { return nil }
	emails := newQueue[int](t, b.client, "emails")
	w := must(emails.NewWorker(h, nil))
	again := must(emails.NewWorker(h, nil))
	other := must(newQueue[int](t, b.newClient(), "other").NewWorker(h, nil))
	var nilWorker *Worker[int]
	for name, workers := range map[string][]AnyWorker{
		"none":                  nil,
		"a nil worker":          {nilWorker},
		"two workers one queue": {w, again},
		"another client's":      {w, other},
	} {
		if err := b.client.Run(t.Context(), workers...); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("Run with %s = %v, want ErrInvalidOption", name, err)
		}
	}
	if w.spec.running.Load() {
		t.Fatal("a refused Run left the worker marked running")
	}

	stop := runWorkers(t, b.client, w)
	waitFor(t, 10*time.Second, "the worker to run", func() bool { return w.spec.running.Load() })
	reports := must(newQueue[int](t, b.client, "reports").NewWorker(h, nil))
	if err := b.client.Run(t.Context(), reports, w); !errors.Is(err, ErrWorkerRunning) {
		t.Errorf("Run with a running worker = %v, want ErrWorkerRunning", err)
	}
	if reports.spec.running.Load() {
		t.Fatal("a refused Run left the other worker marked running")
	}
	stop()

	c := b.newClient()
	late := must(newQueue[int](t, c, "late").NewWorker(h, nil))
	_ = c.Close()
	if err := c.Run(t.Context(), late); !errors.Is(err, ErrClosed) {
		t.Errorf("Run after Close = %v, want ErrClosed", err)
	}
}

// One Run serves queues of different payload types, each within its own Concurrency, skips a
// paused queue until it is resumed, and reports each queue's events to its own worker.
func TestClientRunServesManyQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const queues, jobs, slots = 12, 30, 2
	tracker := newConcurrencyTracker()
	ev := newEvents()
	ints, words, workers := manyQueuesWorkers(t, b, queues, slots, ev, tracker)

	paused := ints[0]
	if err := paused.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, q := range ints {
		if _, err := q.EnqueueMany(t.Context(), make([]int, jobs), nil); err != nil {
			t.Fatal(err)
		}
	}
	runWorkers(t, b.client, workers...)
	if _, err := words.Enqueue(t.Context(), "hello", nil); err != nil { // after Run: a wake-up
		t.Fatal(err)
	}

	completed := map[string]int{}
	countCompleted(t, ev, (queues-1)*jobs+1, completed)
	if completed[paused.Name()] != 0 || b.count("queue = $1", paused.Name()) != jobs {
		t.Fatalf("the paused queue ran %d jobs", completed[paused.Name()])
	}
	if err := paused.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	countCompleted(t, ev, jobs, completed)
	for _, q := range ints {
		if completed[q.Name()] != jobs {
			t.Errorf("queue %s: %d jobs completed, want %d", q.Name(), completed[q.Name()], jobs)
		}
	}
	if completed["words"] != 1 {
		t.Errorf("queue words: %d jobs completed, want 1", completed["words"])
	}
	tracker.checkAtMost(t, func(queue string) int { return map[bool]int{true: 1, false: slots}[queue == "words"] })
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs left in the table", n)
	}
}

// manyQueuesWorkers makes queues queues of ints ("ints-0", …), each with a worker of
// Concurrency slots, and a queue "words" of strings with a worker of Concurrency 1 that fails
// any payload but "hello"; every handler goes through tracker, and every worker reports to ev.
func manyQueuesWorkers(t testing.TB, b *bundle, queues, slots int, ev *events, tracker *concurrencyTracker) ([]*Queue[int], *Queue[string], []AnyWorker) {
	t.Helper()
	var workers []AnyWorker
	var ints []*Queue[int]
	for i := range queues {
		q := newQueue[int](t, b.client, fmt.Sprintf("ints-%d", i))
		ints = append(ints, q)
		workers = append(workers, must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
			defer tracker.enter(job.Queue)()
			return nil
		}, &WorkerOptions{Concurrency: slots, OnEvent: ev.on, PollInterval: noPoll})))
	}
	words := newQueue[string](t, b.client, "words")
	workers = append(workers, must(words.NewWorker(func(ctx context.Context, job *Job[string]) error {
		defer tracker.enter(job.Queue)()
		if job.Payload != "hello" {
			return Permanent(fmt.Errorf("payload %q", job.Payload))
		}
		return nil
	}, &WorkerOptions{Concurrency: 1, OnEvent: ev.on, PollInterval: noPoll})))
	return ints, words, workers
}

// countCompleted waits for n EventCompleted events of ev and adds each to completed, by queue.
func countCompleted(t testing.TB, ev *events, n int, completed map[string]int) {
	t.Helper()
	for range n {
		e := ev.next(t, EventCompleted)
		completed[e.Queue]++
	}
}

// concurrencyTracker records, queue by queue, the most handlers that ran at once.
type concurrencyTracker struct {
	mu      sync.Mutex
	running map[string]int
	most    map[string]int
}

func newConcurrencyTracker() *concurrencyTracker {
	return &concurrencyTracker{running: map[string]int{}, most: map[string]int{}}
}

// enter counts a handler of queue in and holds it for a millisecond; the function it returns
// counts the handler out.
func (c *concurrencyTracker) enter(queue string) func() {
	c.mu.Lock()
	c.running[queue]++
	c.most[queue] = max(c.most[queue], c.running[queue])
	c.mu.Unlock()
	time.Sleep(time.Millisecond)
	return func() { c.mu.Lock(); c.running[queue]--; c.mu.Unlock() }
}

// checkAtMost checks that no queue ran more handlers at once than limit says.
func (c *concurrencyTracker) checkAtMost(t testing.TB, limit func(queue string) int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for queue, n := range c.most {
		if limit := limit(queue); n > limit {
			t.Errorf("queue %s ran %d jobs at once, more than its Concurrency %d", queue, n, limit)
		}
	}
}

// gatedQueue is a queue of jobs 0 to n-1 whose handlers return at once for the first quick
// jobs and then block until gate is closed (or their context ends), served with Concurrency 2:
// once the runtime takes its handlers for quick ones it claims ahead of its free slots, and the
// blocked handlers keep the jobs claimed ahead waiting.
type gatedQueue struct {
	q       *Queue[int]
	w       *Worker[int]
	ev      *events
	tracker *concurrencyTracker
	gate    chan struct{}

	mu      sync.Mutex
	ran     map[ulid.ULID]int // handler calls by job
	blocked int               // handlers waiting at the gate
	run     *queueRun         // the queue in the runtime serving it, from a handler's attempt
}

const gatedQuick = 20

func newGatedQueue(t *testing.T, b *bundle, n int, opts WorkerOptions) *gatedQueue {
	t.Helper()
	g := &gatedQueue{q: newQueue[int](t, b.client, "gated"), ev: newEvents(), tracker: newConcurrencyTracker(),
		gate: make(chan struct{}), ran: map[ulid.ULID]int{}}
	payloads := make([]int, n)
	for i := range payloads {
		payloads[i] = i
	}
	if _, err := g.q.EnqueueMany(t.Context(), payloads, nil); err != nil {
		t.Fatal(err)
	}
	opts.Concurrency, opts.OnEvent, opts.PollInterval = 2, g.ev.on, noPoll
	g.w = must(g.q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		defer g.tracker.enter(job.Queue)()
		g.mu.Lock()
		g.ran[job.ID]++
		g.run = job.held.q
		g.mu.Unlock()
		if job.Payload < gatedQuick {
			return nil
		}
		g.mu.Lock()
		g.blocked++
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.blocked--
			g.mu.Unlock()
		}()
		select {
		case <-g.gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, &opts))
	return g
}

// waitAhead waits until two handlers block, then has the runtime take its handlers for quick
// ones (their mean run time is its estimate: the quick jobs' own depends on the machine) and
// waits until it has claimed at least two jobs ahead of them, with no claim round in flight.
// Then it has the runtime take its handlers for slow ones, so that it claims no more, and
// returns the ids of the jobs claimed ahead, as the runtime holds them.
func (g *gatedQueue) waitAhead(t *testing.T, b *bundle) []ulid.ULID {
	t.Helper()
	var q *queueRun
	waitFor(t, 20*time.Second, "2 blocked handlers", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		q = g.run
		return g.blocked == 2
	})
	set := q.rt.set
	set.mu.Lock()
	set.queues[q.index].runMean = time.Nanosecond
	set.aheadWait = time.Hour // they wait for the test, not for aheadWaitMax
	set.mu.Unlock()
	q.wantClaim.Store(true)
	q.rt.w.claim.signal()
	waitFor(t, 20*time.Second, "2 jobs claimed ahead of 2 blocked handlers", func() bool {
		set.mu.Lock()
		defer set.mu.Unlock()
		qs := &set.queues[q.index]
		if len(qs.waiting) < 2 {
			return false
		}
		qs.runMean = time.Hour
		return true
	})
	// Claims still in flight come back and add to the line, and the quick jobs' outcomes may
	// still be on their way to the table; then the line stands still, and the table shows the 2
	// handlers' jobs and those claimed ahead running.
	var ahead []ulid.ULID
	waitFor(t, 20*time.Second, "the line of jobs claimed ahead to stand still", func() bool {
		set.mu.Lock()
		ahead = ahead[:0]
		for _, a := range set.queues[q.index].waiting {
			ahead = append(ahead, a.id)
		}
		set.mu.Unlock()
		return b.count("status = 'running'") == 2+len(ahead)
	})
	if len(ahead) > 4 {
		t.Fatalf("%d jobs claimed ahead of 2 slots, want at most 4", len(ahead))
	}
	return ahead
}

// A runtime whose handlers return sooner than a claim comes back claims ahead of its free slots:
// the jobs claimed ahead wait for a slot and never make more handlers run than Concurrency; a
// waiting job that is cancelled never runs; the other starts when a slot frees.
func TestClaimAheadWaitsForASlot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const jobs = gatedQuick + 10
	g := newGatedQueue(t, b, jobs, WorkerOptions{})
	runWorkers(t, b.client, g.w)
	ahead := g.waitAhead(t, b)
	if err := g.q.Cancel(t.Context(), ahead[0]); err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	q := g.run
	g.mu.Unlock()
	waitFor(t, 2*time.Second, "the cancelled job to leave the line", func() bool {
		set := q.rt.set
		set.mu.Lock()
		defer set.mu.Unlock()
		return !slices.ContainsFunc(set.queues[q.index].waiting, func(a *attempt) bool { return a.id == ahead[0] })
	})
	close(g.gate)
	for range jobs - 1 {
		g.ev.next(t, EventCompleted)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ran[ahead[0]] != 0 {
		t.Errorf("the cancelled job claimed ahead ran %d times", g.ran[ahead[0]])
	}
	for _, id := range ahead[1:] {
		if g.ran[id] != 1 {
			t.Errorf("job %s, claimed ahead, ran %d times, want 1", id, g.ran[id])
		}
	}
	g.tracker.checkAtMost(t, func(string) int { return 2 })
	if n := b.count("status = 'cancelled' AND id = $1", ahead[0]); n != 1 {
		t.Errorf("the cancelled job's row: %d rows cancelled", n)
	}
	if n := b.count("true"); n != 1 {
		t.Errorf("%d jobs left, want the cancelled one", n)
	}
}

// Jobs claimed ahead and still waiting when Run ends go back to the queue unstarted, their
// attempts uncharged, as the jobs of the handlers that shutdown stopped do; Run returns once its
// handler goroutines have ended.
func TestClaimAheadHandedBackAtShutdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const jobs = gatedQuick + 10
	g := newGatedQueue(t, b, jobs, WorkerOptions{ShutdownTimeout: 100 * time.Millisecond})
	stop := runWorkers(t, b.client, g.w)
	ahead := g.waitAhead(t, b)
	stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	if n := g.run.rt.handlers.alive.Load(); n != 0 {
		t.Errorf("%d handler goroutines alive after Run returned", n)
	}
	for _, id := range ahead {
		if g.ran[id] != 0 {
			t.Errorf("job %s, waiting at shutdown, ran", ulid.ULID(id))
		}
	}
	if n := b.count("status = 'available' AND attempt = 0"); n != jobs-gatedQuick {
		t.Errorf("%d jobs back in line uncharged, want %d", n, jobs-gatedQuick)
	}
	if n := b.count("true"); n != jobs-gatedQuick {
		t.Errorf("%d jobs left, want %d", n, jobs-gatedQuick)
	}
	handedBack := 0
	for len(g.ev.ch) > 0 {
		if ev := <-g.ev.ch; ev.Kind == EventHandedBack {
			handedBack++
		}
	}
	if handedBack != 2+len(ahead) {
		t.Errorf("%d jobs reported handed back, want %d (2 stopped, %d waiting)", handedBack, 2+len(ahead), len(ahead))
	}
}

// With Concurrency 1, jobs claimed ahead start in the queue's order, one after another.
func TestClaimAheadKeepsOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "ordered")
	const jobs = 300
	if _, err := q.EnqueueMany(t.Context(), make([]int, jobs), nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []ulid.ULID
	done := make(chan struct{})
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		mu.Lock()
		defer mu.Unlock()
		if order = append(order, job.ID); len(order) == jobs {
			close(done)
		}
		return nil
	}, &WorkerOptions{Concurrency: 1, PollInterval: noPoll}))
	runWorkers(t, b.client, w)
	receive(t, done, 30*time.Second, "every job to start")
	mu.Lock()
	defer mu.Unlock()
	if !slices.IsSortedFunc(order, ulid.ULID.Compare) {
		t.Fatal("jobs started out of their queue's order")
	}
}

// A cancellation message names a job, not an attempt, and may come late: after the job was
// cancelled, retried and claimed again here (sent by hand here, while the job runs under its
// claim). The attempt that holds the job goes on; it was cancelled, and reported so, though its
// row was running under its token.
func TestLateCancelMessageSparesTheAttemptHoldingTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "late-cancel")
	ev := newEvents()
	release := make(chan struct{})
	cause := make(chan error, 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			cause <- context.Cause(ctx)
			return ctx.Err()
		}
	}, &WorkerOptions{OnEvent: ev.on, PollInterval: noPoll}))
	startWorker(t, w)
	waitListening(t, b.client, 1)
	job := must(q.Enqueue(t.Context(), 1, nil))
	if e := ev.nextOf(t, job.ID); e.Kind != EventStarted {
		t.Fatalf("event %s, want started", e.Kind)
	}
	b.exec("SELECT pgqueue_notify($1)", formatMessage(msgCancelled, q.Name(), []ulid.ULID{job.ID}))
	for quiet := time.After(time.Second); quiet != nil; {
		select {
		case err := <-cause:
			t.Fatalf("the handler's context ended with %v", err)
		case e := <-ev.ch:
			if e.JobID == job.ID {
				t.Fatalf("event %s of the job, want none", e.Kind)
			}
		case <-quiet:
			quiet = nil
		}
	}
	close(release)
	if e := ev.nextOf(t, job.ID); e.Kind != EventCompleted || e.Attempt != 1 {
		t.Fatalf("event %s of attempt %d, want the first completed", e.Kind, e.Attempt)
	}
}

// A handler that calls runtime.Goexit (as t.FailNow does) instead of returning ends its attempt
// as a failure: the job is retried, and its slot goes to the next job. The goroutine it ended
// ran the attempt's bookkeeping in its deferred calls; without it the job stayed running, its
// lease extended for ever, and its slot taken.
func TestHandlerGoexit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "goexit")
	ev := newEvents()
	var runs atomic.Int32
	startWorker(t, must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		if job.Payload == 1 && runs.Add(1) == 1 {
			goruntime.Goexit()
		}
		return nil
	}, &WorkerOptions{Concurrency: 1, OnEvent: ev.on})))
	ids, err := q.EnqueueMany(t.Context(), []int{1, 2}, &EnqueueOptions{RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	retrying := ev.next(t, EventRetrying)
	if retrying.JobID != ids[0] || retrying.Err == nil || !strings.Contains(retrying.Err.Error(), "Goexit") {
		t.Fatalf("the first attempt ended %+v, want job %s retrying with the Goexit error", retrying, ids[0])
	}
	ev.outcomes(t, map[ulid.ULID]EventKind{ids[0]: EventCompleted, ids[1]: EventCompleted})
}
