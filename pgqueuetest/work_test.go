package pgqueuetest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// TestWorkOne runs a handler that checkpoints with Update, fails once, and on its second attempt
// completes the job in its own transaction.
func TestWorkOne(t *testing.T) {
	t.Parallel()
	db := NewDB(t, databaseURL, nil)
	if _, err := db.Pool.Exec(t.Context(), "CREATE TABLE sent (addr text)"); err != nil {
		t.Fatal(err)
	}
	emails, err := pgqueue.NewQueue[email](db.Client, "emails")
	if err != nil {
		t.Fatal(err)
	}
	worker, err := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[email]) error {
		if job.Attempt == 1 {
			if err := job.Update(ctx, email{To: strings.ToUpper(job.Payload.To)}); err != nil {
				t.Fatalf("Update: %v", err) // the handler runs in the test's goroutine
			}
			return errors.New("smtp: try again")
		}
		tx, err := db.Pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, "INSERT INTO sent VALUES ($1)", job.Payload.To); err != nil {
			return err
		}
		if err := job.CompleteTx(ctx, tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}, &pgqueue.WorkerOptions{RetryBackoff: pgqueue.Backoff{Initial: 1, Max: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := emails.Enqueue(t.Context(), email{To: "ada@example.com"}, nil); err != nil {
		t.Fatal(err)
	}

	first := WorkOne(t, worker)
	if first.Kind != pgqueue.EventRetrying || first.Err == nil || first.Err.Error() != "smtp: try again" {
		t.Fatalf("first attempt: %+v, want retrying with the handler's error", first)
	}
	second := WorkOne(t, worker)
	if second.Kind != pgqueue.EventCompleted || second.Attempt != 2 || second.JobID != first.JobID {
		t.Fatalf("second attempt: %+v, want job %s completed at attempt 2", second, first.JobID)
	}
	var addr string
	if err := db.Pool.QueryRow(t.Context(), "SELECT addr FROM sent").Scan(&addr); err != nil || addr != "ADA@EXAMPLE.COM" {
		t.Fatalf("sent %q (%v), want the payload Update saved", addr, err)
	}
	if msg := failure(t, func(tb testing.TB) { WorkOne(tb, worker) }); !strings.Contains(msg, "the queue has no runnable job") {
		t.Fatalf("WorkOne of an empty queue reported %q", msg)
	}
	if results := WorkUntilEmpty(t, worker); len(results) != 0 {
		t.Fatalf("WorkUntilEmpty of an empty queue ran %d jobs", len(results))
	}
}
