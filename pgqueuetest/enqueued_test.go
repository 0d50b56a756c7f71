package pgqueuetest

import (
	"context"
	"errors"
	"reflect"
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

// TestRequireEnqueuedReturnsWholeJobs enqueues a job with every option set and another that has
// failed an attempt, and checks that RequireEnqueued returns each whole: every field as the
// client's own look-up (Queue.Job) reads it, none left empty.
func TestRequireEnqueuedReturnsWholeJobs(t *testing.T) {
	t.Parallel()
	db := NewDB(t, databaseURL, nil)
	emails, err := pgqueue.NewQueue[email](db.Client, "emails")
	if err != nil {
		t.Fatal(err)
	}
	every, err := emails.Enqueue(t.Context(), email{To: "ada@example.com"}, &pgqueue.EnqueueOptions{
		Priority: 7, Delay: time.Hour, MaxAttempts: 3, RetryDelay: time.Hour, UniqueKey: "welcome-ada",
		RepeatCount: 2, RepeatEvery: 90 * time.Second, Key: "tenant-1", Weight: 2,
		Metadata: map[string]string{"trace": "00-abc-01", "request": "r-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	failed, err := emails.Enqueue(t.Context(), email{To: "grace@example.com"}, &pgqueue.EnqueueOptions{RetryDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := emails.NewWorker(func(context.Context, *pgqueue.Job[email]) error {
		return errors.New("smtp: try again")
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := WorkOne(t, worker); r.JobID != failed.ID || r.Kind != pgqueue.EventRetrying {
		t.Fatalf("worked %+v, want job %s retrying", r, failed.ID)
	}

	got := RequireEnqueued(t, db.Pool, emails, nil)
	if len(got) != 2 || got[0].ID != every.ID || got[1].ID != failed.ID {
		t.Fatalf("RequireEnqueued = %d jobs, want jobs %s and %s", len(got), every.ID, failed.ID)
	}
	for _, j := range got {
		want, err := emails.Job(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		sameJob(t, j, &want.Job)
	}
	j := got[0]
	if j.Key != "tenant-1" || j.Weight != 2 || j.Metadata["trace"] != "00-abc-01" || j.UniqueKey != "welcome-ada" ||
		j.RepeatRemaining != 2 || j.RepeatEvery != 90*time.Second || j.Priority != 7 || j.MaxAttempts != 3 ||
		j.Status != pgqueue.StatusScheduled || j.RunAt.IsZero() || j.CreatedAt.IsZero() || j.Payload.To != "ada@example.com" {
		t.Errorf("the job enqueued with every option came back as %+v", j)
	}
	if j := got[1]; j.Attempt != 1 || len(j.Errors) != 1 || j.Errors[0].Error != "smtp: try again" || j.AttemptedAt.IsZero() {
		t.Errorf("the job that failed an attempt came back as %+v", j)
	}
}

// sameJob fails the test unless every exported field of got equals want's (times as instants).
func sameJob[T any](t *testing.T, got, want *pgqueue.Job[T]) {
	t.Helper()
	g, w := reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem()
	for i := range g.NumField() {
		f := g.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		gf, wf := g.Field(i).Interface(), w.Field(i).Interface()
		if gt, ok := gf.(time.Time); ok {
			if !gt.Equal(wf.(time.Time)) {
				t.Errorf("job %s: %s = %v, want %v", got.ID, f.Name, gt, wf)
			}
			continue
		}
		if !reflect.DeepEqual(gf, wf) {
			t.Errorf("job %s: %s = %#v, want %#v", got.ID, f.Name, gf, wf)
		}
	}
}

// TestRequireEnqueuedSeesTheSQLTransaction: a database/sql application's job is seen inside its
// *sql.Tx before commit, and not outside; after commit through its *sql.DB.
func TestRequireEnqueuedSeesTheSQLTransaction(t *testing.T) {
	t.Parallel()
	db := NewDB(t, databaseURL, nil)
	emails, err := pgqueue.NewQueue[email](db.Client, "emails")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.SQL.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	job, err := emails.EnqueueSQLTx(t.Context(), tx, email{To: "ada@example.com"}, &pgqueue.EnqueueOptions{Key: "tenant-1"})
	if err != nil {
		t.Fatal(err)
	}

	got := RequireEnqueued(t, tx, emails, to("ada@example.com"))
	if len(got) != 1 || got[0].ID != job.ID || got[0].Key != "tenant-1" || got[0].Payload.To != "ada@example.com" {
		t.Fatalf("RequireEnqueued through the *sql.Tx = %+v, want job %s", got, job.ID)
	}
	RequireNotEnqueued(t, tx, emails, to("grace@example.com"))
	RequireNotEnqueued(t, db.SQL, emails, nil) // not committed yet
	RequireNotEnqueued(t, db.Pool, emails, nil)
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	RequireEnqueued(t, db.SQL, emails, to("ada@example.com"))
}

// TestRequireEnqueuedRefusesAnotherReader: a value that is neither pgx's nor database/sql's
// fails the test and says what is accepted.
func TestRequireEnqueuedRefusesAnotherReader(t *testing.T) {
	t.Parallel()
	db := NewDB(t, databaseURL, nil)
	emails, err := pgqueue.NewQueue[email](db.Client, "emails")
	if err != nil {
		t.Fatal(err)
	}
	msg := failure(t, func(tb testing.TB) { RequireEnqueued(tb, "postgres://", emails, nil) })
	if !strings.Contains(msg, "cannot read jobs through a string") || !strings.Contains(msg, "*sql.Tx") {
		t.Fatalf("RequireEnqueued through a string reported %q", msg)
	}
}
