package pgqueue

// The operations on finished jobs, on jobs in the history (migration 20261214120000): delete,
// cancel, retry, by id and in bulk, and dependencies on jobs there.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// historyJobs enqueues into q a job that completes, one that fails and one that is cancelled,
// works them, and moves them into the history; it returns their ids.
func historyJobs(t *testing.T, b *bundle, q *Queue[int]) (completed, failed, cancelled ulid.ULID) {
	t.Helper()
	ctx := t.Context()
	completed = must(q.Enqueue(ctx, 0, nil)).ID
	failed = must(q.Enqueue(ctx, 1, &EnqueueOptions{MaxAttempts: 1})).ID
	cancelled = must(q.Enqueue(ctx, 0, &EnqueueOptions{Delay: time.Hour})).ID
	if err := q.Cancel(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	w := must(q.NewWorker(failOnOne, nil))
	if rs, err := w.WorkUntilEmpty(ctx); err != nil || len(rs) != 2 {
		t.Fatalf("WorkUntilEmpty = %d results, %v; want 2", len(rs), err)
	}
	b.toHistory()
	for _, id := range []ulid.ULID{completed, failed, cancelled} {
		b.inHistory(id)
	}
	return completed, failed, cancelled
}

// historyUnlocked waits until no transaction holds the lock under which the history's
// partitions are made (a stopped runtime's keeper may still hold it for a moment), which
// toHistory needs.
func (b *bundle) historyUnlocked() {
	b.t.Helper()
	waitFor(b.t, 10*time.Second, "the history's lock to be free", func() bool {
		var free bool
		err := b.pool.QueryRow(context.Background(), "SELECT pg_try_advisory_xact_lock(hashtext($1))", b.schema+".pgqueue_history").Scan(&free)
		return err == nil && free
	})
}

// failOnOne fails the jobs whose payload is 1 and completes the others.
func failOnOne(_ context.Context, job *Job[int]) error {
	if job.Payload == 1 {
		return errors.New("failed on purpose")
	}
	return nil
}

// inHistory fails the test unless job id is in a partition of the history.
func (b *bundle) inHistory(id ulid.ULID) {
	b.t.Helper()
	if table := b.tableOf(id); !strings.HasPrefix(table, "pgqueue_history_") {
		b.t.Fatalf("job %s is in %q, want a partition of the history", id, table)
	}
}

// wantCounts fails the test unless queue's stats count these finished and live jobs.
func wantCounts(t *testing.T, c *Client, queue string, want QueueStats) {
	t.Helper()
	s := queueStats(t, c, queue)
	got := QueueStats{Pending: s.Pending, Scheduled: s.Scheduled, Available: s.Available, Running: s.Running,
		Completed: s.Completed, Failed: s.Failed, Cancelled: s.Cancelled}
	if got != want {
		t.Fatalf("queue %s counts %+v, want %+v", queue, got, want)
	}
}

// Delete deletes a job of the history, whatever its finished status, and the counts follow;
// a second delete, or one naming another queue, finds nothing.
func TestHistoryDeleteJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[int](t, c, "history-delete")
	other := newQueue[int](t, c, "history-delete-other")
	completed, failed, cancelled := historyJobs(t, b, q)
	wantCounts(t, c, q.Name(), QueueStats{Completed: 1, Failed: 1, Cancelled: 1})

	if err := other.Delete(t.Context(), failed, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete through another queue = %v, want ErrNotFound", err)
	}
	b.inHistory(failed)
	if err := q.Delete(t.Context(), failed, nil); err != nil {
		t.Fatalf("Delete of a failed job in the history = %v", err)
	}
	if err := c.DeleteJob(t.Context(), completed, nil); err != nil {
		t.Fatalf("DeleteJob of a completed job in the history = %v", err)
	}
	tx := must(b.pool.Begin(t.Context()))
	if err := c.DeleteJobTx(t.Context(), tx, cancelled, &DeleteOptions{Cancel: true}); err != nil {
		t.Fatalf("DeleteJobTx of a cancelled job in the history = %v", err)
	}
	must(0, tx.Commit(t.Context()))
	for _, id := range []ulid.ULID{completed, failed, cancelled} {
		if table := b.tableOf(id); table != "" {
			t.Errorf("deleted job %s is still in %s", id, table)
		}
		if err := c.DeleteJob(t.Context(), id, nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("second DeleteJob of %s = %v, want ErrNotFound", id, err)
		}
	}
	wantCounts(t, c, q.Name(), QueueStats{})
}

