package pgqueue

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// enqueueInts enqueues n jobs with opts, and returns their ids.
func enqueueInts(t testing.TB, q *Queue[int], n int, opts *EnqueueOptions) []ulid.ULID {
	t.Helper()
	if opts != nil && opts.UniqueKey != "" {
		job, err := q.Enqueue(t.Context(), 0, opts)
		if err != nil || n != 1 {
			t.Fatalf("enqueue %d unique jobs: %v", n, err)
		}
		return []ulid.ULID{job.ID}
	}
	ids, err := q.EnqueueMany(t.Context(), make([]int, n), opts)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// failJobs marks jobs failed, ago before now (as a worker would leave them: finished, unlocked).
func failJobs(b *bundle, ids []ulid.ULID, ago time.Duration) {
	b.t.Helper()
	raw := make([][16]byte, len(ids))
	for i, id := range ids {
		raw[i] = id
	}
	b.exec("UPDATE pgqueue_jobs SET status = 'failed', attempt = 1, finished_at = now() - $2::bigint * interval '1 microsecond' WHERE id = ANY ($1)",
		raw, ago.Microseconds())
}

// RetryJobs retries, in batches with progress reported, exactly the jobs of its filter: the
// queue's failed jobs that failed within the hour; CountJobs counts them first.
func TestRetryJobsByFilter(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "bulk")
	other := newQueue[int](t, b.client, "bulk-other")
	recent, old := enqueueInts(t, q, 25, nil), enqueueInts(t, q, 5, nil)
	failJobs(b, recent, time.Minute)
	failJobs(b, old, 2*time.Hour)
	failJobs(b, enqueueInts(t, other, 3, nil), time.Minute)
	waiting := enqueueInts(t, q, 4, nil)

	f := JobFilter{Queues: []string{"bulk"}, Statuses: []Status{StatusFailed}, FinishedAfter: time.Now().Add(-time.Hour)}
	if n, err := b.client.CountJobs(t.Context(), f); err != nil || n != 25 {
		t.Fatalf("CountJobs = %d, %v; want 25", n, err)
	}
	var progress []int
	n, err := b.client.RetryJobs(t.Context(), f, &BulkOptions{BatchSize: 10, Progress: func(done int) { progress = append(progress, done) }})
	if err != nil || n != 25 {
		t.Fatalf("RetryJobs = %d, %v; want 25", n, err)
	}
	if !slices.Equal(progress, []int{10, 20, 25}) {
		t.Fatalf("progress %v, want [10 20 25]", progress)
	}
	for _, want := range []struct {
		where string
		n     int
	}{
		{"queue = 'bulk' AND status = 'available' AND attempt = 0 AND finished_at IS NULL", 25 + len(waiting)},
		{"queue = 'bulk' AND status = 'failed'", 5},
		{"queue = 'bulk-other' AND status = 'failed'", 3},
	} {
		if got := b.count(want.where); got != want.n {
			t.Errorf("%d jobs where %s, want %d", got, want.where, want.n)
		}
	}
	if n, err := b.client.CountJobs(t.Context(), f); err != nil || n != 0 {
		t.Fatalf("CountJobs after = %d, %v; want 0", n, err)
	}
}

// Now reads the clock that writes the jobs' times: a job enqueued between two readings was
// created between them.
func TestNow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "bulk")
	before, err := b.client.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	job, err := q.Enqueue(t.Context(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, err := b.client.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if job.CreatedAt.Before(before) || !job.CreatedAt.Before(after) {
		t.Errorf("a job created at %v, between readings %v and %v", job.CreatedAt, before, after)
	}
}

// A bulk retry leaves a failed job whose unique key a live job holds as it is, and of several
// failed jobs sharing a key retries the first only; a scheduled job runs now.
func TestRetryJobsUniqueKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "bulk-unique")
	held := enqueueInts(t, q, 1, &EnqueueOptions{UniqueKey: "held"})
	failJobs(b, held, time.Minute)
	if _, err := q.Enqueue(t.Context(), 1, &EnqueueOptions{UniqueKey: "held"}); err != nil {
		t.Fatal(err)
	}
	var shared []ulid.ULID
	for range 3 {
		id := enqueueInts(t, q, 1, &EnqueueOptions{UniqueKey: "shared"})
		failJobs(b, id, time.Minute)
		shared = append(shared, id...)
	}
	later := enqueueInts(t, q, 1, &EnqueueOptions{Delay: time.Hour, UniqueKey: "later"})

	n, err := b.client.RetryJobs(t.Context(), JobFilter{Statuses: []Status{StatusFailed, StatusScheduled}}, &BulkOptions{BatchSize: 2})
	if err != nil || n != 2 {
		t.Fatalf("RetryJobs = %d, %v; want 2 (the first shared job and the scheduled one)", n, err)
	}
	for id, want := range map[ulid.ULID]string{held[0]: "failed", shared[0]: "available", shared[1]: "failed", shared[2]: "failed", later[0]: "available"} {
		if b.count("id = $1 AND status = $2", [16]byte(id), want) != 1 {
			t.Errorf("job %s is not %s", id, want)
		}
	}
}

