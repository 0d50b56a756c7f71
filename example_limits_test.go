package pgqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/pgqueue/pgqueue"
)

// Hook is the payload of the webhooks queue: a delivery to a customer's endpoint.
type Hook struct {
	Customer string `json:"customer"`
	Seq      int    `json:"seq"`
}

// A queue's limits live in the database and hold over every process that works the queue. Here
// each customer's webhooks are delivered one at a time, in the order they were enqueued
// (KeyMaxRunning 1, keyed by customer), though the worker has ten slots.
func ExampleQueue_SetLimits() {
	ctx := context.Background()
	pool, done := examplePool(ctx) // in a program: pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	defer done()
	client, err := pgqueue.NewClient(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	webhooks, err := pgqueue.NewQueue[Hook](client, "webhooks")
	if err != nil {
		log.Fatal(err)
	}

	err = webhooks.SetLimits(ctx, pgqueue.Limits{
		MaxRunning:    20,                                         // the queue's, over every process
		KeyMaxRunning: 1,                                          // per key: one at a time, in order
		KeyRate:       pgqueue.Rate{Starts: 50, Per: time.Second}, // starts per key in any second
	})
	if err != nil {
		log.Fatal(err)
	}
	limits, err := webhooks.Limits(ctx)
	if err != nil {
		log.Fatal(err)
	}
	out, _ := json.Marshal(limits)
	fmt.Println(string(out))

	for seq := 1; seq <= 3; seq++ {
		for _, customer := range []string{"customer:42", "customer:7"} {
			hook := Hook{Customer: customer, Seq: seq}
			if _, err := webhooks.Enqueue(ctx, hook, &pgqueue.EnqueueOptions{Key: customer}); err != nil {
				log.Fatal(err)
			}
		}
	}

	var mu sync.Mutex
	running := map[string]int{} // per customer, now
	most := map[string]int{}    // per customer, at most
	order := map[string][]int{} // per customer, the order of the deliveries
	runCtx, stop := context.WithCancel(ctx)
	worker, err := webhooks.NewWorker(func(ctx context.Context, job *pgqueue.Job[Hook]) error {
		mu.Lock()
		running[job.Key]++
		most[job.Key] = max(most[job.Key], running[job.Key])
		order[job.Key] = append(order[job.Key], job.Payload.Seq)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // deliver
		mu.Lock()
		running[job.Key]--
		if len(order["customer:42"])+len(order["customer:7"]) == 6 && running[job.Key] == 0 {
			stop()
		}
		mu.Unlock()
		return nil
	}, &pgqueue.WorkerOptions{Concurrency: 10})
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Run(runCtx, worker); err != nil {
		log.Fatal(err)
	}
	for _, customer := range []string{"customer:42", "customer:7"} {
		fmt.Println(customer, "delivered", order[customer], "at most", most[customer], "at once")
	}
	// Output:
	// {"max_running":20,"key_max_running":1,"key_rate":{"starts":50,"per":"1s"}}
	// customer:42 delivered [1 2 3] at most 1 at once
	// customer:7 delivered [1 2 3] at most 1 at once
}
