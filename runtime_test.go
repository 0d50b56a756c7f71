package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
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
