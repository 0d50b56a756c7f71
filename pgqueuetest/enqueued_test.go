package pgqueuetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

type email struct {
	To string `json:"to"`
}

func to(addr string) func(email) bool { return func(e email) bool { return e.To == addr } }

func TestRequireEnqueuedSeesTheTransaction(t *testing.T) {
	t.Parallel()
	db := NewDB(t, databaseURL, nil)
	emails, err := pgqueue.NewQueue[email](db.Client, "emails")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	job, err := emails.EnqueueTx(t.Context(), tx, email{To: "ada@example.com"}, &pgqueue.EnqueueOptions{Delay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}

	got := RequireEnqueued(t, tx, emails, to("ada@example.com"))
	if len(got) != 1 || got[0].ID != job.ID || got[0].Status != pgqueue.StatusScheduled || got[0].Payload.To != "ada@example.com" {
		t.Fatalf("RequireEnqueued = %+v, want job %s", got, job.ID)
	}
	RequireNotEnqueued(t, tx, emails, to("grace@example.com"))
	RequireNotEnqueued(t, db.Pool, emails, nil) // not committed yet
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	RequireEnqueued(t, db.Pool, emails, nil)
}

func TestRequireEnqueuedFailures(t *testing.T) {
	t.Parallel()
	db := NewDB(t, databaseURL, nil)
	emails, err := pgqueue.NewQueue[email](db.Client, "emails")
	if err != nil {
		t.Fatal(err)
	}
	msg := failure(t, func(tb testing.TB) { RequireEnqueued(tb, db.Pool, emails, nil) })
	if !strings.Contains(msg, "no waiting job of queue emails matches; the queue has no waiting job") {
		t.Fatalf("RequireEnqueued of an empty queue reported %q", msg)
	}
	if _, err := emails.Enqueue(t.Context(), email{To: "ada@example.com"}, nil); err != nil {
		t.Fatal(err)
	}
	msg = failure(t, func(tb testing.TB) { RequireEnqueued(tb, db.Pool, emails, to("grace@example.com")) })
	if !strings.Contains(msg, "waiting jobs (1):") || !strings.Contains(msg, `payload={"to":"ada@example.com"}`) {
		t.Fatalf("RequireEnqueued without a match reported %q, want the waiting jobs listed", msg)
	}
	msg = failure(t, func(tb testing.TB) { RequireNotEnqueued(tb, db.Pool, emails, to("ada@example.com")) })
	if !strings.Contains(msg, "1 waiting jobs of queue emails match, want none") {
		t.Fatalf("RequireNotEnqueued with a match reported %q", msg)
	}
	if _, err := db.Pool.Exec(t.Context(), `INSERT INTO pgqueue_jobs (id, queue, status, payload)
		VALUES (gen_random_uuid(), 'emails', 'available', '[1]')`); err != nil {
		t.Fatal(err)
	}
	msg = failure(t, func(tb testing.TB) { RequireEnqueued(tb, db.Pool, emails, nil) })
	if !strings.Contains(msg, "does not decode into pgqueuetest.email") {
		t.Fatalf("RequireEnqueued over a payload that does not decode reported %q", msg)
	}
}
