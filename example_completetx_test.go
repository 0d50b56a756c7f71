package pgqueue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/pgqueue/pgqueue"
)

// Deposit is the payload of the deposits queue.
type Deposit struct {
	Account int `json:"account"`
	Amount  int `json:"amount"`
}

// A handler whose effects live in the same database completes its job in its own transaction:
// the deposit and the job's completion commit together, or neither does, so a deposit is never
// applied twice, even if the job runs again after a crash (exactly-once effects).
func ExampleJob_CompleteTx() {
	ctx := context.Background()
	pool, done := examplePool(ctx) // in a program: pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	defer done()
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL);
		INSERT INTO accounts VALUES (1, 0)`); err != nil {
		log.Fatal(err)
	}
	client, err := pgqueue.NewClient(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	deposits, err := pgqueue.NewQueue[Deposit](client, "deposits")
	if err != nil {
		log.Fatal(err)
	}

	worker, err := deposits.NewWorker(func(ctx context.Context, job *pgqueue.Job[Deposit]) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) // does nothing once committed
		if _, err := tx.Exec(ctx, "UPDATE accounts SET balance = balance + $1 WHERE id = $2",
			job.Payload.Amount, job.Payload.Account); err != nil {
			return err
		}
		if err := job.CompleteTx(ctx, tx); err != nil { // ErrNotHeld: the job was taken from this attempt
			return err
		}
		return tx.Commit(ctx)
	}, nil)
	if err != nil {
		log.Fatal(err)
	}

	for _, amount := range []int{100, 50} {
		if _, err := deposits.Enqueue(ctx, Deposit{Account: 1, Amount: amount}, nil); err != nil {
			log.Fatal(err)
		}
	}
	results, err := worker.WorkUntilEmpty(ctx) // or client.Run(ctx, worker) in a service
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range results {
		fmt.Println(r.Kind)
	}
	var balance int
	if err := pool.QueryRow(ctx, "SELECT balance FROM accounts WHERE id = 1").Scan(&balance); err != nil {
		log.Fatal(err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// completed
	// completed
	// balance: 150
}
