// Command quickstart migrates a schema, enqueues a few jobs of two kinds and serves both queues
// with one Client.Run until they are done. It reads the database from DATABASE_URL and works in the schema pgqueue_quickstart:
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable go run ./examples/quickstart
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgqueue/pgqueue"
)

// Greeting is the payload of the greetings queue's jobs.
type Greeting struct {
	Name string `json:"name"`
}

// Report is the payload of the reports queue's jobs.
type Report struct {
	Month string `json:"month"`
}

const schema = "pgqueue_quickstart"

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// run walks through the four steps every app takes: migrate, open a client and its queues,
// enqueue, work.
func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	pool, err := connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()

	// 1. Migrate (at deploy or start-up; safe to run from many processes at once).
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := pgqueue.Migrate(ctx, db); err != nil {
		return err
	}

	// 2. A client per process, a typed queue per kind of job.
	client, err := pgqueue.NewClient(pool, nil)
	if err != nil {
		return err
	}
	defer client.Close()
	greetings, err := pgqueue.NewQueue[Greeting](client, "greetings")
	if err != nil {
		return err
	}
	reports, err := pgqueue.NewQueue[Report](client, "reports")
	if err != nil {
		return err
	}

	// 3. Enqueue: now, with priority, later.
	if err := enqueue(ctx, greetings, reports); err != nil {
		return err
	}

	// 4. Work until all five jobs are done.
	return work(ctx, client, greetings, reports)
}

// connect opens a pool whose connections use a schema of pgqueue's own, and creates that
// schema.
func connect(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(cmp.Or(os.Getenv("DATABASE_URL"),
		"postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"))
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	// The runtime's own connections, plus one for each handler slot (Concurrency 1 + 2).
	cfg.MaxConns = max(cfg.MaxConns, pgqueue.RuntimeConns+3)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := pool.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// enqueue adds five jobs: two greetings now, one with a higher priority, one a second
// later, and a report.
func enqueue(ctx context.Context, greetings *pgqueue.Queue[Greeting], reports *pgqueue.Queue[Report]) error {
	for _, name := range []string{"Ada", "Grace"} {
		if _, err := greetings.Enqueue(ctx, Greeting{Name: name}, nil); err != nil {
			return err
		}
	}
	if _, err := greetings.Enqueue(ctx, Greeting{Name: "Barbara"}, &pgqueue.EnqueueOptions{Priority: 10}); err != nil {
		return err
	}
	if _, err := greetings.Enqueue(ctx, Greeting{Name: "Edsger"}, &pgqueue.EnqueueOptions{Delay: time.Second}); err != nil {
		return err
	}
	_, err := reports.Enqueue(ctx, Report{Month: "2026-11"}, nil)
	return err
}

// work makes a worker per queue, each with its own handler and options (checked here), then
// serves them with one Run until all five jobs are done; Run stops them gracefully.
func work(ctx context.Context, client *pgqueue.Client, greetings *pgqueue.Queue[Greeting], reports *pgqueue.Queue[Report]) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var done atomic.Int32
	countDone := func(ev pgqueue.Event) {
		if ev.Kind == pgqueue.EventCompleted && done.Add(1) == 5 {
			cancel()
		}
	}
	greeter, err := greetings.NewWorker(func(ctx context.Context, job *pgqueue.Job[Greeting]) error {
		fmt.Printf("hello, %s (job %s, attempt %d)\n", job.Payload.Name, job.ID, job.Attempt)
		return nil
	}, &pgqueue.WorkerOptions{Concurrency: 1, OnEvent: countDone})
	if err != nil {
		return err
	}
	reporter, err := reports.NewWorker(func(ctx context.Context, job *pgqueue.Job[Report]) error {
		fmt.Printf("report for %s (job %s)\n", job.Payload.Month, job.ID)
		return nil
	}, &pgqueue.WorkerOptions{Concurrency: 2, OnEvent: countDone})
	if err != nil {
		return err
	}
	if err := client.Run(runCtx, greeter, reporter); err != nil {
		return err
	}
	if done.Load() < 5 {
		return errors.New("interrupted before every job was done")
	}
	fmt.Println("all jobs done")
	return nil
}
