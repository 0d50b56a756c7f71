package pgqueue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgqueue/pgqueue"
)

// An application on database/sql (or sqlx, bun, sqlc, GORM, which hand out a *sql.Tx) enqueues
// in its own transaction, whichever Postgres driver opened it: the jobs exist if and only if
// the transaction commits. The client itself runs on a pgx pool of the same database and schema.
func ExampleQueue_EnqueueSQLTx_signup() {
	ctx := context.Background()
	pool, done := examplePool(ctx) // pgqueue's pool: pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	defer done()
	db := stdlib.OpenDBFromPool(pool) // the application's *sql.DB: sql.Open("pgx", …) or lib/pq's "postgres"
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE users (email text PRIMARY KEY)"); err != nil {
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

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback() // does nothing once committed
	if _, err := tx.ExecContext(ctx, "INSERT INTO users (email) VALUES ($1)", "ada@example.com"); err != nil {
		log.Fatal(err)
	}
	if _, err := emails.EnqueueSQLTx(ctx, tx, Email{To: "ada@example.com", Subject: "Welcome"}, nil); err != nil {
		log.Fatal(err)
	}
	reminders := []Email{{To: "ada@example.com", Subject: "Day 1"}, {To: "ada@example.com", Subject: "Day 7"}}
	if _, err := emails.EnqueueManySQLTx(ctx, tx, reminders, nil); err != nil { // one statement
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil { // the jobs appear, and workers wake, here
		log.Fatal(err)
	}

	page, err := emails.Jobs(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range page.Jobs {
		fmt.Println(e.Place, e.Payload.Subject)
	}
	// Output:
	// 1 Welcome
	// 2 Day 1
	// 3 Day 7
}
