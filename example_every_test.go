package pgqueue_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/pgqueue/pgqueue"
)

// A periodic job every second, declared on the worker of its queue: while Run serves the worker,
// the queue gets one job at each occurrence (the multiples of the interval since the Unix epoch),
// exactly once however many processes declare it. Client.Schedules lists it with its next run.
func ExampleWorker_AddPeriodic_every() {
	ctx := context.Background()
	pool, done := examplePool(ctx) // in a program: pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	defer done()
	client, err := pgqueue.NewClient(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	reports, err := pgqueue.NewQueue[Report](client, "reports")
	if err != nil {
		log.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	worker, err := reports.NewWorker(func(ctx context.Context, job *pgqueue.Job[Report]) error {
		fmt.Println("report:", job.Payload.Kind)
		stop() // one occurrence is enough here; Run hands nothing back, this job completes
		return nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	err = worker.AddPeriodic(pgqueue.Periodic[Report]{
		Name:    "usage",
		Every:   time.Second, // or Cron: "CRON_TZ=Europe/Paris 0 3 * * *"
		Payload: Report{Kind: "usage"},
	})
	if err != nil {
		log.Fatal(err) // errors.Is(err, pgqueue.ErrInvalidOption): a bad schedule, name or option
	}
	if err := client.Run(runCtx, worker); err != nil {
		log.Fatal(err)
	}

	schedules, err := client.Schedules(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range schedules {
		fmt.Println(s.Queue, s.Name, s.Spec, "declared:", s.Declared, "next after last:", s.Next.After(s.Last))
	}
	// Output:
	// report: usage
	// reports usage @every 1s declared: true next after last: true
}