// A bulk retry of kept completed runs of repeating jobs runs each once more without repeating:
// their next runs were enqueued when they completed, and no chain is doubled.
func TestRetryJobsCompletedRepeatingRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	client := b.newClientWith(Config{Retention: Retention{Completed: KeepForever}})
	q := newQueue[int](t, client, "bulk-chains")
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, nil))
	enqueueInts(t, q, 3, &EnqueueOptions{RepeatCount: RepeatForever, RepeatEvery: time.Hour})
	if rs, err := w.WorkUntilEmpty(t.Context()); err != nil || len(rs) != 3 {
		t.Fatalf("WorkUntilEmpty = %d results, %v; want the 3 first runs", len(rs), err)
	}
	n, err := client.RetryJobs(t.Context(), JobFilter{Queues: []string{"bulk-chains"}, Statuses: []Status{StatusCompleted}}, nil)
	if err != nil || n != 3 {
		t.Fatalf("RetryJobs = %d, %v; want 3", n, err)
	}
	rs, err := w.WorkUntilEmpty(t.Context())
	if err != nil || len(rs) != 3 {
		t.Fatalf("WorkUntilEmpty = %d results, %v; want the 3 retried runs", len(rs), err)
	}
	for _, r := range rs {
		if r.Kind != EventCompleted || r.RepeatedAs != (ulid.ULID{}) {
			t.Errorf("retried run %s ended %s, repeated as %s; want completed without a repeat", r.JobID, r.Kind, r.RepeatedAs)
		}
	}
	if n := b.count("status = 'scheduled'"); n != 3 {
		t.Fatalf("%d scheduled next runs, want 3: one per chain", n)
	}
}

// CancelJobs cancels waiting and running jobs of its filter, and the workers running them stop;
// DeleteJobs deletes finished and running ones alike.
func TestCancelAndDeleteJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "bulk-cancel")
	const running = 3
	started := make(chan struct{}, running)
	causes := make(chan error, running)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil
	}, &WorkerOptions{Concurrency: running, PollInterval: noPoll, LockDuration: time.Minute}))
	enqueueInts(t, q, running, nil)
	startWorker(t, w)
	for range running {
		receive(t, started, 10*time.Second, "a job to start")
	}
	enqueueInts(t, q, 4, &EnqueueOptions{Delay: time.Hour})

	n, err := b.client.CancelJobs(t.Context(), JobFilter{Queues: []string{q.Name()}, Statuses: []Status{StatusRunning, StatusScheduled}}, nil)
	if err != nil || n != running+4 {
		t.Fatalf("CancelJobs = %d, %v; want %d", n, err, running+4)
	}
	for range running {
		if c := receive(t, causes, 10*time.Second, "a handler's context to be cancelled"); !errors.Is(c, ErrCancelled) {
			t.Fatalf("cause = %v, want ErrCancelled", c)
		}
	}
	if got := b.count("status = 'cancelled' AND lock_token IS NULL"); got != running+4 {
		t.Fatalf("%d jobs cancelled, want %d", got, running+4)
	}

	// The worker is free again: three more start, and a delete of every job stops them.
	enqueueInts(t, q, running, nil)
	for range running {
		receive(t, started, 10*time.Second, "a job to start")
	}
	n, err = b.client.DeleteJobs(t.Context(), JobFilter{Statuses: []Status{StatusRunning, StatusCancelled}}, &BulkOptions{BatchSize: 4})
	if err != nil || n != 2*running+4 {
		t.Fatalf("DeleteJobs = %d, %v; want %d", n, err, 2*running+4)
	}
	for range running {
		if c := receive(t, causes, 10*time.Second, "a deleted job's handler to be cancelled"); !errors.Is(c, ErrCancelled) {
			t.Fatalf("cause = %v, want ErrCancelled", c)
		}
	}
	if got := b.count("true"); got != 0 {
		t.Fatalf("%d jobs left", got)
	}
}

// Bad filters and options are refused before anything changes.
func TestBulkBadInput(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "bulk-bad")
	failJobs(b, enqueueInts(t, q, 2, nil), time.Minute)
	for _, c := range []struct {
		f    JobFilter
		opts *BulkOptions
	}{
		{JobFilter{}, nil},
		{JobFilter{Statuses: []Status{"lost"}}, nil},
		{JobFilter{Statuses: []Status{StatusFailed}, Queues: []string{"no spaces"}}, nil},
		{JobFilter{Statuses: []Status{StatusFailed}}, &BulkOptions{BatchSize: BulkBatchSizeMax + 1}},
		{JobFilter{Statuses: []Status{StatusFailed}}, &BulkOptions{BatchSize: -1}},
	} {
		if n, err := b.client.RetryJobs(t.Context(), c.f, c.opts); !errors.Is(err, ErrInvalidOption) || n != 0 {
			t.Errorf("RetryJobs(%+v, %+v) = %d, %v; want ErrInvalidOption", c.f, c.opts, n, err)
		}
	}
	if _, err := b.client.CountJobs(t.Context(), JobFilter{}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("CountJobs without statuses = %v", err)
	}
	if got := b.count("status = 'failed'"); got != 2 {
		t.Fatalf("%d failed jobs left, want 2", got)
	}
}
