package pgqueue

import (
	"context"
	"errors"
	"testing"
	"time"
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
