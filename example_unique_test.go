package pgqueue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/pgqueue/pgqueue"
)

// With a UniqueKey, a second enqueue while the first job is live inserts nothing and returns
// that job, marked Duplicate. Once the job has finished, the key is free again.
func ExampleQueue_Enqueue_unique() {
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
	welcome := func() *pgqueue.Job[Email] {
		job, err := emails.Enqueue(ctx, Email{To: "ada@example.com", Subject: "Welcome"},
			&pgqueue.EnqueueOptions{UniqueKey: "welcome:ada@example.com"})
		if err != nil {
			log.Fatal(err)
		}
		return job
	}

	first := welcome()
	again := welcome() // sign-up retried by the browser
	fmt.Println("duplicate:", again.Duplicate, "same job:", again.ID == first.ID)

	worker, err := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
		return send(ctx, job.Payload)
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := worker.WorkOne(ctx); err != nil { // the welcome is sent: the key is free again
		log.Fatal(err)
	}
	later := welcome()
	fmt.Println("duplicate:", later.Duplicate, "same job:", later.ID == first.ID)
	// Output:
	// duplicate: true same job: true
	// duplicate: false same job: false
}
