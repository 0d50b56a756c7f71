package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgqueue/pgqueue"
)

// These examples need a database, so they are compiled but not run.

type Email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

func send(ctx context.Context, e Email) error { return nil }

func ExampleMigrate() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := pgqueue.Migrate(ctx, db); err != nil {
		log.Fatal(err)
	}
}

func ExampleQueue_Enqueue() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	emails, _ := pgqueue.NewQueue[Email](client, "emails")

	job, err := emails.Enqueue(ctx, Email{To: "ada@example.com", Subject: "Welcome"}, &pgqueue.EnqueueOptions{
		Priority:    10,
		Delay:       time.Minute,
		MaxAttempts: 5,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.ID, job.Status) // scheduled, since it is delayed
}

// A job enqueued with EnqueueTx exists only if the application's transaction commits.
func ExampleQueue_EnqueueTx() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	emails, _ := pgqueue.NewQueue[Email](client, "emails")

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "INSERT INTO users (email) VALUES ($1)", "ada@example.com"); err != nil {
		log.Fatal(err)
	}
	if _, err := emails.EnqueueTx(ctx, tx, Email{To: "ada@example.com", Subject: "Welcome"}, nil); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil { // the job becomes visible, and workers wake, here
		log.Fatal(err)
	}
}

func ExampleQueue_EnqueueMany() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	emails, _ := pgqueue.NewQueue[Email](client, "emails")

	batch := make([]Email, 0, 1000)
	for i := range 1000 {
		batch = append(batch, Email{To: fmt.Sprintf("user%d@example.com", i), Subject: "News"})
	}
	ids, err := emails.EnqueueMany(ctx, batch, nil) // one COPY, one wake-up
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(ids))
}

// A worker runs jobs until its context ends, then shuts down gracefully.
func Example_worker() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	defer client.Close()
	emails, _ := pgqueue.NewQueue[Email](client, "emails")

	worker, err := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
		// Runs at least once per job: make it idempotent.
		return send(ctx, job.Payload)
	}, &pgqueue.WorkerOptions{
		Concurrency: 20,
		OnEvent: func(ev pgqueue.Event) {
			if ev.Kind == pgqueue.EventFailed {
				log.Printf("job %s failed for good: %v", ev.JobID, ev.Err)
			}
		},
	})
	if err != nil {
		log.Fatal(err) // an invalid option, named with its queue
	}
	if err := worker.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatal(err)
	}
}

// One Run serves every queue of the process: one claim loop, one heartbeat and one completer
// for all of them, each worker with its own handler and options.
func ExampleClient_Run() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	defer client.Close()
	emails, _ := pgqueue.NewQueue[Email](client, "emails")
	type Invoice struct{ Order int64 }
	invoices, _ := pgqueue.NewQueue[Invoice](client, "invoices")

	mailer, err := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
		return send(ctx, job.Payload)
	}, &pgqueue.WorkerOptions{Concurrency: 50})
	if err != nil {
		log.Fatal(err)
	}
	billing, err := invoices.NewWorker(func(ctx context.Context, job *pgqueue.Job[Invoice]) error {
		return nil // bill job.Payload.Order
	}, &pgqueue.WorkerOptions{Concurrency: 5, JobTimeout: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	// Blocks until ctx ends, then stops both gracefully.
	if err := client.Run(ctx, mailer, billing); err != nil {
		log.Fatal(err)
	}
}

// A report that runs every night, for ever. The unique key keeps a single chain however many
// times the application enqueues it at start-up.
func ExampleEnqueueOptions_repeat() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	reports, _ := pgqueue.NewQueue[string](client, "reports")

	job, err := reports.Enqueue(ctx, "nightly", &pgqueue.EnqueueOptions{
		UniqueKey:   "nightly-report",
		RepeatCount: pgqueue.RepeatForever,
		RepeatEvery: 24 * time.Hour,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(job.Duplicate) // true on every start-up after the first
}

// Welcome an address once, however many times sign-up is retried.
func ExampleEnqueueOptions_unique() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	emails, _ := pgqueue.NewQueue[Email](client, "emails")

	to := "ada@example.com"
	job, err := emails.Enqueue(ctx, Email{To: to, Subject: "Welcome"}, &pgqueue.EnqueueOptions{UniqueKey: "welcome:" + to})
	if err != nil {
		log.Fatal(err)
	}
	if job.Duplicate {
		fmt.Println("already queued as", job.ID)
	}
}

// Cancelling stops a running job within milliseconds: its handler's context is cancelled.
func ExampleQueue_Cancel() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	exports, _ := pgqueue.NewQueue[string](client, "exports")

	job, _ := exports.Enqueue(ctx, "customers.csv", nil)
	err := exports.Cancel(ctx, job.ID)
	switch {
	case errors.Is(err, pgqueue.ErrJobFinished):
		fmt.Println("too late: it already finished")
	case err != nil:
		log.Fatal(err)
	}

	// In the handler:
	_ = func(ctx context.Context, job *pgqueue.Job[string]) error {
		<-ctx.Done()
		if errors.Is(context.Cause(ctx), pgqueue.ErrCancelled) {
			return nil // the outcome is ignored anyway; clean up and return
		}
		return ctx.Err()
	}
}

// A live view of a queue, without polling.
func ExampleQueue_Watch() {
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	emails, _ := pgqueue.NewQueue[Email](client, "emails")

	changes, err := emails.Watch(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for c := range changes { // until ctx ends
		if c.Kind == pgqueue.ChangeResync {
			page, _ := emails.Jobs(ctx, nil)
			fmt.Println("jobs waiting or running:", len(page.Jobs))
			continue
		}
		fmt.Println(c.Kind, c.JobIDs)
	}
}

// Walk a queue page by page, in the order its jobs will run.
func ExampleQueue_Jobs() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	emails, _ := pgqueue.NewQueue[Email](client, "emails")

	opts := &pgqueue.ListOptions{Limit: 500}
	for {
		page, err := emails.Jobs(ctx, opts)
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range page.Jobs {
			fmt.Println(e.Place, e.Status, e.ID, e.Payload.To)
		}
		if page.Next == "" {
			break
		}
		opts.Cursor = page.Next
	}
}