// Cancel of a job of the history reports it finished, as for a finished job in pgqueue_jobs: a
// completed or failed one is refused with ErrJobFinished, a cancelled one is left as it is. None
// moves.
func TestHistoryCancelJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[int](t, c, "history-cancel")
	other := newQueue[int](t, c, "history-cancel-other")
	completed, failed, cancelled := historyJobs(t, b, q)
	for _, id := range []ulid.ULID{completed, failed} {
		if err := q.Cancel(t.Context(), id); !errors.Is(err, ErrJobFinished) {
			t.Errorf("Cancel of %s = %v, want ErrJobFinished", id, err)
		}
		if err := c.CancelJob(t.Context(), id); !errors.Is(err, ErrJobFinished) {
			t.Errorf("CancelJob of %s = %v, want ErrJobFinished", id, err)
		}
	}
	if err := c.CancelJob(t.Context(), cancelled); err != nil {
		t.Errorf("CancelJob of a cancelled job = %v, want nil", err)
	}
	if err := other.Cancel(t.Context(), failed); !errors.Is(err, ErrNotFound) {
		t.Errorf("Cancel through another queue = %v, want ErrNotFound", err)
	}
	for _, id := range []ulid.ULID{completed, failed, cancelled} {
		b.inHistory(id)
	}
	wantCounts(t, c, q.Name(), QueueStats{Completed: 1, Failed: 1, Cancelled: 1})
}

// Retry moves a job of the history back into pgqueue_jobs, available with a fresh set of
// attempts and its errors kept, counted once where it went; it runs again. A completed run of a
// repeating job runs once more without repeating. A job whose unique key a live job holds is
// refused with ErrDuplicate and stays where it is.
func TestHistoryRetryJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[int](t, c, "history-retry")
	ctx := t.Context()
	completed, failed, cancelled := historyJobs(t, b, q)
	unique := must(q.Enqueue(ctx, 1, &EnqueueOptions{MaxAttempts: 1, UniqueKey: "k"})).ID
	repeating := must(q.Enqueue(ctx, 2, &EnqueueOptions{RepeatCount: 3, RepeatEvery: time.Hour})).ID
	w := must(q.NewWorker(failOnOne, nil))
	if rs, err := w.WorkUntilEmpty(ctx); err != nil || len(rs) != 2 {
		t.Fatalf("WorkUntilEmpty = %d results, %v; want 2", len(rs), err)
	}
	b.toHistory()
	b.inHistory(unique)
	b.inHistory(repeating)
	// The repeating job's next run is scheduled.
	wantCounts(t, c, q.Name(), QueueStats{Scheduled: 1, Completed: 2, Failed: 2, Cancelled: 1})

	if err := q.Retry(ctx, failed); err != nil {
		t.Fatalf("Retry of a failed job in the history = %v", err)
	}
	if err := c.RetryJob(ctx, cancelled); err != nil {
		t.Fatalf("RetryJob of a cancelled job in the history = %v", err)
	}
	tx := must(b.pool.Begin(ctx))
	if err := c.RetryJobTx(ctx, tx, repeating); err != nil {
		t.Fatalf("RetryJobTx of a completed repeating run in the history = %v", err)
	}
	must(0, tx.Commit(ctx))
	for _, id := range []ulid.ULID{failed, cancelled, repeating} {
		if table := b.tableOf(id); table != "pgqueue_jobs" {
			t.Errorf("retried job %s is in %q, want pgqueue_jobs", id, table)
		}
	}
	if n := b.countIn("pgqueue_jobs", "id = $1 AND status = 'available' AND attempt = 0 AND finished_at IS NULL"+
		" AND jsonb_array_length(errors) = 1", [16]byte(failed)); n != 1 {
		t.Error("the retried failed job is not available with its attempts reset and its error kept")
	}
	if n := b.countIn("pgqueue_jobs", "id = $1 AND repeat_remaining = 0", [16]byte(repeating)); n != 1 {
		t.Error("the retried completed run of a repeating job still repeats")
	}
	wantCounts(t, c, q.Name(), QueueStats{Scheduled: 1, Available: 3, Completed: 1, Failed: 1})

	// A live job holds the unique key: the failed one stays in the history.
	must(q.Enqueue(ctx, 0, &EnqueueOptions{UniqueKey: "k", Delay: time.Hour}))
	if err := q.Retry(ctx, unique); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("Retry of a job whose key a live job holds = %v, want ErrDuplicate", err)
	}
	b.inHistory(unique)
	wantCounts(t, c, q.Name(), QueueStats{Scheduled: 2, Available: 3, Completed: 1, Failed: 1})
	if err := q.Retry(ctx, ulid.Make()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Retry of no job = %v, want ErrNotFound", err)
	}
	b.inHistory(completed) // not retried: stays

	// They run again: the failed one fails again, the others complete.
	events := newEvents()
	startWorker(t, must(q.NewWorker(failOnOne, &WorkerOptions{PollInterval: noPoll, OnEvent: events.on})))
	seen := map[ulid.ULID]EventKind{}
	for len(seen) < 3 {
		select {
		case ev := <-events.ch:
			if ev.Kind == EventCompleted || ev.Kind == EventFailed {
				seen[ev.JobID] = ev.Kind
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("the retried jobs did not all run: %v", seen)
		}
	}
	if seen[failed] != EventFailed || seen[cancelled] != EventCompleted || seen[repeating] != EventCompleted {
		t.Fatalf("the retried jobs ended %v", seen)
	}
	waitFor(t, 10*time.Second, "the counts of the runs", func() bool {
		s := queueStats(t, c, q.Name())
		return s.Available == 0 && s.Running == 0 && s.Completed == 3 && s.Failed == 2 && s.Scheduled == 2
	})
}

