package pgqueue

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// The rate limits, checked on every window of the start times a user sees: each job's
// attempted_at (its row, kept by Retention) and its handler's start (time.Now() in the handler),
// besides the starts the limiter logged. Several clients, each on a pool of its own as separate
// processes would be, drain a backlog under the limits.

// rateDrain is one drain of TestRateEveryWindow: the queue's limits, and the jobs enqueued, perKey
// of each of keys ("" for none), whose weights take turns through weights (none: 1).
type rateDrain struct {
	limits  Limits
	keys    []string
	perKey  int
	weights []int
}

// Several clients drain a backlog under a Rate (200 per second), and under a Rate and a KeyRate
// with weights (100 and 15 per 500 ms, jobs weighing 1 to 3). No window of Rate.Per holds starts
// weighing more than Rate.Starts, and no window of KeyRate.Per starts of one key weighing more
// than KeyRate.Starts — every window, wherever it begins — by the starts logged for the limit, by
// the jobs' attempted_at, which is the logged start, and by their handlers' starts (each handler
// reads the clock as it starts): a start holds its place until its worker has reported that the
// handler started. Every start logged is one job's attempted_at; the limits are reached, and
// each job runs once.
func TestRateEveryWindow(t *testing.T) {
	t.Parallel()
	for name, d := range map[string]rateDrain{
		"queue": {limits: Limits{Rate: Rate{Starts: 200, Per: time.Second}}, keys: []string{""}, perKey: 700},
		"keys": {limits: Limits{Rate: Rate{Starts: 100, Per: 500 * time.Millisecond},
			KeyRate: Rate{Starts: 15, Per: 500 * time.Millisecond}},
			keys: []string{"k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"}, perKey: 40, weights: []int{1, 2, 3}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d.check(t)
		})
	}
}

// check runs the drain and checks its windows.
func (d rateDrain) check(t *testing.T) {
	b := setup(t)
	logged := recordStarts(t, b)
	drained := d.drain(t, b, d.enqueue(t, b))
	w := newDrainWindows(t, drained, logged())
	var figures []string
	for _, c := range []struct {
		name string
		*rateWindows
	}{{"logged start", &w.logged}, {"attempted_at", &w.attempted}, {"handler start", &w.handler}} {
		most, keyMost, key := c.busiest(d.limits)
		figures = append(figures, fmt.Sprintf("%s %d (key %s %d)", c.name, most, key, keyMost))
		if most > d.limits.Rate.Starts {
			t.Errorf("by %s, starts weighing %d within %s, more than Rate.Starts %d", c.name, most,
				d.limits.Rate.Per, d.limits.Rate.Starts)
		}
		if keyMost > d.limits.KeyRate.Starts {
			t.Errorf("by %s, starts of key %s weighing %d within %s, more than KeyRate.Starts %d", c.name, key,
				keyMost, d.limits.KeyRate.Per, d.limits.KeyRate.Starts)
		}
	}
	// A window is full once the next job does not fit: the limits were reached.
	heaviest := slices.Max(append([]int{1}, d.weights...))
	if most, keyMost, _ := w.logged.busiest(d.limits); most <= d.limits.Rate.Starts-heaviest ||
		d.limits.KeyRate != (Rate{}) && keyMost <= d.limits.KeyRate.Starts-heaviest {
		t.Errorf("logged starts weighing at most %d (%d of one key) within a window: the limits were never reached",
			most, keyMost)
	}
	t.Logf("%d jobs; the busiest windows (Rate.Starts %d, KeyRate.Starts %d) by %v; handler start after attempted_at: at most %s",
		len(drained), d.limits.Rate.Starts, d.limits.KeyRate.Starts, figures, w.lag)
}

