package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A queue's Rate counts its jobs' weights: no window of Rate.Per holds starts weighing more than
// Rate.Starts, except a job heavier than the whole rate, which starts alone in its window; and
// the jobs start in their order: a light job does not pass a heavy one that does not fit yet.
// Handlers see each job's weight.
func TestRateWeights(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	starts := recordStarts(t, b)
	client, err := NewClient(b.pool, &Config{Logger: testLogger(t), Retention: Retention{Completed: KeepForever}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[int](t, client, "weighed")
	rate := Rate{Starts: 10, Per: 300 * time.Millisecond}
	if err := q.SetLimits(ctx, Limits{Rate: rate}); err != nil {
		t.Fatal(err)
	}
	weights := []int{6, 6, 1, 4, 4, 2, 15, 1, 3, 3, 3, 3}
	for _, w := range weights {
		if _, err := q.Enqueue(ctx, w, &EnqueueOptions{Weight: w}); err != nil {
			t.Fatal(err)
		}
	}
	var done, misweighed atomic.Int32
	startWorker(t, must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		if job.Weight != job.Payload { // each job's payload is its weight
			misweighed.Add(1)
		}
		done.Add(1)
		return nil
	}, &WorkerOptions{Concurrency: 10, PollInterval: time.Hour})))
	waitFor(t, 30*time.Second, "every job done", func() bool { return int(done.Load()) == len(weights) })
	if n := misweighed.Load(); n > 0 {
		t.Errorf("%d handlers saw a Job.Weight other than the job's", n)
	}

	logged := starts()[""]
	if len(logged) != len(weights) {
		t.Fatalf("%d starts logged for %d jobs", len(logged), len(weights))
	}
	for i, s := range logged {
		if s.weight != 15 {
			continue
		}
		// The heavy job's window, on either side of it, holds no other start.
		for j, o := range logged {
			if j != i && o.at.After(s.at.Add(-rate.Per)) && o.at.Before(s.at.Add(rate.Per)) {
				t.Fatalf("a start of weight %d %s from the start of weight 15, within %s", o.weight, o.at.Sub(s.at), rate.Per)
			}
		}
		light := append(append([]loggedStart(nil), logged[:i]...), logged[i+1:]...)
		if most := busiestWindow(light, rate.Per); most > rate.Starts {
			t.Fatalf("starts weighing %d within %s, more than Rate.Starts %d", most, rate.Per, rate.Starts)
		}
	}
	// In enqueue order, each job started no earlier than the one before it.
	rows, _ := b.pool.Query(ctx, `SELECT payload::int, attempted_at FROM pgqueue_jobs ORDER BY id`)
	var prev time.Time
	var w int
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&w, &at}, func() error {
		if at.Before(prev) {
			return fmt.Errorf("a job of weight %d started before a job enqueued before it", w)
		}
		prev = at
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A key's KeyRate counts its jobs' weights; a key of heavy jobs does not hold back a key of
// light ones.
func TestKeyRateWeights(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	starts := recordStarts(t, b)
	q := newQueue[int](t, b.client, "keyweighed")
	rate := Rate{Starts: 5, Per: 300 * time.Millisecond}
	if err := q.SetLimits(ctx, Limits{KeyRate: rate}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueMany(ctx, make([]int, 4), &EnqueueOptions{Key: "heavy", Weight: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueMany(ctx, make([]int, 10), &EnqueueOptions{Key: "light"}); err != nil {
		t.Fatal(err)
	}
	workUntilDone(t, q, 14, &WorkerOptions{Concurrency: 10, PollInterval: time.Hour})
	logged := starts()
	for key, want := range map[string]int{"heavy": 3, "light": 5} {
		if most := busiestWindow(logged[key], rate.Per); most != want {
			t.Errorf("key %s: starts weighing at most %d within %s, want %d (KeyRate.Starts %d)", key, most, rate.Per, want, rate.Starts)
		}
	}
	if first, last := logged["light"][0].at, logged["light"][4].at; last.Sub(first) >= rate.Per {
		t.Errorf("the first 5 light jobs took %s to start: the heavy key held them back", last.Sub(first))
	}
}

// Weight is checked at enqueue: 0 stores 1, a negative weight or one above MaxLimit is refused
// and nothing is written; every enqueue path (single, unique, COPY, database/sql) stores it. A repeat keeps its job's weight, listings show it, and
// Stats.RecentStarts adds up the weights of the starts in the window.
func TestWeightOption(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "w")
	for _, bad := range []int{-1, MaxLimit + 1} {
		if _, err := q.Enqueue(ctx, 1, &EnqueueOptions{Weight: bad}); !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("Weight %d: %v, want ErrInvalidOption", bad, err)
		}
	}
	if _, err := q.Enqueue(ctx, 1, &EnqueueOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueMany(ctx, []int{2, 3}, &EnqueueOptions{Weight: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, 4, &EnqueueOptions{Weight: 9, UniqueKey: "u"}); err != nil {
		t.Fatal(err)
	}
	tx := beginSQL(t, b.sqlDB())
	if _, err := q.EnqueueSQLTx(ctx, tx, 5, &EnqueueOptions{Weight: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueManySQLTx(ctx, tx, []int{6}, &EnqueueOptions{Weight: 3}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	const want = "1:1 2:7 3:7 4:9 5:2 6:3"
	var got string
	if err := b.pool.QueryRow(ctx, `SELECT string_agg(payload::text || ':' || weight, ' ' ORDER BY payload::int) FROM pgqueue_jobs`).
		Scan(&got); err != nil || got != want {
		t.Fatalf("payload:weight = %q (%v), want %s", got, err, want)
	}

	if err := q.SetLimits(ctx, Limits{Rate: Rate{Starts: 100, Per: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(ctx, 5, &EnqueueOptions{Weight: 5, RepeatCount: 1, RepeatEvery: time.Hour}); err != nil {
		t.Fatal(err)
	}
	workUntilDone(t, q, 7, &WorkerOptions{Concurrency: 4})
	if st, err := q.Stats(ctx); err != nil || st.RecentStarts != 1+7+7+9+2+3+5 {
		t.Fatalf("Stats.RecentStarts = %d (%v), want %d", st.RecentStarts, err, 1+7+7+9+2+3+5)
	}
	// The handlers have returned; the repeat is written when the outcome is settled.
	waitFor(t, 10*time.Second, "the job's repeat to be scheduled", func() bool { return b.count("status = 'scheduled'") == 1 })
	page, err := q.Jobs(ctx, &ListOptions{Statuses: []Status{StatusScheduled}})
	if err != nil || len(page.Jobs) != 1 || page.Jobs[0].Weight != 5 {
		t.Fatalf("the repeat of a job of weight 5: %+v (%v), want one scheduled job of weight 5", page, err)
	}
}
