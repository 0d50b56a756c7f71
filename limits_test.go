package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Limits are stored per queue, read back, shown in Stats, and refused when out of range.
func TestLimitsSetAndRead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "limits")
	if l, err := q.Limits(ctx); err != nil || l != (Limits{}) {
		t.Fatalf("Limits of a new queue = %+v, %v; want none", l, err)
	}
	for _, bad := range []Limits{{MaxRunning: -1}, {KeyMaxRunning: -2}, {MaxRunning: MaxLimit + 1}} {
		if err := q.SetLimits(ctx, bad); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("SetLimits(%+v) = %v, want ErrInvalidOption", bad, err)
		}
	}
	want := Limits{MaxRunning: 7, KeyMaxRunning: 2}
	if err := q.SetLimits(ctx, want); err != nil {
		t.Fatal(err)
	}
	if l, err := q.Limits(ctx); err != nil || l != want {
		t.Fatalf("Limits = %+v, %v; want %+v", l, err, want)
	}
	b.inTx(false, func(tx pgx.Tx) error { return q.SetLimitsTx(ctx, tx, Limits{MaxRunning: 1}) })
	if l, _ := q.Limits(ctx); l != want {
		t.Fatalf("after a rolled-back SetLimitsTx, Limits = %+v, want %+v", l, want)
	}
	st, err := q.Stats(ctx)
	if err != nil || st.Limits != want {
		t.Fatalf("Stats.Limits = %+v (%v), want %+v", st.Limits, err, want)
	}
	if err := q.SetLimits(ctx, Limits{}); err != nil {
		t.Fatal(err)
	}
	if l, _ := q.Limits(ctx); l != (Limits{}) {
		t.Fatalf("after SetLimits(Limits{}), Limits = %+v", l)
	}
}

// concurrency tracks how many handlers run at once, in all and per key.
type concurrency struct {
	mu       sync.Mutex
	now, max int
	keyNow   map[string]int
	keyMax   map[string]int
	starts   []string // keys, in start order
}

func newConcurrency() *concurrency {
	return &concurrency{keyNow: map[string]int{}, keyMax: map[string]int{}}
}

func (c *concurrency) enter(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now++
	c.max = max(c.max, c.now)
	c.keyNow[key]++
	c.keyMax[key] = max(c.keyMax[key], c.keyNow[key])
	c.starts = append(c.starts, key)
}

func (c *concurrency) leave(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now--
	c.keyNow[key]--
}

// holding returns a handler that counts itself in c while it runs, which is until release is
// closed or its context ends.
func (c *concurrency) holding(release <-chan struct{}) Handler[int] {
	return func(ctx context.Context, _ *Job[int]) error {
		c.enter("")
		defer c.leave("")
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}
}

// limitedQueue returns b's client's queue of that name, with limits set and n jobs enqueued.
func limitedQueue(t *testing.T, b *bundle, name string, limits Limits, n int) *Queue[int] {
	t.Helper()
	q := newQueue[int](t, b.client, name)
	if err := q.SetLimits(t.Context(), limits); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		if _, err := q.EnqueueMany(t.Context(), make([]int, n), nil); err != nil {
			t.Fatal(err)
		}
	}
	return q
}

// A queue's MaxRunning holds over several clients whose Concurrency adds up to far more, and
// the queue still drains.
func TestMaxRunningAcrossClients(t *testing.T) {
	t.Parallel()
	b := setup(t)
	limitedQueue(t, b, "global", Limits{MaxRunning: 3}, 60)
	c := newConcurrency()
	var done atomic.Int32
	for range 3 {
		qc := newQueue[int](t, b.newClient(), "global")
		w := must(qc.NewWorker(func(ctx context.Context, job *Job[int]) error {
			c.enter("")
			time.Sleep(10 * time.Millisecond)
			c.leave("")
			done.Add(1)
			return nil
		}, &WorkerOptions{Concurrency: 5, PollInterval: 200 * time.Millisecond}))
		startWorker(t, w)
	}
	waitFor(t, 30*time.Second, "60 jobs done", func() bool { return done.Load() == 60 })
	if c.max > 3 {
		t.Fatalf("%d handlers ran at once, more than MaxRunning 3", c.max)
	}
	if c.max < 2 {
		t.Errorf("at most %d handler ran at once: the limit of 3 was never approached", c.max)
	}
}

