package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/pgqueue/pgqueue"
)

// A worker runs its queue's jobs by priority, then in the order they were enqueued. A handler
// completes its job by returning nil; an error fails the attempt, and the job runs again after
// a back-off (here the job's own RetryDelay) until it has used its MaxAttempts. Client.Run serves
// the worker until its context ends; this program stops it once three jobs have completed.
func ExampleQueue_NewWorker() {
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

	for _, e := range []struct {
		to   string
		opts *pgqueue.EnqueueOptions
	}{
		{"grace@example.com", nil},
		{"barbara@example.com", &pgqueue.EnqueueOptions{RetryDelay: 10 * time.Millisecond}},
		{"ada@example.com", &pgqueue.EnqueueOptions{Priority: 10}},
	} {
		if _, err := emails.Enqueue(ctx, Email{To: e.to, Subject: "Welcome"}, e.opts); err != nil {
			log.Fatal(err)
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	completed := 0
	worker, err := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
		if job.Payload.To == "barbara@example.com" && job.Attempt == 1 {
			fmt.Println(job.Payload.To, "attempt", job.Attempt, "fails")
			return errors.New("smtp: 451 try again later")
		}
		fmt.Println(job.Payload.To, "attempt", job.Attempt, "sent")
		return nil
	}, &pgqueue.WorkerOptions{
		Concurrency: 1, // one at a time, so that the output shows the order
		OnEvent: func(ev pgqueue.Event) { // on a goroutine of the worker's own, one event at a time
			if ev.Kind == pgqueue.EventCompleted {
				if completed++; completed == 3 {
					stop()
				}
			}
		},
	})
	if err != nil {
		log.Fatal(err) // an invalid option, named with its queue
	}
	err = client.Run(runCtx, worker) // blocks until runCtx ends, then shuts down gracefully
	fmt.Println("Run returned", err)
	// Output:
	// ada@example.com attempt 1 sent
	// grace@example.com attempt 1 sent
	// barbara@example.com attempt 1 fails
	// barbara@example.com attempt 2 sent
	// Run returned <nil>
}