// CountJobs counts the jobs of its filter in both tables; RetryJobs and DeleteJobs act on those
// of the history too, in batches, with the counts following. Of two finished jobs sharing a
// unique key, one is retried.
func TestHistoryBulkOperations(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[int](t, c, "history-bulk")
	other := newQueue[int](t, c, "history-bulk-other")
	ctx := t.Context()
	old := enqueueInts(t, q, 7, nil)
	failJobs(b, old, 2*time.Hour)
	failJobs(b, enqueueInts(t, other, 3, nil), time.Minute)
	var shared []ulid.ULID
	for range 2 {
		id := enqueueInts(t, q, 1, &EnqueueOptions{UniqueKey: "shared"})
		failJobs(b, id, time.Minute)
		shared = append(shared, id...)
	}
	w := must(q.NewWorker(failOnOne, nil))
	enqueueInts(t, q, 5, nil)
	if rs, err := w.WorkUntilEmpty(ctx); err != nil || len(rs) != 5 {
		t.Fatalf("WorkUntilEmpty = %d results, %v; want 5", len(rs), err)
	}
	if moved := b.toHistory(); moved != 7+3+2+5 {
		t.Fatalf("%d jobs moved into the history, want 17", moved)
	}
	// Newer failures, still in pgqueue_jobs.
	recent := enqueueInts(t, q, 4, nil)
	failJobs(b, recent, time.Minute)
	for _, id := range append(old, shared...) {
		b.inHistory(id)
	}
	wantCounts(t, c, q.Name(), QueueStats{Completed: 5, Failed: 7 + 2 + 4})

	all := JobFilter{Queues: []string{q.Name()}, Statuses: []Status{StatusFailed}}
	lastHour := JobFilter{Queues: []string{q.Name()}, Statuses: []Status{StatusFailed}, FinishedAfter: time.Now().Add(-time.Hour)}
	for _, want := range []struct {
		f JobFilter
		n int
	}{
		{all, 13},
		{lastHour, 6},
		{JobFilter{Statuses: []Status{StatusFailed}}, 16},
		{JobFilter{Statuses: []Status{StatusCompleted, StatusAvailable}}, 5},
		{JobFilter{Statuses: []Status{StatusFailed}, FinishedBefore: time.Now().Add(-time.Hour)}, 7},
		{JobFilter{Statuses: []Status{StatusFailed}, EnqueuedBefore: time.Now().Add(time.Hour), Queues: []string{other.Name()}}, 3},
		{JobFilter{Statuses: []Status{StatusScheduled}}, 0},
	} {
		if n, err := c.CountJobs(ctx, want.f); err != nil || n != want.n {
			t.Errorf("CountJobs(%+v) = %d, %v; want %d", want.f, n, err, want.n)
		}
	}

	// The failures of the last hour: 4 in pgqueue_jobs, 2 sharing a key in the history, of
	// which one is retried.
	var progress []int
	n, err := c.RetryJobs(ctx, lastHour, &BulkOptions{BatchSize: 2, Progress: func(done int) { progress = append(progress, done) }})
	if err != nil || n != 5 {
		t.Fatalf("RetryJobs = %d, %v; want 5 (progress %v)", n, err, progress)
	}
	if got := b.countIn("pgqueue_jobs", "id = ANY ($1) AND status = 'available' AND attempt = 0", ids16(shared)); got != 1 {
		t.Fatalf("%d of the jobs sharing a key were retried, want 1", got)
	}
	wantCounts(t, c, q.Name(), QueueStats{Available: 5, Completed: 5, Failed: 8})
	if n, err := c.CountJobs(ctx, lastHour); err != nil || n != 1 {
		t.Fatalf("CountJobs after the retry = %d, %v; want 1 (the job whose key is held)", n, err)
	}

	// The retried jobs run again, and complete (kept an hour).
	if rs, err := w.WorkUntilEmpty(ctx); err != nil || len(rs) != 5 {
		t.Fatalf("WorkUntilEmpty after the retry = %d results, %v; want 5", len(rs), err)
	}
	wantCounts(t, c, q.Name(), QueueStats{Completed: 10, Failed: 8})

	// Every failed job older than the hour, and every completed one, in batches of 3.
	n, err = c.DeleteJobs(ctx, JobFilter{Queues: []string{q.Name()}, Statuses: []Status{StatusFailed}, FinishedBefore: time.Now().Add(-time.Hour)},
		&BulkOptions{BatchSize: 3})
	if err != nil || n != 7 {
		t.Fatalf("DeleteJobs of the old failures = %d, %v; want 7", n, err)
	}
	n, err = c.DeleteJobs(ctx, JobFilter{Statuses: []Status{StatusCompleted}}, &BulkOptions{BatchSize: 3})
	if err != nil || n != 10 {
		t.Fatalf("DeleteJobs of the completed jobs = %d, %v; want 10", n, err)
	}
	for _, id := range old {
		if table := b.tableOf(id); table != "" {
			t.Errorf("deleted job %s is still in %s", id, table)
		}
	}
	wantCounts(t, c, q.Name(), QueueStats{Failed: 1})
	wantCounts(t, c, other.Name(), QueueStats{Failed: 3})
	if got := b.count("true"); got != 4 {
		t.Fatalf("%d jobs left, want 4: the failed job whose key was held and the other queue's 3", got)
	}
}