// With KeyMaxRunning 1 the jobs of a key start one after another in their order, also when one
// of them fails and waits to retry; keys run beside each other.
func TestKeyFIFOAcrossRetries(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "fifo")
	if err := q.SetLimits(ctx, Limits{KeyMaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	const keys, perKey = 4, 8
	for i := range perKey {
		for k := range keys {
			if _, err := q.Enqueue(ctx, i, &EnqueueOptions{Key: fmt.Sprintf("k%d", k), RetryDelay: 20 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := newConcurrency()
	var mu sync.Mutex
	order := map[string][]int{}
	var done atomic.Int32
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		c.enter(job.Key)
		defer c.leave(job.Key)
		mu.Lock()
		order[job.Key] = append(order[job.Key], job.Payload)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		if job.Payload%3 == 1 && job.Attempt == 1 {
			return errors.New("fails once")
		}
		done.Add(1)
		return nil
	}, &WorkerOptions{Concurrency: 10, PollInterval: 100 * time.Millisecond}))
	startWorker(t, w)
	waitFor(t, 30*time.Second, "every job done", func() bool { return done.Load() == keys*perKey })
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		if c.keyMax[key] != 1 {
			t.Errorf("key %s: %d jobs ran at once", key, c.keyMax[key])
		}
		var want []int
		for i := range perKey {
			want = append(want, i)
			if i%3 == 1 {
				want = append(want, i) // its retry, before the next job of the key
			}
		}
		if fmt.Sprint(order[key]) != fmt.Sprint(want) {
			t.Errorf("key %s started %v, want %v", key, order[key], want)
		}
	}
	if c.max < 2 {
		t.Errorf("keys did not run beside each other (at most %d at once)", c.max)
	}
}

// Claims take turns between keys: a key with a long backlog, enqueued first, does not hold back
// the jobs of keys enqueued after it.
func TestKeysTakeTurns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "turns")
	if err := q.SetLimits(ctx, Limits{KeyMaxRunning: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueMany(ctx, make([]int, 500), &EnqueueOptions{Key: "big"}); err != nil {
		t.Fatal(err)
	}
	const small = 20
	for k := range small {
		if _, err := q.EnqueueMany(ctx, make([]int, 3), &EnqueueOptions{Key: fmt.Sprintf("small%02d", k)}); err != nil {
			t.Fatal(err)
		}
	}
	c := newConcurrency()
	var done atomic.Int32
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		c.enter(job.Key)
		time.Sleep(time.Millisecond)
		c.leave(job.Key)
		done.Add(1)
		return nil
	}, &WorkerOptions{Concurrency: 10}))
	startWorker(t, w)
	waitFor(t, 60*time.Second, "every job done", func() bool { return done.Load() == 500+3*small })
	c.mu.Lock()
	defer c.mu.Unlock()
	big, left := 0, 3*small
	for _, key := range c.starts {
		if key == "big" {
			big++
			continue
		}
		if left--; left == 0 {
			break
		}
	}
	t.Logf("the big key started %d jobs before the small keys had all started", big)
	// Each claim serves up to 10 jobs, key after key from where the last one stopped: the 20
	// small keys are served within a lap of 21 keys, during which the big key gets one turn
	// of at most 10 jobs, plus what the first claim gave it.
	if big > 30 {
		t.Fatalf("the big key started %d jobs before the small keys' 60 had all started", big)
	}
	if c.keyMax["big"] > 10 {
		t.Fatalf("the big key ran %d jobs at once, more than KeyMaxRunning 10", c.keyMax["big"])
	}
}

// Limits set while workers run apply to their next claims, and removing them lets the queue run
// at the workers' own Concurrency again.
func TestLimitsChangeLive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "live")
	c := newConcurrency()
	release := make(chan struct{})
	w := must(q.NewWorker(c.holding(release), &WorkerOptions{Concurrency: 8, PollInterval: time.Hour}))
	startWorker(t, w)
	if err := q.SetLimits(ctx, Limits{MaxRunning: 2}); err != nil {
		t.Fatal(err)
	}
	// Until the worker has heard of the limit (by notification) its claims skip the queue: a
	// limited queue is claimed only by the statement that applies the limits.
	if _, err := q.EnqueueMany(ctx, make([]int, 8), nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "2 jobs running", func() bool { return b.count("status = 'running'") == 2 })
	time.Sleep(200 * time.Millisecond)
	if n := b.count("status = 'running'"); n != 2 {
		t.Fatalf("%d jobs running under MaxRunning 2", n)
	}
	if err := q.SetLimits(ctx, Limits{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "8 jobs running once the limit is gone", func() bool { return b.count("status = 'running'") == 8 })
	close(release)
}

