package pgqueue_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver of database/sql; lib/pq's "postgres" works as well

	"github.com/pgqueue/pgqueue"
)

// An application on database/sql (or sqlx, bun, GORM, which hand out a *sql.Tx) enqueues in its
// own transaction: the job exists only if the transaction commits. The client still runs on a
// pgx pool of the same database and schema.
func ExampleQueue_EnqueueSQLTx() {
	ctx := context.Background()
	db, err := sql.Open("pgx", os.Getenv("DATABASE_URL")) // the application's handle
	if err != nil {
		log.Fatal(err)
	}
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL")) // pgqueue's
	client, _ := pgqueue.NewClient(pool, nil)
	emails, _ := pgqueue.NewQueue[Email](client, "emails")

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO users (email) VALUES ($1)", "ada@example.com"); err != nil {
		log.Fatal(err)
	}
	if _, err := emails.EnqueueSQLTx(ctx, tx, Email{To: "ada@example.com", Subject: "Welcome"}, nil); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil { // the job becomes visible, and workers wake, here
		log.Fatal(err)
	}
}

func ExampleQueue_EnqueueManySQLTx() {
	ctx := context.Background()
	db, _ := sql.Open("pgx", os.Getenv("DATABASE_URL"))
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	emails, _ := pgqueue.NewQueue[Email](client, "emails")

	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	batch := []Email{{To: "ada@example.com"}, {To: "grace@example.com"}}
	ids, err := emails.EnqueueManySQLTx(ctx, tx, batch, nil) // one statement, one wake-up on commit
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(ids))
}
