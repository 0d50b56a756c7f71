package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
)

// A CompleteTx whose statement fails (here: the handler's transaction is already aborted) leaves
// the attempt running, fenced as any other: when another attempt takes the job, the heartbeat
// cancels the handler with ErrLockLost, and the handler's nil return is reported as a lost lock,
// not a completion. The row keeps the other attempt's token.
func TestCompleteTxFailedKeepsFencing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "fenced")
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	completeErr := make(chan error, 1)
	taken := make(chan struct{})
	cause := make(chan error, 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		_, _ = tx.Exec(ctx, "SELECT 1/0") // aborts the transaction
		completeErr <- job.CompleteTx(ctx, tx)
		<-taken
		select {
		case <-ctx.Done():
			cause <- context.Cause(ctx)
		case <-time.After(10 * time.Second):
			cause <- errors.New("the handler's context was never cancelled")
		}
		return nil // a late success must change nothing
	}, &WorkerOptions{OnEvent: ev.on, PollInterval: noPoll, LockDuration: 2 * time.Second,
		HeartbeatInterval: 50 * time.Millisecond}))
	startWorker(t, w)

	if err := receive(t, completeErr, 30*time.Second, "CompleteTx"); err == nil {
		t.Fatal("CompleteTx in an aborted transaction succeeded")
	}
	// Another attempt takes the job: a new token on the running row.
	b.exec("UPDATE pgqueue_jobs SET lock_token = '00000000-0000-0000-0000-000000000001' WHERE id = $1", [16]byte(job.ID))
	close(taken)
	if err := receive(t, cause, 30*time.Second, "the handler's end"); !errors.Is(err, ErrLockLost) {
		t.Fatalf("the handler's context ended with %v, want ErrLockLost", err)
	}
	if e := ev.next(t, EventLockLost); e.JobID != job.ID {
		t.Fatalf("lock lost of %s, want %s", e.JobID, job.ID)
	}
	if n := b.count("id = $1 AND status = 'running' AND lock_token = '00000000-0000-0000-0000-000000000001'",
		[16]byte(job.ID)); n != 1 {
		t.Fatal("the other attempt's row was changed")
	}
	select {
	case e := <-ev.ch:
		if e.Kind == EventCompleted {
			t.Fatalf("reported %s for a job another attempt holds", e.Kind)
		}
	case <-time.After(200 * time.Millisecond):
	}
}

// A CompleteTx that matches no row (the attempt already lost the job) returns ErrNotHeld and
// leaves the attempt running: its handler is cancelled like any other that lost its lock.
func TestCompleteTxAfterLockLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "late")
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	ev := newEvents()
	taken := make(chan struct{})
	result := make(chan error, 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		<-taken
		tx, err := b.pool.Begin(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		result <- job.CompleteTx(context.WithoutCancel(ctx), tx)
		<-ctx.Done()
		return nil
	}, &WorkerOptions{OnEvent: ev.on, PollInterval: noPoll, LockDuration: 2 * time.Second,
		HeartbeatInterval: 50 * time.Millisecond}))
	startWorker(t, w)
	waitFor(t, 30*time.Second, "the job to run", func() bool { return b.count("status = 'running'") == 1 })
	b.exec("UPDATE pgqueue_jobs SET lock_token = gen_random_uuid() WHERE id = $1", [16]byte(job.ID))
	close(taken)
	if err := receive(t, result, 30*time.Second, "CompleteTx"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("CompleteTx after the lock was lost = %v, want ErrNotHeld", err)
	}
	if e := ev.next(t, EventLockLost); e.JobID != job.ID {
		t.Fatalf("lock lost of %s, want %s", e.JobID, job.ID)
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

// A handler whose lease the runtime could not keep (the heartbeat could not reach the row before
// the lease ran out) is told its lock is lost, and Update then refuses, though the row still
// carries its token: the runtime ignores what that attempt does. Before the runtime's view was
// checked, Update waited for the table and saved the payload.
func TestUpdateAfterHeartbeatGaveUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "gave_up")
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	started, stopped := make(chan struct{}), make(chan struct{})
	result := make(chan error, 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		close(started)
		<-ctx.Done()
		close(stopped)
		result <- job.Update(context.Background(), 2)
		return nil
	}, &WorkerOptions{LockDuration: 300 * time.Millisecond, PollInterval: noPoll}))
	startWorker(t, w)
	<-started
	// Every statement on the jobs table, the heartbeat's too, waits until this ends.
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), "LOCK TABLE pgqueue_jobs IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	receive(t, stopped, 10*time.Second, "the handler's context to end")
	time.Sleep(100 * time.Millisecond) // an Update that went to the server waits for the lock now
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, result, 10*time.Second, "the update"); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Update after the heartbeat gave the lease up = %v, want ErrNotHeld", err)
	}
	if n := b.count("id = $1 AND payload = '1'", [16]byte(job.ID)); n != 1 {
		t.Fatal("the payload changed after the heartbeat gave the lease up")
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

// After a CompleteTx that rolled back, the row is locked for a while by another transaction (the
// handler's own here, as an Update or an operator's Cancel would): heartbeats skip it, but the
// job is still this attempt's, and it must not be given up for that.
func TestCompleteTxRolledBackRowLockedAWhile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "rollback-locked")
	ev := newEvents()
	cause := make(chan error, 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		tx, err := completeInOpenTx(ctx, b.pool, job)
		if err != nil {
			return err
		}
		if err := tx.Rollback(ctx); err != nil {
			return err
		}
		lock, err := b.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer lock.Rollback(context.Background())
		if _, err := lock.Exec(ctx, "SELECT FROM pgqueue_jobs WHERE id = $1 FOR UPDATE", [16]byte(job.ID)); err != nil {
			return err
		}
		// Several heartbeats go by while the row is locked.
		if !sleepCtx(ctx, time.Second) {
			cause <- context.Cause(ctx)
			return ctx.Err()
		}
		return lock.Commit(ctx)
	}, &WorkerOptions{Concurrency: 1, LockDuration: time.Hour, HeartbeatInterval: 100 * time.Millisecond,
		PollInterval: time.Hour, OnEvent: ev.on}))
	startWorker(t, w)
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e := <-ev.ch:
			switch {
			case e.JobID != job.ID:
			case e.Kind == EventCompleted:
				if n := b.count("true"); n != 0 {
					t.Fatalf("%d jobs left after the job completed", n)
				}
				return
			case e.Kind == EventLockLost || e.Kind == EventRetrying || e.Kind == EventFailed:
				t.Fatalf("event %s (%v): the job was taken from its handler while a transaction locked its row", e.Kind, e.Err)
			}
		case err := <-cause:
			t.Fatalf("the handler's context ended with %v", err)
		case <-deadline:
			t.Fatal("the job did not complete")
		}
	}
}