// ids16 returns ids as a statement's uuid[] argument.
func ids16(ids []ulid.ULID) [][16]byte {
	out := make([][16]byte, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}

// A bulk batch reads a bounded stretch of the history (ten times the batch size): with more
// history rows than that, none of which the filter keeps, the walk goes on to the jobs that it
// does keep, and ends.
func TestHistoryBulkWalksInBoundedBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[int](t, c, "history-walk")
	ctx := t.Context()
	w := must(q.NewWorker(failOnOne, nil))
	enqueueInts(t, q, 50, nil)
	if rs, err := w.WorkUntilEmpty(ctx); err != nil || len(rs) != 50 {
		t.Fatalf("WorkUntilEmpty = %d results, %v", len(rs), err)
	}
	b.toHistory()
	target := enqueueInts(t, q, 3, nil)
	failJobs(b, target, time.Minute)
	var batches int
	n, err := c.RetryJobs(ctx, JobFilter{Statuses: []Status{StatusFailed}}, &BulkOptions{BatchSize: 2, Progress: func(int) { batches++ }})
	if err != nil || n != 3 {
		t.Fatalf("RetryJobs = %d, %v; want 3", n, err)
	}
	// The history's 50 rows take 3 windows of 20; the jobs' 3 two batches.
	if batches < 3 {
		t.Fatalf("%d batches, want at least 3", batches)
	}
	wantCounts(t, c, q.Name(), QueueStats{Available: 3, Completed: 50})
}

