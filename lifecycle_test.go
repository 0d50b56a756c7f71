package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
			opts := &EnqueueOptions{UniqueKey: "user-42"}
			var job *Job[int]
			var err error
			if i%2 == 0 {
				job, err = q.Enqueue(t.Context(), i, opts)
			} else {
				tx, berr := b.pool.Begin(t.Context())
				if berr != nil {
					t.Error(berr)
					return
				}
				job, err = q.EnqueueTx(t.Context(), tx, i, opts)
				if err == nil {
					err = tx.Commit(t.Context())
				} else {
					_ = tx.Rollback(t.Context())
				}
			}
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

func TestRepeatOptionsInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "badrepeat")
	for _, o := range []EnqueueOptions{
		{RepeatCount: -2},
		{RepeatCount: 1, RepeatEvery: -time.Second},
		{RepeatEvery: time.Second},
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
