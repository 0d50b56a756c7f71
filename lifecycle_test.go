package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/oklog/ulid/v2"
)

func TestRepeat(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "repeat")
	ev := newEvents()
	var runs atomic.Int32
	var mu sync.Mutex
	seen := map[ulid.ULID]bool{}
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		runs.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if seen[job.ID] {
			return fmt.Errorf("job %s ran twice", job.ID)
		}
		seen[job.ID] = true
		return nil
	}, &WorkerOptions{OnEvent: ev.on, PollInterval: noPoll}))
	first, err := q.Enqueue(t.Context(), 1, &EnqueueOptions{RepeatCount: 3, RepeatEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	prev := first.ID
	for i := range 4 {
		c := ev.next(t, EventCompleted)
		if c.JobID != prev {
			t.Fatalf("run %d was job %s, want %s (the previous run's repeat)", i, c.JobID, prev)
		}
		if i < 3 && c.RepeatedAs == (ulid.ULID{}) {
			t.Fatalf("run %d has no repeat", i)
		}
		if i == 3 && c.RepeatedAs != (ulid.ULID{}) {
			t.Fatalf("the last run was repeated as %s", c.RepeatedAs)
		}
		if c.RepeatedAs != (ulid.ULID{}) && c.RepeatedAs.Compare(c.JobID) <= 0 {
			t.Fatalf("repeat %s does not sort after %s: it must be at the back of the line", c.RepeatedAs, c.JobID)
		}
		prev = c.RepeatedAs
	}
	ev.next(t, EventDrained)
	if n := runs.Load(); n != 4 {
		t.Fatalf("ran %d times, want 1 + 3 repeats", n)
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
}

// With RepeatFixedRate every run is due on the grid of the first run's RunAt and RepeatEvery,
// whatever each run takes; a run that overran its interval skips the times it missed instead of
// making them up.
func TestRepeatFixedRate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "fixedrate")
	const every, runs = 300 * time.Millisecond, 5
	dueAt := make(chan time.Time, runs)
	var n atomic.Int32
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		dueAt <- job.RunAt
		if n.Add(1) == 2 {
			time.Sleep(2*every + every/3) // overruns two times of the grid
		} else {
			time.Sleep(every / 3)
		}
		return nil
	}, &WorkerOptions{PollInterval: noPoll}))
	first, err := q.Enqueue(t.Context(), 1, &EnqueueOptions{RepeatCount: runs - 1, RepeatEvery: every, RepeatFixedRate: true})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	prev := time.Duration(-1)
	for i := range runs {
		offset := receive(t, dueAt, 30*time.Second, "a run").Sub(first.RunAt)
		if offset%every != 0 || offset <= prev {
			t.Fatalf("run %d due %s after the first, the one before %s: want a later multiple of %s", i, offset, prev, every)
		}
		if i == 2 && offset-prev < 3*every {
			t.Fatalf("the run after the one that overran two times is due %s after it, want the grid time after its end", offset-prev)
		}
		prev = offset
	}
	waitFor(t, 10*time.Second, "the chain to end", func() bool { return b.count("true") == 0 })
}

// A fixed-rate job stored with a zero repeat_every (as enqueues of a RepeatEvery below 1µs once
// stored it) repeats as if it had no grid: its completion does not divide by zero, which failed
// the completer's whole batch, again and again, and held up the settling of every other job.
func TestRepeatFixedRateZeroInterval(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "zerogrid")
	zero := b.client.ids.next(1)[0]
	b.exec(`INSERT INTO pgqueue_jobs (id, queue, payload, repeat_remaining, repeat_every, repeat_from)
		VALUES ($1, 'zerogrid', '1', 1, interval '0', now())`, [16]byte(zero))
	other, err := q.Enqueue(t.Context(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil },
		&WorkerOptions{OnEvent: ev.on, PollInterval: noPoll}))
	startWorker(t, w)
	done := map[ulid.ULID]ulid.ULID{}
	for len(done) < 3 {
		c := ev.next(t, EventCompleted)
		done[c.JobID] = c.RepeatedAs
	}
	next, ok := done[zero]
	if !ok || next == (ulid.ULID{}) {
		t.Fatalf("completed %v: want the zero-interval job %s, repeated, its repeat and %s", done, zero, other.ID)
	}
	if _, ok := done[next]; !ok {
		t.Fatalf("completed %v: want the repeat %s", done, next)
	}
	if _, ok := done[other.ID]; !ok {
		t.Fatalf("completed %v: want the other job %s", done, other.ID)
	}
	waitFor(t, 10*time.Second, "every job to be settled", func() bool { return b.count("true") == 0 })
}

