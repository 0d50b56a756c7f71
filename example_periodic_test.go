package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgqueue/pgqueue"
)

// Report is the payload of the reports queue.
type Report struct {
	Kind string    `json:"kind"`
	For  time.Time `json:"for"`
}

// Periodic jobs are declared on the worker of their queue, the same in every process; each
// occurrence is enqueued once, whichever processes run, and those missed while none ran are
// handled as each schedule's policy says.
func ExampleWorker_AddPeriodic() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	client, _ := pgqueue.NewClient(pool, nil)
	defer client.Close()
	reports, _ := pgqueue.NewQueue[Report](client, "reports")
	worker, _ := reports.NewWorker(func(ctx context.Context, job *pgqueue.Job[Report]) error {
		fmt.Println("report", job.Payload.Kind, "for", job.Payload.For)
		return nil
	}, nil)

	// At 03:00 Paris time; missed while the app was down: run the latest once (the default).
	err = worker.AddPeriodic(pgqueue.Periodic[Report]{
		Name: "nightly",
		Cron: "CRON_TZ=Europe/Paris 0 3 * * *",
		PayloadFunc: func(_ context.Context, at time.Time) (Report, error) {
			return Report{Kind: "nightly", For: at.AddDate(0, 0, -1)}, nil
		},
		Options: &pgqueue.EnqueueOptions{MaxAttempts: 5},
	})
	if err != nil {
		log.Fatal(err) // errors.Is(err, pgqueue.ErrInvalidOption): a bad expression, zone, name…
	}
	// Every 90 s; missed ones are all made up, the last 20 at most.
	err = worker.AddPeriodic(pgqueue.Periodic[Report]{
		Name: "usage", Every: 90 * time.Second, Payload: Report{Kind: "usage"},
		Missed: pgqueue.MissedRunAll, MissedMax: 20,
	})
	if err != nil {
		log.Fatal(err)
	}

	runCtx, stop := context.WithTimeout(ctx, 5*time.Minute)
	defer stop()
	if err := worker.Run(runCtx); err != nil { // enqueues the periodic jobs while it runs
		log.Fatal(err)
	}
}

// List the periodic jobs with their last and next occurrence, and delete the row of one that
// the code no longer declares. Declared and Next come from this client's declarations: a client
// with none (a CLI) sees every schedule as not declared here.
func ExampleClient_Schedules() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	schedules, err := client.Schedules(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range schedules {
		fmt.Println(s.Queue, s.Name, s.Spec, "last:", s.Last, "handled to:", s.Handled, "next:", s.Next)
	}
	// The weekly report was removed from the code in the last release.
	if err := client.DeleteSchedule(ctx, "reports", "weekly"); err != nil && !errors.Is(err, pgqueue.ErrNotFound) {
		log.Fatal(err)
	}
}