// workUntilDone runs a worker of q whose handler does nothing until n jobs are done.
func workUntilDone(t *testing.T, q *Queue[int], n int32, opts *WorkerOptions) {
	t.Helper()
	var done atomic.Int32
	startWorker(t, must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		done.Add(1)
		return nil
	}, opts)))
	waitFor(t, 30*time.Second, fmt.Sprintf("%d jobs done", n), func() bool { return done.Load() == n })
}

// loggedStart is a start pgqueue logged for a rate limit: when, by the database clock, and the
// weight of the job that started.
type loggedStart struct {
	at     time.Time
	weight int
}

// recordStarts copies every start pgqueue logs for rate limits into pgqueue_test_starts, which
// keeps them after the claims delete them, and returns a function that reads them back, per key
// ("" for none), in order.
func recordStarts(t *testing.T, b *bundle) func() map[string][]loggedStart {
	b.exec(`CREATE TABLE pgqueue_test_starts (key text, started_at timestamptz NOT NULL, weight integer NOT NULL)`)
	b.exec(`CREATE FUNCTION pgqueue_test_record_start() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO pgqueue_test_starts VALUES (NEW.key, NEW.started_at, NEW.weight);
			RETURN NEW;
		END $$`)
	b.exec(`CREATE TRIGGER pgqueue_test_record_start AFTER INSERT ON pgqueue_starts
		FOR EACH ROW EXECUTE FUNCTION pgqueue_test_record_start()`)
	return func() map[string][]loggedStart {
		rows, err := b.pool.Query(context.Background(),
			`SELECT coalesce(key, ''), started_at, weight FROM pgqueue_test_starts ORDER BY started_at`)
		if err != nil {
			t.Fatal(err)
		}
		starts := map[string][]loggedStart{}
		var key string
		var s loggedStart
		if _, err := pgx.ForEachRow(rows, []any{&key, &s.at, &s.weight}, func() error {
			starts[key] = append(starts[key], s)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return starts
	}
}

// busiestWindow returns the largest sum of weights of the starts of sorted that lie within one
// window (t-per, t]: with weights of 1, the most starts.
func busiestWindow(sorted []loggedStart, per time.Duration) int {
	most, from, sum := 0, 0, 0
	for _, s := range sorted {
		sum += s.weight
		for !sorted[from].at.After(s.at.Add(-per)) {
			sum -= sorted[from].weight
			from++
		}
		most = max(most, sum)
	}
	return most
}

// A queue's Rate holds over several clients: no window of Rate.Per holds more starts than
// Rate.Starts, by the database clock the limit is kept by; every start is logged, and the
// queue drains at about the rate (no claim waits for the poll).
func TestRateLimitAcrossClients(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	starts := recordStarts(t, b)
	q := newQueue[int](t, b.client, "rated")
	rate := Rate{Starts: 5, Per: 200 * time.Millisecond}
	if err := q.SetLimits(ctx, Limits{Rate: rate}); err != nil {
		t.Fatal(err)
	}
	const jobs = 30
	if _, err := q.EnqueueMany(ctx, make([]int, jobs), nil); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int32
	began := time.Now()
	for range 2 {
		qc := newQueue[int](t, b.newClient(), "rated")
		startWorker(t, must(qc.NewWorker(func(ctx context.Context, job *Job[int]) error {
			done.Add(1)
			return nil
		}, &WorkerOptions{Concurrency: 10, PollInterval: time.Hour})))
	}
	waitFor(t, 30*time.Second, "every job done", func() bool { return done.Load() == jobs })
	took := time.Since(began)
	logged := starts()[""]
	if len(logged) != jobs {
		t.Fatalf("%d starts logged for %d jobs", len(logged), jobs)
	}
	if most := busiestWindow(logged, rate.Per); most > rate.Starts {
		t.Fatalf("%d starts within %s, more than Rate.Starts %d", most, rate.Per, rate.Starts)
	}
	// 30 starts at 5 per 200 ms take at least 1 s; with the poll an hour away, a drain that is
	// not woken by the window's clock would never finish.
	t.Logf("%d jobs at %d per %s took %s", jobs, rate.Starts, rate.Per, took.Round(time.Millisecond))
	if st, err := q.Stats(ctx); err != nil || st.Limits.Rate != rate {
		t.Fatalf("Stats.Limits.Rate = %+v (%v), want %+v", st.Limits.Rate, err, rate)
	}
}

// KeyRate limits each key on its own: keys start beside each other, each within its rate.
func TestKeyRateLimit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	starts := recordStarts(t, b)
	q := newQueue[int](t, b.client, "keyrated")
	rate := Rate{Starts: 2, Per: 150 * time.Millisecond}
	if err := q.SetLimits(ctx, Limits{KeyRate: rate}); err != nil {
		t.Fatal(err)
	}
	const keys, perKey = 3, 8
	for k := range keys {
		if _, err := q.EnqueueMany(ctx, make([]int, perKey), &EnqueueOptions{Key: fmt.Sprintf("k%d", k)}); err != nil {
			t.Fatal(err)
		}
	}
	workUntilDone(t, q, keys*perKey, &WorkerOptions{Concurrency: 10, PollInterval: time.Hour})
	logged := starts()
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		if len(logged[key]) != perKey {
			t.Fatalf("key %s: %d starts logged, want %d", key, len(logged[key]), perKey)
		}
		if most := busiestWindow(logged[key], rate.Per); most > rate.Starts {
			t.Fatalf("key %s: %d starts within %s, more than KeyRate.Starts %d", key, most, rate.Per, rate.Starts)
		}
	}
	var all []loggedStart
	for _, s := range logged {
		all = append(all, s...)
	}
	slices.SortFunc(all, func(x, y loggedStart) int { return x.at.Compare(y.at) })
	if most := busiestWindow(all, rate.Per); most <= rate.Starts {
		t.Errorf("at most %d starts of all keys within %s: the keys did not start beside each other", most, rate.Per)
	}
}

