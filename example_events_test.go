package pgqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/pgqueue/pgqueue"
)

// OnEvent turns a worker's events into the application's own log lines (and would feed its
// metrics the same way), while the library's own lines about single jobs stay at Debug.
func ExampleWorkerOptions_onEvent() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	defer client.Close()
	emails, _ := pgqueue.NewQueue[Email](client, "emails")
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))

	worker, err := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
		return send(ctx, job.Payload)
	}, &pgqueue.WorkerOptions{
		OnEvent: func(ev pgqueue.Event) {
			level := slog.LevelInfo
			switch ev.Kind {
			case pgqueue.EventStarted, pgqueue.EventDrained:
				return // too many to log
			case pgqueue.EventFailed, pgqueue.EventLockLost, pgqueue.EventError:
				level = slog.LevelError
			case pgqueue.EventRetrying:
				level = slog.LevelWarn
			}
			attrs := []any{"queue", ev.Queue, "job_id", ev.JobID, "attempt", ev.Attempt,
				"max_attempts", ev.MaxAttempts, "elapsed", ev.Elapsed}
			if ev.Err != nil {
				attrs = append(attrs, "error", ev.Err)
			}
			if !ev.RunAt.IsZero() {
				attrs = append(attrs, "run_at", ev.RunAt)
			}
			logger.Log(ctx, level, "job "+string(ev.Kind), attrs...)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := worker.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

// An Event marshals to JSON an API can return as is.
func ExampleEvent_MarshalJSON() {
	ev := pgqueue.Event{
		Kind:        pgqueue.EventRetrying,
		Queue:       "emails",
		JobID:       ulid.MustParse("01JD6Y9QK4B3Z8X1V0W2T5R7NM"),
		Attempt:     1,
		MaxAttempts: 25,
		Err:         errors.New("smtp: 451 try later"),
		RunAt:       time.Date(2026, 11, 29, 14, 0, 3, 0, time.UTC),
		Elapsed:     212500 * time.Microsecond,
		WorkerID:    "web-1-4412-9f3a2c",
	}
	out, _ := json.MarshalIndent(ev, "", "  ")
	fmt.Println(string(out))
	// Output:
	// {
	//   "kind": "retrying",
	//   "queue": "emails",
	//   "job_id": "01JD6Y9QK4B3Z8X1V0W2T5R7NM",
	//   "attempt": 1,
	//   "max_attempts": 25,
	//   "error": "smtp: 451 try later",
	//   "run_at": "2026-11-29T14:00:03Z",
	//   "elapsed": "212.5ms",
	//   "worker_id": "web-1-4412-9f3a2c"
	// }
}
