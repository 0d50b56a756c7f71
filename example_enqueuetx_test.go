package pgqueue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/pgqueue/pgqueue"
)

// A sign-up inserts its user and enqueues the welcome email in one pgx transaction: the job
// exists if and only if the transaction commits, and workers wake when it commits. The second
// sign-up rolls back, and leaves neither a user nor a job.
func ExampleQueue_EnqueueTx_signup() {
	ctx := context.Background()
	pool, done := examplePool(ctx) // in a program: pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	defer done()
	if _, err := pool.Exec(ctx, "CREATE TABLE users (email text PRIMARY KEY)"); err != nil {
		log.Fatal(err)
	}
	client, err := pgqueue.NewClient(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	emails, err := pgqueue.NewQueue[Email](client, "emails")
	if err != nil {
		log.Fatal(err)
	}

	signup := func(addr string, commit bool) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) // does nothing once committed
		if _, err := tx.Exec(ctx, "INSERT INTO users (email) VALUES ($1)", addr); err != nil {
			return err
		}
		if _, err := emails.EnqueueTx(ctx, tx, Email{To: addr, Subject: "Welcome"}, nil); err != nil {
			return err
		}
		if !commit {
			return nil // say a later step failed: the deferred Rollback undoes the user and the job
		}
		return tx.Commit(ctx) // the job appears, and workers wake, here
	}
	if err := signup("ada@example.com", true); err != nil {
		log.Fatal(err)
	}
	if err := signup("grace@example.com", false); err != nil {
		log.Fatal(err)
	}

	page, err := emails.Jobs(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range page.Jobs {
		fmt.Println(e.Status, e.Payload.To)
	}
	// Output:
	// available ada@example.com
}
