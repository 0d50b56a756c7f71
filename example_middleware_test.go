package pgqueue_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// Middleware around every job of a client (logging each attempt, turning a panic into a
// permanent failure) and around one worker's jobs (a time limit for the "emails" queue only).
func ExampleMiddleware() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	logAttempts := func(ctx context.Context, job *pgqueue.JobInfo, next func(context.Context) error) error {
		start := time.Now()
		err := next(ctx)
		pgqueue.Logger(ctx).Info("attempt done", "wait", start.Sub(job.RunAt), "took", time.Since(start), "error", err)
		return err
	}
	noRetryOnPanic := func(ctx context.Context, job *pgqueue.JobInfo, next func(context.Context) error) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = pgqueue.Permanent(fmt.Errorf("panic: %v", v))
			}
		}()
		return next(ctx)
	}
	client, err := pgqueue.NewClient(pool, &pgqueue.Config{
		Middleware: []pgqueue.Middleware{logAttempts, noRetryOnPanic}, // outermost first
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	limit := func(ctx context.Context, job *pgqueue.JobInfo, next func(context.Context) error) error {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return next(ctx)
	}
	emails, _ := pgqueue.NewQueue[Email](client, "emails")
	worker, err := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
		return send(ctx, job.Payload)
	}, &pgqueue.WorkerOptions{Middleware: []pgqueue.Middleware{limit}}) // inside the client's
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// A handler logs through the worker's logger, with the job's queue, id and attempt on each line.
func ExampleLogger() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, &pgqueue.Config{Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil))})
	emails, _ := pgqueue.NewQueue[Email](client, "emails")
	worker, _ := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
		log := pgqueue.Logger(ctx)
		log.Info("sending", "to", job.Payload.To)
		// {"time":"…","level":"INFO","msg":"sending","queue":"emails","job_id":"01J…","attempt":1,"max_attempts":25,"to":"ada@example.com"}
		return send(ctx, job.Payload)
	}, nil)
	_ = worker.Run(ctx)
}
