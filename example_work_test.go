package pgqueue_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// A one-off command (or a test) that works a queue until it is empty, one job at a time in run
// order, in its own goroutine, and says what became of each job.
func ExampleWorker_WorkUntilEmpty() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	client, _ := pgqueue.NewClient(pool, nil)
	defer client.Close()
	emails, _ := pgqueue.NewQueue[Email](client, "emails")
	worker, err := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
		return send(ctx, job.Payload)
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	results, err := worker.WorkUntilEmpty(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Println(r.JobID, r.Kind, r.Status, r.Err) // e.g. 01J… retrying scheduled smtp: timeout
	}
}

// Run the next job of a queue and look at its outcome.
func ExampleWorker_WorkOne() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	emails, _ := pgqueue.NewQueue[Email](client, "emails")
	worker, _ := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
		return send(ctx, job.Payload)
	}, nil)

	r, err := worker.WorkOne(ctx)
	switch {
	case err != nil:
		log.Fatal(err)
	case r == nil:
		fmt.Println("no runnable job")
	case r.Kind == pgqueue.EventCompleted:
		fmt.Println("sent", r.JobID)
	default:
		fmt.Println(r.JobID, r.Kind, r.Err)
	}
}
