package pgqueuetest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

// The application: a signup inserts the user and enqueues a welcome email in one transaction.

type Welcome struct {
	To string `json:"to"`
}

func signup(ctx context.Context, pool *pgxpool.Pool, welcomes *pgqueue.Queue[Welcome], addr string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO users (email) VALUES ($1)", addr); err != nil {
		return err
	}
	if _, err := welcomes.EnqueueTx(ctx, tx, Welcome{To: addr}, nil); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// databaseURL is set by the test binary's TestMain:
//
//	srv, err := pgqueuetest.Start(ctx) // PGQUEUE_TEST_DATABASE_URL or DATABASE_URL; container.Start: else a container
//	databaseURL = srv.URL()
var databaseURL string

// testSignup is what the application's TestSignup would hold: a schema of its own with pgqueue
// migrated, the signup, an assertion on what it enqueued, and the queue worked in the test's
// goroutine.
func testSignup(t *testing.T) {
	db := pgqueuetest.NewDB(t, databaseURL, nil)
	if _, err := db.Pool.Exec(t.Context(), "CREATE TABLE users (email text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	welcomes, err := pgqueue.NewQueue[Welcome](db.Client, "welcome_emails")
	if err != nil {
		t.Fatal(err)
	}

	if err := signup(t.Context(), db.Pool, welcomes, "ada@example.com"); err != nil {
		t.Fatal(err)
	}
	pgqueuetest.RequireEnqueued(t, db.Pool, welcomes, func(w Welcome) bool { return w.To == "ada@example.com" })

	var sent []string
	worker, err := welcomes.NewWorker(func(ctx context.Context, job *pgqueue.Job[Welcome]) error {
		sent = append(sent, job.Payload.To) // no lock needed: the handler runs in this goroutine
		return nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	results := pgqueuetest.WorkUntilEmpty(t, worker)
	if len(results) != 1 || results[0].Kind != pgqueue.EventCompleted || len(sent) != 1 {
		t.Fatalf("worked %+v, sent %v; want one welcome sent", results, sent)
	}
	pgqueuetest.RequireNotEnqueued(t, db.Pool, welcomes, nil)
}

// A test of an application's signup with pgqueuetest (TestExample runs it).
func Example() {
	// func TestSignup(t *testing.T) { testSignup(t) }
}