// EnqueueMany (COPY) and the database/sql path give fixed-rate jobs their due time as the grid's
// origin, as Enqueue does.
func TestRepeatFixedRateEnqueueMany(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "fixedmany")
	db := stdlib.OpenDBFromPool(b.pool)
	t.Cleanup(func() { _ = db.Close() })
	for _, o := range []EnqueueOptions{
		{RepeatCount: 1, RepeatEvery: time.Hour, RepeatFixedRate: true},
		{RepeatCount: 1, RepeatEvery: time.Hour, RepeatFixedRate: true, Delay: time.Hour},
	} {
		if _, err := q.EnqueueMany(t.Context(), []int{1, 2}, &o); err != nil {
			t.Fatal(err)
		}
		tx, err := db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := q.EnqueueManySQLTx(t.Context(), tx, []int{3}, &o); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.EnqueueMany(t.Context(), []int{4}, &EnqueueOptions{RepeatCount: 1, RepeatEvery: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if n := b.count("repeat_from = run_at"); n != 6 {
		t.Fatalf("%d jobs have their run_at as repeat_from, want the 6 fixed-rate ones", n)
	}
	if n := b.count("repeat_from IS NULL"); n != 1 {
		t.Fatalf("%d jobs without repeat_from, want 1", n)
	}
}

// A forever-repeating job with a unique key: enqueuing it again at every start-up keeps one
// chain, and the chain can be found and removed.
func TestRepeatForeverIsFindableAndRemovable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[string](t, b.client, "cron")
	opts := &EnqueueOptions{UniqueKey: "nightly", RepeatCount: RepeatForever, RepeatEvery: time.Hour}
	first, err := q.Enqueue(t.Context(), "report", opts)
	if err != nil {
		t.Fatal(err)
	}
	again, err := q.Enqueue(t.Context(), "report", opts) // the next start-up
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.ID != first.ID {
		t.Fatalf("second enqueue = %s (duplicate %v), want the first %s", again.ID, again.Duplicate, first.ID)
	}
	ev := newEvents()
	w := must(q.NewWorker(func(context.Context, *Job[string]) error { return nil }, &WorkerOptions{OnEvent: ev.on}))
	stop := startWorker(t, w)
	c := ev.next(t, EventCompleted)
	stop()

	page, err := q.Jobs(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 1 || page.Jobs[0].ID != c.RepeatedAs || page.Jobs[0].RepeatRemaining != RepeatForever ||
		page.Jobs[0].Status != StatusScheduled || page.Jobs[0].UniqueKey != "nightly" {
		t.Fatalf("listing = %+v, want the next run %s", page.Jobs, c.RepeatedAs)
	}
	if err := q.Cancel(t.Context(), page.Jobs[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := b.count("status IN ('scheduled', 'available', 'running')"); n != 0 {
		t.Fatal("the chain is still live after cancelling its next run")
	}
}

// Many goroutines enqueue the same unique key at once, from the pool and inside transactions:
// one row, everyone gets it back, no error.
func TestUniqueConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "unique")
	const n = 40
	ids := make(chan ulid.ULID, n)
	dups := make(chan bool, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			job, err := enqueueUserKey(t.Context(), b, q, i)
			if err != nil {
				t.Error(err)
				return
			}
			ids <- job.ID
			dups <- job.Duplicate
		})
	}
	wg.Wait()
	close(ids)
	close(dups)
	distinct := map[ulid.ULID]bool{}
	for id := range ids {
		distinct[id] = true
	}
	originals := 0
	for d := range dups {
		if !d {
			originals++
		}
	}
	if len(distinct) != 1 || originals != 1 {
		t.Fatalf("%d distinct ids and %d non-duplicates among %d enqueues, want 1 and 1", len(distinct), originals, n)
	}
	if c := b.count("unique_key = 'user-42'"); c != 1 {
		t.Fatalf("%d rows with the key", c)
	}

	// Once the job has finished, the key is free again.
	for id := range distinct {
		if err := q.Cancel(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	job, err := q.Enqueue(t.Context(), 1, &EnqueueOptions{UniqueKey: "user-42"})
	if err != nil || job.Duplicate {
		t.Fatalf("enqueue after the first ended = %+v, %v", job, err)
	}
	if _, err := q.EnqueueMany(t.Context(), []int{1}, &EnqueueOptions{UniqueKey: "x"}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("EnqueueMany with a UniqueKey = %v", err)
	}
}

// enqueueUserKey enqueues payload i with the unique key "user-42": from the pool for an even
// i, in a transaction of its own (committed if the enqueue succeeds) for an odd one.
func enqueueUserKey(ctx context.Context, b *bundle, q *Queue[int], i int) (*Job[int], error) {
	opts := &EnqueueOptions{UniqueKey: "user-42"}
	if i%2 == 0 {
		return q.Enqueue(ctx, i, opts)
	}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	job, err := q.EnqueueTx(ctx, tx, i, opts)
	if err == nil {
		err = tx.Commit(ctx)
	} else {
		_ = tx.Rollback(ctx)
	}
	return job, err
}

func TestRepeatOptionsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "badrepeat")
	for _, o := range []EnqueueOptions{
		{RepeatCount: -2},
		{RepeatCount: 1, RepeatEvery: -time.Second},
		{RepeatEvery: time.Second},
		{RepeatCount: 1, RepeatFixedRate: true},
		{UniqueKey: string(make([]byte, 256))},
	} {
		if _, err := q.Enqueue(t.Context(), 1, &o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("Enqueue with %+v = %v, want ErrInvalidOption", o, err)
		}
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs written", n)
	}
}