// A claim does not wait for a transaction that holds the queue's row (an open SetLimitsTx or
// PauseTx): the keyed queue's jobs still start.
func TestLimitedClaimDoesNotWaitForTheQueueRow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "rowheld")
	if err := q.SetLimits(ctx, Limits{KeyMaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT 1 FROM pgqueue_queues WHERE name = 'rowheld' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int32
	startWorker(t, must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		done.Add(1)
		return nil
	}, nil)))
	if _, err := q.EnqueueMany(ctx, make([]int, 3), &EnqueueOptions{Key: "a"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the keyed jobs to run while the queue's row is locked", func() bool { return done.Load() == 3 })
}

// A queue whose MaxRunning held a key's job back starts it as soon as the limit is lifted,
// while another key is full: the claim passes over the full key (once failed with a negative
// LIMIT for it) and the change of limits wakes the worker.
func TestLiftedLimitStartsTheWaitingKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "lifted")
	if err := q.SetLimits(ctx, Limits{MaxRunning: 1, KeyMaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	started := make(chan int, 10)
	release := make(chan struct{})
	startWorker(t, must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		started <- job.Payload
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, &WorkerOptions{Concurrency: 3, PollInterval: time.Hour})))
	defer close(release)
	if _, err := q.Enqueue(ctx, 1, &EnqueueOptions{Key: "k1"}); err != nil {
		t.Fatal(err)
	}
	receive(t, started, 10*time.Second, "the first job")
	for i, o := range []EnqueueOptions{{Key: "k1", Priority: -1}, {Key: "k2", Priority: 5}, {Key: "k1", Priority: 5}} {
		if _, err := q.Enqueue(ctx, i+2, &o); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case p := <-started:
		t.Fatalf("job %d started beyond MaxRunning 1", p)
	case <-time.After(200 * time.Millisecond):
	}
	if err := q.SetLimits(ctx, Limits{KeyMaxRunning: 1}); err != nil {
		t.Fatal(err)
	}
	if p := receive(t, started, 10*time.Second, "key k2's job once MaxRunning is lifted"); p != 3 {
		t.Fatalf("job %d started, want 3 (key k1 is full)", p)
	}
}
