package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/pgqueue/pgqueue"
)

// Cancelling a running job reaches its worker in any process through NOTIFY: the handler's
// context ends, with ErrCancelled as its cause, within milliseconds, and the job ends cancelled
// whatever the handler then returns. A job that has not started ends cancelled at once.
func ExampleQueue_Cancel_running() {
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

	started := make(chan struct{})
	stopped := make(chan error, 1)            // the handler's context's cause
	events := make(chan pgqueue.EventKind, 1) // the job's outcome, from OnEvent
	worker, err := exports.NewWorker(func(ctx context.Context, job *pgqueue.Job[string]) error {
		fmt.Println("exporting", job.Payload)
		close(started)
		<-ctx.Done() // a long export, which watches its context
		stopped <- context.Cause(ctx)
		return ctx.Err() // ignored: the job is cancelled
	}, &pgqueue.WorkerOptions{
		OnEvent: func(ev pgqueue.Event) {
			if ev.Kind == pgqueue.EventCancelled {
				events <- ev.Kind
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	job, err := exports.Enqueue(ctx, "customers.csv", nil)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error)
	go func() { ran <- client.Run(runCtx, worker) }()

	<-started
	if err := exports.Cancel(ctx, job.ID); err != nil && !errors.Is(err, pgqueue.ErrJobFinished) {
		log.Fatal(err) // ErrJobFinished: it completed or failed first
	}
	fmt.Println("stopped:", <-stopped)
	fmt.Println("event:", <-events)
	stop()
	if err := <-ran; err != nil {
		log.Fatal(err)
	}
	entry, err := exports.Job(ctx, job.ID) // cancelled jobs are kept 7 days (Config.Retention)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("status:", entry.Status)
	// Output:
	// exporting customers.csv
	// stopped: pgqueue: job cancelled
	// event: cancelled
	// status: cancelled
}