// A handler may return while the transaction it completed its job in is still open: the
// completer, which skips the row that transaction locks, settles the job once it ends. Committed,
// the job is completed there; rolled back, the handler's nil return completes it.
func TestCompleteTxEndsAfterReturn(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprint("commit=", commit), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			q := newQueue[int](t, b.client, "open-tx")
			ev := newEvents()
			ended := make(chan error, 1)
			w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
				tx, err := completeInOpenTx(ctx, b.pool, job)
				if err != nil {
					return err
				}
				go func() {
					time.Sleep(300 * time.Millisecond)
					if commit {
						ended <- tx.Commit(context.Background())
					} else {
						ended <- tx.Rollback(context.Background())
					}
				}()
				return nil
			}, &WorkerOptions{OnEvent: ev.on, PollInterval: noPoll}))
			job := must(q.Enqueue(t.Context(), 1, nil))
			startWorker(t, w)
			if err := receive(t, ended, 30*time.Second, "the transaction to end"); err != nil {
				t.Fatal(err)
			}
			if e := ev.nextOf(t, job.ID); e.Kind != EventStarted {
				t.Fatalf("event %s, want started", e.Kind)
			}
			if e := ev.nextOf(t, job.ID); e.Kind != EventCompleted || e.Attempt != 1 {
				t.Fatalf("event %s of attempt %d, want completed on the first", e.Kind, e.Attempt)
			}
			if n := b.count("true"); n != 0 {
				t.Fatalf("%d jobs left, want none", n)
			}
		})
	}
}

// A job completed with CompleteTx, in a transaction that committed, is reported completed
// whatever its handler does after: returns an error, panics, snoozes, or is stopped because
// WorkOne's context ended. None of these finds the row the outcome would change, and each was
// reported as a lost lock.
func TestCompleteTxCommittedThenHandlerFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		name string
		then func(ctx context.Context, stop context.CancelFunc) error
	}{
		{"error", func(context.Context, context.CancelFunc) error { return errors.New("after the commit") }},
		{"panic", func(context.Context, context.CancelFunc) error { panic("after the commit") }},
		{"snooze", func(context.Context, context.CancelFunc) error { return Snooze(time.Hour) }},
		{"shutdown", func(ctx context.Context, stop context.CancelFunc) error {
			stop()
			<-ctx.Done()
			return ctx.Err()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := newQueue[int](t, b.client, "then-"+randomName(""))
			ev := newEvents()
			ctx, stop := context.WithCancel(t.Context())
			defer stop()
			w := must(q.NewWorker(func(hctx context.Context, job *Job[int]) error {
				if err := completeCommitted(hctx, b.pool, job); err != nil {
					return err
				}
				return tc.then(hctx, stop)
			}, &WorkerOptions{OnEvent: ev.on}))
			job := must(q.Enqueue(t.Context(), 1, nil))
			r, err := w.WorkOne(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if r.JobID != job.ID || r.Kind != EventCompleted || r.Status != StatusCompleted || r.Err != nil {
				t.Fatalf("WorkOne = %+v, want job %s completed", r, job.ID)
			}
			ev.next(t, EventStarted)
			if e := ev.nextOf(t, job.ID); e.Kind != EventCompleted || e.Err != nil {
				t.Fatalf("event %s (%v), want completed", e.Kind, e.Err)
			}
			if n := b.count("queue = $1", q.Name()); n != 0 {
				t.Fatalf("%d jobs left, want none", n)
			}
		})
	}
}