// A retried step of a finished workflow, moved back from the history, reopens the workflow (the
// resolver counts it unfinished again), which finishes again once the step has run.
func TestHistoryRetryReopensWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cfg := Config{Retention: Retention{Completed: time.Hour}}
	c := b.newClientWith(cfg)
	q := newQueue[int](t, c, "history-workflow")
	ctx := t.Context()
	wf := c.NewWorkflow("history")
	first := q.AddStep(wf, 0, nil)
	flaky := q.AddStep(wf, 1, &StepOptions{After: After(first), EnqueueOptions: EnqueueOptions{MaxAttempts: 1}})
	must(0, wf.Enqueue(ctx))
	stop := runWorkers(t, c, must(q.NewWorker(failOnOne, &WorkerOptions{PollInterval: noPoll})))
	if info := must(c.AwaitWorkflow(ctx, wf.ID)); info.Status != WorkflowFailed {
		t.Fatalf("the workflow ended %s, want failed", info.Status)
	}
	stop()
	b.historyUnlocked()
	b.toHistory()
	b.inHistory(first.ID)
	b.inHistory(flaky.ID)
	wantCounts(t, c, q.Name(), QueueStats{Completed: 1, Failed: 1})

	if err := c.RetryJob(ctx, flaky.ID); err != nil {
		t.Fatalf("RetryJob of the failed step = %v", err)
	}
	if table := b.tableOf(flaky.ID); table != "pgqueue_jobs" {
		t.Fatalf("the retried step is in %q, want pgqueue_jobs", table)
	}
	if n := b.countIn("pgqueue_ended", "job = $1 AND workflow = $2 AND outcome = 'reopened'", [16]byte(flaky.ID), [16]byte(wf.ID)); n != 1 {
		t.Fatalf("%d reopened ends recorded for the retried step, want 1", n)
	}
	wantCounts(t, c, q.Name(), QueueStats{Available: 1, Completed: 1})
	// A client serving another queue runs the resolver: the workflow runs again, one job
	// unfinished.
	idle := b.newClientWith(cfg)
	stopIdle := runWorkers(t, idle, must(newQueue[int](t, idle, "history-workflow-idle").NewWorker(failOnOne, &WorkerOptions{PollInterval: noPoll})))
	waitFor(t, 10*time.Second, "the workflow to be reopened", func() bool {
		info := must(c.Workflow(ctx, wf.ID))
		return info.Status == WorkflowRunning && info.Unfinished == 1
	})
	stopIdle()
	// The step runs again, and completes this time.
	again := b.newClientWith(cfg)
	runWorkers(t, again, must(newQueue[int](t, again, q.Name()).NewWorker(func(context.Context, *Job[int]) error { return nil },
		&WorkerOptions{PollInterval: noPoll})))
	waitFor(t, 10*time.Second, "the workflow to complete", func() bool {
		info := must(c.Workflow(ctx, wf.ID))
		return info.Status == WorkflowCompleted && info.Unfinished == 0
	})
	wantCounts(t, c, q.Name(), QueueStats{Completed: 2})
}

// A dependency on a job of the history: a completed one meets it at once; a failed one applies
// the policy — CancelDependent cancels the dependent, WaitForRetry keeps it pending until the
// parent, retried from the history, completes.
func TestDependencyOnHistoryParents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[int](t, c, "history-parents")
	ctx := t.Context()
	done, failed, _ := historyJobs(t, b, q)
	wantCounts(t, c, q.Name(), QueueStats{Completed: 1, Failed: 1, Cancelled: 1})

	wf := c.NewWorkflow("after history")
	afterDone := q.AddStep(wf, 0, &StepOptions{After: []Dependency{{Job: done}}})
	cancelled := q.AddStep(wf, 0, &StepOptions{After: []Dependency{{Job: failed}}})
	waits := q.AddStep(wf, 0, &StepOptions{After: []Dependency{{Job: failed, OnFailure: WaitForRetry}}})
	must(0, wf.Enqueue(ctx))
	b.inHistory(done)
	b.inHistory(failed)

	var fixed = make(chan struct{})
	events := newEvents()
	runWorkers(t, c, must(q.NewWorker(func(_ context.Context, job *Job[int]) error {
		if job.Payload == 1 {
			select {
			case <-fixed:
			default:
				return errors.New("not yet")
			}
		}
		return nil
	}, &WorkerOptions{PollInterval: noPoll, OnEvent: events.on})))
	waitFor(t, 10*time.Second, "the dependents to hear of their parents", func() bool {
		return b.count("id = $1 AND status = 'completed'", [16]byte(afterDone.ID)) == 1 &&
			b.count("id = $1 AND status = 'cancelled'", [16]byte(cancelled.ID)) == 1 &&
			b.count("id = $1 AND status = 'pending' AND jsonb_array_length(errors) = 1", [16]byte(waits.ID)) == 1
	})

	close(fixed)
	if err := c.RetryJob(ctx, failed); err != nil {
		t.Fatalf("RetryJob of the failed parent in the history = %v", err)
	}
	waitFor(t, 10*time.Second, "the waiting dependent to run once its parent completed", func() bool {
		return b.count("id = $1 AND status = 'completed'", [16]byte(waits.ID)) == 1
	})
	if info := must(c.AwaitWorkflow(ctx, wf.ID)); info.Status != WorkflowFailed {
		// one step was cancelled
		t.Fatalf("the workflow ended %s, want failed (a step was cancelled)", info.Status)
	}
}