// drain runs three clients, each on a pool of its own, whose handlers record their starts, until
// the jobs enqueued (jobs of them) are done, and returns the jobs, each of which ran once.
func (d rateDrain) drain(t *testing.T, b *bundle, jobs int) []drainedJob {
	started := &handlerStarts{at: map[ulid.ULID]time.Time{}}
	for range 3 {
		c, err := NewClient(newPool(t, b.schema, 8), &Config{Logger: quietLogger(t),
			Retention: Retention{Completed: KeepForever}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		startWorker(t, must(newQueue[int](t, c, "rated").NewWorker(func(ctx context.Context, job *Job[int]) error {
			started.record(job.ID, time.Now())
			return nil
		}, &WorkerOptions{Concurrency: 30, PollInterval: time.Hour})))
	}
	waitFor(t, 90*time.Second, "every job done", func() bool {
		return started.len() >= jobs && b.count("queue = 'rated' AND status = 'completed'") == jobs
	})
	drained := drainedJobs(t, b, started)
	if len(drained) != jobs || started.len() != jobs || started.again > 0 {
		t.Fatalf("%d jobs completed, %d handlers started (%d again), for %d jobs", len(drained), started.len(),
			started.again, jobs)
	}
	for _, j := range drained {
		if j.attempt != 1 {
			t.Fatalf("a job of key %q ran %d times", j.key, j.attempt)
		}
	}
	return drained
}

// drainWindows are a drain's starts by each clock: logged for the limits, the jobs' attempted_at,
// and their handlers' starts; and the longest a handler started after its job's attempted_at.
type drainWindows struct {
	logged, attempted, handler rateWindows
	lag                        time.Duration
}

// newDrainWindows sorts the starts of drained and those logged (by key, "" for none) by clock, and
// checks that each job's attempted_at is a start logged with its weight, and each start logged
// one job's attempted_at.
func newDrainWindows(t *testing.T, drained []drainedJob, logged map[string][]loggedStart) *drainWindows {
	w := &drainWindows{logged: rateWindows{byKey: logged}, attempted: newRateWindows(), handler: newRateWindows()}
	for key, s := range logged {
		w.logged.all = append(w.logged.all, s...)
		if key == "" {
			delete(logged, key)
		}
	}
	unmatched := map[string]int{} // by time (µs) and weight: logged starts less attempts
	for _, s := range w.logged.all {
		unmatched[fmt.Sprint(s.at.UnixMicro(), s.weight)]++
	}
	for _, j := range drained {
		unmatched[fmt.Sprint(j.attempted.UnixMicro(), j.weight)]--
		w.attempted.add(j.key, loggedStart{at: j.attempted, weight: j.weight})
		w.handler.add(j.key, loggedStart{at: j.handler, weight: j.weight})
		w.lag = max(w.lag, j.handler.Sub(j.attempted))
	}
	for s, n := range unmatched {
		if n != 0 {
			t.Errorf("start (µs, weight) %s: %d more logged than jobs' attempted_at", s, n)
			break
		}
	}
	return w
}

// enqueue enqueues the drain's jobs, and returns how many.
func (d rateDrain) enqueue(t *testing.T, b *bundle) int {
	q := newQueue[int](t, b.client, "rated")
	if err := q.SetLimits(t.Context(), d.limits); err != nil {
		t.Fatal(err)
	}
	jobs := 0
	for _, key := range d.keys {
		for i := range d.perKey {
			w := 1
			if len(d.weights) > 0 {
				w = d.weights[i%len(d.weights)]
			}
			if _, err := q.Enqueue(t.Context(), i, &EnqueueOptions{Key: key, Weight: w}); err != nil {
				t.Fatal(err)
			}
			jobs++
		}
	}
	return jobs
}

// quietLogger writes warnings and errors to the test's output: a line for every job would slow
// the handlers' starts the test looks at.
func quietLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// handlerStarts keeps when each job's handler started, by this machine's clock, and counts the
// handlers that started for a job whose handler had started before.
type handlerStarts struct {
	mu    sync.Mutex
	at    map[ulid.ULID]time.Time
	again int
}

// record notes that the handler of job id started at now.
func (h *handlerStarts) record(id ulid.ULID, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.at[id]; ok {
		h.again++
		return
	}
	h.at[id] = now
}

func (h *handlerStarts) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.at)
}

// drainedJob is a job of a rate drain as its row ended: its key, weight and attempts, and when its
// attempt started, by its row (attempted_at, the database's clock) and by its handler.
type drainedJob struct {
	key       string
	weight    int
	attempt   int
	attempted time.Time
	handler   time.Time
}

// drainedJobs reads the completed jobs of the queue "rated" from their rows, with their
// handlers' starts.
func drainedJobs(t *testing.T, b *bundle, started *handlerStarts) []drainedJob {
	rows, err := b.pool.Query(t.Context(), `SELECT id, coalesce(key, ''), greatest(weight, 1), attempt, attempted_at
		FROM pgqueue_jobs WHERE queue = 'rated' AND status = 'completed'`)
	if err != nil {
		t.Fatal(err)
	}
	started.mu.Lock()
	defer started.mu.Unlock()
	var jobs []drainedJob
	var id [16]byte
	var j drainedJob
	if _, err := pgx.ForEachRow(rows, []any{&id, &j.key, &j.weight, &j.attempt, &j.attempted}, func() error {
		at, ok := started.at[ulid.ULID(id)]
		if !ok {
			return fmt.Errorf("job %s completed without its handler starting", ulid.ULID(id))
		}
		j.handler = at
		jobs = append(jobs, j)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return jobs
}

// rateWindows are the starts of a drain by one clock: the queue's, and each key's.
type rateWindows struct {
	all   []loggedStart
	byKey map[string][]loggedStart
}

func newRateWindows() rateWindows { return rateWindows{byKey: map[string][]loggedStart{}} }

func (w *rateWindows) add(key string, s loggedStart) {
	w.all = append(w.all, s)
	if key != "" {
		w.byKey[key] = append(w.byKey[key], s)
	}
}

// busiest returns the weight of the heaviest window of Rate.Per of the queue's starts, and of
// KeyRate.Per of one key's (and the key), over every window (busiestWindow); 0 for a rate not set.
func (w *rateWindows) busiest(l Limits) (most, keyMost int, key string) {
	byTime := func(x, y loggedStart) int { return x.at.Compare(y.at) }
	if l.Rate != (Rate{}) {
		slices.SortFunc(w.all, byTime)
		most = busiestWindow(w.all, l.Rate.Per)
	}
	if l.KeyRate != (Rate{}) {
		for k, s := range w.byKey {
			slices.SortFunc(s, byTime)
			if n := busiestWindow(s, l.KeyRate.Per); n > keyMost {
				keyMost, key = n, k
			}
		}
	}
	return most, keyMost, key
}