// A repeating job completed with CompleteTx is reported with its next run, as one completed by
// the worker is (Event.RepeatedAs, WorkResult.RepeatedAs), and the worker is told of that run: it
// starts when it is due, not at the next poll (here there is none).
func TestCompleteTxRepeats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	complete := func(ctx context.Context, job *Job[int]) error {
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.Background())
		if err := job.CompleteTx(ctx, tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	q := newQueue[int](t, b.client, "repeat-tx")
	ev := newEvents()
	w := must(q.NewWorker(complete, &WorkerOptions{OnEvent: ev.on, PollInterval: noPoll}))
	first := must(q.Enqueue(t.Context(), 1, &EnqueueOptions{RepeatCount: 1, RepeatEvery: 200 * time.Millisecond}))
	startWorker(t, w)
	c := ev.next(t, EventCompleted)
	if c.JobID != first.ID || c.RepeatedAs == (ulid.ULID{}) {
		t.Fatalf("first run completed as %+v, want job %s with its next run", c, first.ID)
	}
	if c2 := ev.next(t, EventCompleted); c2.JobID != c.RepeatedAs || c2.RepeatedAs != (ulid.ULID{}) {
		t.Fatalf("second run completed as %+v, want job %s, the last run", c2, c.RepeatedAs)
	}

	q1 := newQueue[int](t, b.client, "repeat-tx-one")
	w1 := must(q1.NewWorker(complete, nil))
	job := must(q1.Enqueue(t.Context(), 1, &EnqueueOptions{RepeatCount: 1, RepeatEvery: time.Hour}))
	r, err := w1.WorkOne(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if r.JobID != job.ID || r.Kind != EventCompleted || r.RepeatedAs == (ulid.ULID{}) {
		t.Fatalf("WorkOne = %+v, want job %s completed with its next run", r, job.ID)
	}
	if n := b.count("id = $1 AND status = 'scheduled'", r.RepeatedAs); n != 1 {
		t.Fatalf("the next run %s is not scheduled", r.RepeatedAs)
	}
}

// A job cancelled while its handler's CompleteTx waits for the row (here locked by the
// canceller's own transaction) fails that CompleteTx, and its handler's context ends with
// ErrCancelled soon after, not at the next heartbeat a minute later: the check the cancellation
// started passes the attempt by while it is in its CompleteTx, and runs again once it is not.
func TestCancelDuringCompleteTx(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "cancel-in-tx")
	job, err := q.Enqueue(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	canceller, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer canceller.Rollback(context.Background())
	started, completing, causes := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	startWorker(t, must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		close(started)
		<-completing
		tx, err := b.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.Background())
		if err := job.CompleteTx(ctx, tx); err == nil {
			causes <- errors.New("CompleteTx of a cancelled job succeeded")
			return nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil
	}, &WorkerOptions{HeartbeatInterval: time.Minute, LockDuration: 5 * time.Minute})))
	receive(t, started, 10*time.Second, "the job to start")
	if _, err := canceller.Exec(ctx, "SELECT FROM pgqueue_jobs WHERE id = $1 FOR UPDATE", [16]byte(job.ID)); err != nil {
		t.Fatal(err)
	}
	close(completing)
	waitFor(t, 10*time.Second, "CompleteTx to wait for the row", func() bool {
		var n int
		err := b.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%lock_token%'").Scan(&n)
		return err == nil && n > 0
	})
	if err := q.CancelTx(ctx, canceller, job.ID); err != nil {
		t.Fatal(err)
	}
	if err := canceller.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if cause := receive(t, causes, 10*time.Second, "the handler's context to end"); !errors.Is(cause, ErrCancelled) {
		t.Fatalf("the handler's context ended with %v, want ErrCancelled", cause)
	}
}

// completeInOpenTx begins a transaction on pool and completes job in it with Job.CompleteTx. It
// returns the transaction, still open, or rolls it back and returns the error.
func completeInOpenTx[T any](ctx context.Context, pool *pgxpool.Pool, job *Job[T]) (pgx.Tx, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if err := job.CompleteTx(ctx, tx); err != nil {
		_ = tx.Rollback(ctx)
		return nil, err
	}
	return tx, nil
}

// completeCommitted completes job with Job.CompleteTx in a transaction of its own on pool, and
// commits it.
func completeCommitted[T any](ctx context.Context, pool *pgxpool.Pool, job *Job[T]) error {
	tx, err := completeInOpenTx(ctx, pool, job)
	if err != nil {
		return err
	}
	return tx.Commit(ctx)
}