// moveUncommitted moves the finished jobs of queue into the history in a transaction it leaves
// open (rolled back when the test ends), and returns it and its backend's pid.
func moveUncommitted(t *testing.T, b *bundle, queue string) (pgx.Tx, int) {
	t.Helper()
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	var end *time.Time
	var pid int
	if err := tx.QueryRow(t.Context(), historyExtendSQL, (30 * 24 * time.Hour).Microseconds()).Scan(&end); err != nil || end == nil {
		t.Fatalf("make the partitions: %v, %v", end, err)
	}
	if err := tx.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	week := (7 * 24 * time.Hour).Microseconds()
	if _, err := tx.Exec(t.Context(), historyMoveSQL, []string{queue}, []int64{week}, []int64{week}, []int64{week},
		historyBatch, int64(0), end); err != nil {
		t.Fatal(err)
	}
	return tx, pid
}

// An operation by id on a job that moves into the history while it runs finds it there: it
// waited for the move's row lock, found the row gone from pgqueue_jobs, and the history's row
// was not in its snapshot yet; it runs once more.
func TestOperationDuringTheMove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "moving")
	for _, op := range []string{"delete", "retry"} {
		t.Run(op, func(t *testing.T) {
			id := ulid.Make()
			b.exec(`INSERT INTO pgqueue_jobs (id, queue, status, payload, attempt, finished_at)
				VALUES ($1, 'moving', 'failed', '0', 1, now() - interval '2 minutes')`, [16]byte(id))
			tx, pid := moveUncommitted(t, b, "moving")
			done := make(chan error, 1)
			go func() {
				if op == "delete" {
					done <- q.Delete(context.Background(), id, nil)
				} else {
					done <- q.Retry(context.Background(), id)
				}
			}()
			waitFor(t, 10*time.Second, "the operation to wait for the move's lock", func() bool {
				return b.countIn("pg_stat_activity", "$1 = ANY (pg_blocking_pids(pid))", pid) > 0
			})
			if err := tx.Commit(t.Context()); err != nil {
				t.Fatal(err)
			}
			if err := <-done; err != nil {
				t.Fatalf("%s of a job moved meanwhile: %v", op, err)
			}
			want := map[string]string{"delete": "", "retry": "pgqueue_jobs"}[op]
			if got := b.tableOf([16]byte(id)); got != want {
				t.Fatalf("after the %s the job is in %q, want %q", op, got, want)
			}
		})
	}
}

// A bulk operation's batch waits for a move into the history under way, and its statement then
// finds the jobs the move took in the history: none of its filter's jobs is missed.
func TestBulkOperationDuringTheMove(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, op := range []string{"delete", "retry"} {
		t.Run(op, func(t *testing.T) {
			queue := "bulk-moving-" + op
			b.exec(`INSERT INTO pgqueue_jobs (id, queue, status, payload, attempt, finished_at)
				SELECT gen_random_uuid(), $1, 'failed', '0', 1, now() - interval '2 minutes' FROM generate_series(1, 10)`, queue)
			tx, pid := moveUncommitted(t, b, queue)
			f := JobFilter{Queues: []string{queue}, Statuses: []Status{StatusFailed}}
			done := make(chan int, 1)
			go func() {
				var n int
				var err error
				if op == "delete" {
					n, err = b.client.DeleteJobs(context.Background(), f, nil)
				} else {
					n, err = b.client.RetryJobs(context.Background(), f, nil)
				}
				if err != nil {
					t.Errorf("%s: %v", op, err)
				}
				done <- n
			}()
			waitFor(t, 10*time.Second, "the batch to wait for the move", func() bool {
				return b.countIn("pg_stat_activity", "$1 = ANY (pg_blocking_pids(pid))", pid) > 0
			})
			if err := tx.Commit(t.Context()); err != nil {
				t.Fatal(err)
			}
			if n := <-done; n != 10 {
				t.Fatalf("%s changed %d jobs of the 10 the move took meanwhile", op, n)
			}
		})
	}
}
