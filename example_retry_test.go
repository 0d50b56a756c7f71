package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/pgqueue/pgqueue"
)

// A job that failed for good (here its handler returned Permanent: retrying could not help until
// someone fixed the cause) is kept, with its errors, for Retry: it runs again with a fresh set of
// attempts. WorkOne runs one job in the calling goroutine and says what became of it.
func ExampleQueue_Retry() {
	ctx := context.Background()
	pool, done := examplePool(ctx) // in a program: pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	defer done()
	client, err := pgqueue.NewClient(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	exports, err := pgqueue.NewQueue[string](client, "exports")
	if err != nil {
		log.Fatal(err)
	}

	bucketExists := false
	worker, err := exports.NewWorker(func(ctx context.Context, job *pgqueue.Job[string]) error {
		if !bucketExists {
			return pgqueue.Permanent(errors.New("bucket exports-eu does not exist"))
		}
		return nil // upload job.Payload
	}, nil)
	if err != nil {
		log.Fatal(err)
	}

	job, err := exports.Enqueue(ctx, "customers.csv", nil)
	if err != nil {
		log.Fatal(err)
	}
	r, err := worker.WorkOne(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Kind, r.Status, r.Err)

	bucketExists = true // an operator creates the bucket, then retries the job
	if err := exports.Retry(ctx, job.ID); err != nil {
		log.Fatal(err)
	}
	r, err = worker.WorkOne(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Kind, r.Status, "attempt", r.Attempt) // a fresh set of attempts

	// Completed jobs are deleted at once (Config.Retention), so there is nothing left to retry.
	err = exports.Retry(ctx, job.ID)
	fmt.Println(errors.Is(err, pgqueue.ErrNotFound))
	// Output:
	// failed failed bucket exports-eu does not exist
	// completed completed attempt 1
	// true
}
