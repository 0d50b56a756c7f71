package pgqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/pgqueue/pgqueue"
)

// Order is the payload of the examples' workflow steps.
type Order struct {
	ID   int    `json:"id"`
	Step string `json:"step"`
}

// A workflow is a DAG of jobs, across queues, enqueued all or nothing (here in a transaction of
// its own; EnqueueTx puts it in the application's). Charging the card and reserving the stock
// wait for the order's check; shipping waits for both. Each step starts only once its parents
// have completed.
func ExampleWorkflow() {
	ctx := context.Background()
	pool, done := examplePool(ctx)
	defer done()
	client, _ := pgqueue.NewClient(pool, nil)
	defer client.Close()
	orders, _ := pgqueue.NewQueue[Order](client, "orders")
	payments, _ := pgqueue.NewQueue[Order](client, "payments")

	wf := client.NewWorkflow("order 42")
	check := orders.AddStep(wf, Order{42, "check"}, nil)
	charge := payments.AddStep(wf, Order{42, "charge"}, &pgqueue.StepOptions{After: pgqueue.After(check)})
	reserve := orders.AddStep(wf, Order{42, "reserve"}, &pgqueue.StepOptions{After: pgqueue.After(check)})
	orders.AddStep(wf, Order{42, "ship"}, &pgqueue.StepOptions{After: pgqueue.After(charge, reserve)})
	if err := wf.Enqueue(ctx); err != nil {
		log.Fatal(err)
	}

	handle := func(_ context.Context, job *pgqueue.Job[Order]) error {
		fmt.Println(job.Payload.Step)
		return nil
	}
	orderWorker, err := orders.NewWorker(handle, nil)
	if err != nil {
		log.Fatal(err)
	}
	paymentWorker, err := payments.NewWorker(handle, nil)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	go func() {
		info, err := client.AwaitWorkflow(ctx, wf.ID) // woken by NOTIFY when the workflow finishes
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(info.Name, info.Status)
		stop()
	}()
	_ = client.Run(runCtx, orderWorker, paymentWorker)
	// charge and reserve run in either order (or at once), after check and before ship.

	// Unordered output:
	// check
	// charge
	// reserve
	// ship
	// order 42 completed
}

// Quote is a step's result in the fan-in example.
type Quote struct {
	Cents int `json:"cents"`
}

// A fan-in with results: each supplier's step records its quote (Job.SetResult), and the step
// that waits for all of them reads their results in one query (Job.Parents).
func ExampleJob_Parents() {
	ctx := context.Background()
	pool, done := examplePool(ctx)
	defer done()
	client, _ := pgqueue.NewClient(pool, nil)
	defer client.Close()
	quotes, _ := pgqueue.NewQueue[string](client, "quotes")

	wf := client.NewWorkflow("cheapest supplier")
	for _, supplier := range []string{"acme", "globex", "initech"} {
		quotes.AddStep(wf, supplier, &pgqueue.StepOptions{Name: supplier})
	}
	pick := quotes.AddStep(wf, "pick", &pgqueue.StepOptions{After: pgqueue.After(wf.Steps()...)})
	if err := wf.Enqueue(ctx); err != nil {
		log.Fatal(err)
	}

	prices := map[string]int{"acme": 1250, "globex": 990, "initech": 1100}
	worker, err := quotes.NewWorker(func(ctx context.Context, job *pgqueue.Job[string]) error {
		if job.Payload != "pick" {
			return job.SetResult(Quote{prices[job.Payload]}) // written with the completion
		}
		parents, err := job.Parents(ctx)
		if err != nil {
			return err
		}
		best := ""
		for _, p := range parents.Jobs {
			if best == "" || prices[p.Step] < prices[best] {
				best = p.Step
			}
		}
		return job.SetResult(best)
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	go func() {
		r, err := client.AwaitJob(ctx, pick.ID)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.Status, string(r.Result))
		stop()
	}()
	_ = client.Run(runCtx, worker)
	// Output:
	// completed "globex"
}

// A batch with a callback: the callback waits for every job of the batch and runs once they have
// all finished, here only if some failed (CallbackOnFailure; CallbackOnSuccess and
// CallbackAlways are the other conditions), with their outcomes counted.
func ExampleCallbackWhen() {
	ctx := context.Background()
	pool, done := examplePool(ctx)
	defer done()
	client, _ := pgqueue.NewClient(pool, nil)
	defer client.Close()
	imports, _ := pgqueue.NewQueue[string](client, "imports")
	reports, _ := pgqueue.NewQueue[string](client, "reports")

	batch := client.NewWorkflow("nightly import")
	for _, file := range []string{"a.csv", "b.csv", "broken.csv"} {
		imports.AddStep(batch, file, &pgqueue.StepOptions{EnqueueOptions: pgqueue.EnqueueOptions{MaxAttempts: 1}})
	}
	reports.AddStep(batch, "tell the on-call", &pgqueue.StepOptions{
		After: pgqueue.After(batch.Steps()...), Callback: pgqueue.CallbackOnFailure})
	if err := batch.Enqueue(ctx); err != nil {
		log.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	importer, err := imports.NewWorker(func(_ context.Context, job *pgqueue.Job[string]) error {
		if job.Payload == "broken.csv" {
			return errors.New("line 3: bad date")
		}
		return nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	reporter, err := reports.NewWorker(func(ctx context.Context, job *pgqueue.Job[string]) error {
		p, err := job.Parents(ctx)
		if err != nil {
			return err
		}
		fmt.Printf("%s: %d completed, %d failed\n", job.Payload, p.Completed, p.Failed)
		stop()
		return nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	_ = client.Run(runCtx, importer, reporter)
	// Output:
	// tell the on-call: 2 completed, 1 failed
}
