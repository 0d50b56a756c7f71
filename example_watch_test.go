package pgqueue_test

import (
	"context"
	"fmt"
	"log"
	"slices"

	"github.com/pgqueue/pgqueue"
)

// A live view of a queue, driven by LISTEN/NOTIFY: Watch opens with a resync (read the state
// then), and delivers each enqueue, start and outcome as it happens, naming the jobs a worker
// started or settled. No process polls the table.
func ExampleQueue_Watch_changes() {
	ctx := context.Background()
	pool, done := examplePool(ctx) // in a program: pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	defer done()
	client, err := pgqueue.NewClient(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	emails, err := pgqueue.NewQueue[Email](client, "emails")
	if err != nil {
		log.Fatal(err)
	}
	worker, err := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
		return send(ctx, job.Payload)
	}, nil)
	if err != nil {
		log.Fatal(err)
	}

	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	changes, err := emails.Watch(watchCtx) // closes when watchCtx ends
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println((<-changes).Kind) // resync: read the state afresh, e.g. with emails.Jobs

	job, err := emails.Enqueue(ctx, Email{To: "ada@example.com", Subject: "Welcome"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := worker.WorkOne(ctx); err != nil { // or a Run in any process
		log.Fatal(err)
	}
	for range 3 {
		c := <-changes
		fmt.Println(c.Kind, slices.Contains(c.JobIDs, job.ID))
	}
	// Output:
	// resync
	// enqueued false
	// started true
	// completed true
}
