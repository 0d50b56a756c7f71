package pgqueue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/pgqueue/pgqueue"
)

// A trigger of the application's own table enqueues with the SQL function pgqueue_add_job, in
// the transaction that inserts the row: the job exists if and only if that transaction commits,
// and the queue's workers wake on commit. The same call serves psql, a migration or a service
// written in another language; its arguments after the payload are given by name.
func Example_enqueueFromSQL() {
	ctx := context.Background()
	pool, done := examplePool(ctx) // in a program: pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	defer done()
	_, err := pool.Exec(ctx, `
		CREATE TABLE users (email text PRIMARY KEY);
		CREATE FUNCTION welcome() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM pgqueue_add_job('emails', jsonb_build_object('to', NEW.email, 'subject', 'Welcome'),
			                        priority => 10);
			RETURN NEW;
		END $$;
		CREATE TRIGGER welcome AFTER INSERT ON users FOR EACH ROW EXECUTE FUNCTION welcome()`)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "INSERT INTO users (email) VALUES ('ada@example.com')"); err != nil {
		log.Fatal(err)
	}

	client, err := pgqueue.NewClient(pool, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	emails, err := pgqueue.NewQueue[Email](client, "emails")
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	worker, err := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
		fmt.Println(job.Payload.Subject, job.Payload.To, "priority", job.Priority)
		stop()
		return nil
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	if err := client.Run(runCtx, worker); err != nil {
		log.Fatal(err)
	}
	// Output:
	// Welcome ada@example.com priority 10
}
