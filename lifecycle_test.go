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

func TestUpdateSavesProgressForTheRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type progress struct{ Done int }
	q := newQueue[progress](t, b.client, "progress")
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[progress]) error {
		if job.Attempt == 1 {
			for i := 1; i <= 3; i++ {
				if err := job.Update(ctx, progress{Done: i}); err != nil {
					return err
				}
			}
			return errors.New("crashed after step 3")
		}
		if job.Payload.Done != 3 {
			return Permanent(fmt.Errorf("retry started from %d, want the saved 3", job.Payload.Done))
		}
		return nil
	}, &WorkerOptions{OnEvent: ev.on, RetryBackoff: Backoff{Initial: time.Millisecond}}))
	job, err := q.Enqueue(t.Context(), progress{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	ev.next(t, EventRetrying)
	if c := ev.next(t, EventCompleted); c.Attempt != 2 {
		t.Fatalf("completed on attempt %d, want 2", c.Attempt)
	}

	// A Job no handler holds cannot be updated.
	if err := job.Update(t.Context(), progress{Done: 9}); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Update of an enqueued Job = %v, want ErrNotHeld", err)
	}
}

func TestUpdateAfterLockLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "lost")
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	result := make(chan error, 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		close(started)
		<-ctx.Done()
		result <- job.Update(context.Background(), 2)
		return nil
	}, &WorkerOptions{LockDuration: 300 * time.Millisecond, PollInterval: noPoll}))
	startWorker(t, w)
	<-started
	b.exec("UPDATE pgqueue_jobs SET lock_token = gen_random_uuid() WHERE id = $1", [16]byte(job.ID))
	if err := receive(t, result, 10*time.Second, "the update"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Update after the lock was lost = %v, want ErrNotHeld", err)
	}
	if n := b.count("id = $1 AND payload = '1'", [16]byte(job.ID)); n != 1 {
		t.Fatal("the payload changed after the lock was lost")
	}
}

// CompleteTx commits the job's completion with the handler's own writes, or neither.
func TestCompleteTx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec("CREATE TABLE ledger (job uuid PRIMARY KEY, amount int)")
	q := newQueue[int](t, b.client, "ledger")
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO ledger VALUES ($1, $2)", [16]byte(job.ID), job.Payload); err != nil {
			return err
		}
		if err := job.CompleteTx(ctx, tx); err != nil {
			return err
		}
		if job.Payload < 0 && job.Attempt == 1 {
			return errors.New("rolled back") // the deferred rollback undoes both
		}
		return tx.Commit(ctx)
	}, &WorkerOptions{OnEvent: ev.on, RetryBackoff: Backoff{Initial: time.Millisecond}}))
	good, err := q.Enqueue(t.Context(), 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	if c := ev.next(t, EventCompleted); c.JobID != good.ID {
		t.Fatalf("completed %s", c.JobID)
	}
	if b.count("id = $1", [16]byte(good.ID)) != 0 {
		t.Fatal("the job completed in the transaction is still there")
	}
	var n int
	if err := b.pool.QueryRow(t.Context(), "SELECT count(*) FROM ledger WHERE job = $1", [16]byte(good.ID)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("ledger rows for the job: %d, %v", n, err)
	}

	// Rolled back on the first attempt: neither the ledger row nor the completion; the retry
	// commits both.
	bad, err := q.Enqueue(t.Context(), -5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := ev.next(t, EventRetrying); r.JobID != bad.ID {
		t.Fatalf("retrying %s", r.JobID)
	}
	if c := ev.next(t, EventCompleted); c.JobID != bad.ID || c.Attempt != 2 {
		t.Fatalf("completed %+v", c)
	}
	if err := b.pool.QueryRow(t.Context(), "SELECT count(*) FROM ledger WHERE job = $1", [16]byte(bad.ID)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("ledger rows for the retried job: %d, %v", n, err)
	}
}

func TestSnooze(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "snooze")
	ev := newEvents()
	attempts := make(chan int, 3)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		attempts <- job.Attempt
		if len(attempts) == 1 {
			return Snooze(200 * time.Millisecond)
		}
		return nil
	}, &WorkerOptions{OnEvent: ev.on, PollInterval: noPoll}))
	job, err := q.Enqueue(t.Context(), 1, &EnqueueOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	s := ev.next(t, EventSnoozed)
	if s.JobID != job.ID || s.RunAt.IsZero() {
		t.Fatalf("snoozed event = %+v", s)
	}
	if n := b.count("id = $1 AND status = 'scheduled' AND attempt = 0 AND errors IS NULL", [16]byte(job.ID)); n != 1 {
		t.Fatal("the snoozed job is not scheduled with its attempt uncharged and no error")
	}
	// With MaxAttempts 1 it still runs again: the snooze used no attempt.
	ev.next(t, EventCompleted)
	if a := []int{<-attempts, <-attempts}; a[0] != 1 || a[1] != 1 {
		t.Fatalf("attempts seen: %v, want [1 1]", a)
	}
}

func TestPermanentFailsAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "permanent")
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		return Permanent(errors.New("invalid account"))
	}, &WorkerOptions{OnEvent: ev.on}))
	if _, err := q.Enqueue(t.Context(), 1, &EnqueueOptions{MaxAttempts: 10}); err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	f := ev.next(t, EventFailed)
	if f.Attempt != 1 || f.Err.Error() != "invalid account" {
		t.Fatalf("failed event = %+v", f)
	}
	if n := b.count("status = 'failed' AND attempt = 1 AND errors->0->>'error' = 'invalid account'"); n != 1 {
		t.Fatal("the job did not fail at once with its error recorded")
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

func TestRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, err := NewClient(b.pool, &Config{
		Logger:         testLogger(t),
		QueueRetention: map[string]Retention{"kept": {Completed: time.Hour, Failed: 300 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	q := newQueue[bool](t, c, "kept")
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[bool]) error {
		if job.Payload {
			return nil
		}
		return Permanent(errors.New("no"))
	}, &WorkerOptions{OnEvent: ev.on, PollInterval: 50 * time.Millisecond}))
	ok, err := q.Enqueue(t.Context(), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := q.Enqueue(t.Context(), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	waitFor(t, 30*time.Second, "both jobs to finish", func() bool {
		return b.count("status IN ('completed', 'failed')") == 2
	})
	if n := b.count("id = $1 AND status = 'completed' AND finished_at IS NOT NULL", [16]byte(ok.ID)); n != 1 {
		t.Fatal("the completed job was not kept")
	}
	// The failed one is pruned once its 300 ms are up; the completed one stays its hour.
	waitFor(t, 30*time.Second, "the failed job to be pruned", func() bool { return b.count("id = $1", [16]byte(bad.ID)) == 0 })
	if n := b.count("id = $1", [16]byte(ok.ID)); n != 1 {
		t.Fatal("the completed job was pruned before its retention ran out")
	}
	if _, err := NewClient(b.pool, &Config{QueueRetention: map[string]Retention{"bad name": {}}}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("QueueRetention with an invalid name = %v", err)
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
