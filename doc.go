// Package pgqueue is a durable job queue for Go applications on PostgreSQL. Jobs are rows,
// enqueued in the application's own transactions; workers claim them with
// SELECT … FOR UPDATE SKIP LOCKED, keep them leased with heartbeats, and sleep until
// LISTEN/NOTIFY wakes them instead of polling.
//
// Guarantees: a job whose enqueue returned, or whose enclosing transaction committed, is never
// lost; it runs until it succeeds or ends failed with every attempt's error kept on its row
// (at-least-once, so handlers must be idempotent); every attempt holds a fresh lock token, so a
// worker that lost a job can never overwrite the outcome of a newer attempt; runnable jobs start
// by priority, then in the order they were enqueued.
//
// A tour:
//
//	db := stdlib.OpenDBFromPool(pool)
//	if err := pgqueue.Migrate(ctx, db); err != nil { … }     // once, at deploy or start-up
//
//	client, err := pgqueue.NewClient(pool, nil)                // one per process
//	emails, err := pgqueue.NewQueue[Email](client, "emails")
//
//	job, err := emails.Enqueue(ctx, Email{To: "ada@example.com"}, nil)
//	job, err = emails.EnqueueTx(ctx, tx, Email{…}, &pgqueue.EnqueueOptions{Delay: time.Hour})
//
//	mailer, err := emails.NewWorker(func(ctx context.Context, job *pgqueue.Job[Email]) error {
//		return send(ctx, job.Payload)
//	}, &pgqueue.WorkerOptions{Concurrency: 20}) // options are checked here
//	err = client.Run(ctx, mailer, billing) // every queue, one runtime; until ctx ends
//
// A handler returns nil to complete its job, an error to retry it after a back-off,
// Snooze(d) to run it later without using an attempt, or Permanent(err) to fail it at once; it
// may checkpoint with Job.Update and complete inside its own transaction with Job.CompleteTx.
// Queues are operated with Pause, Resume, Cancel, Retry, Delete, DeleteWaiting, Jobs (a listing
// in run order with places), Job, Stats and Watch (a channel of changes driven by NOTIFY).
//
// Tables live in the first schema of the pool's search_path; give pgqueue a schema of its own
// by setting search_path on the pool's connections.
//
// Every option is documented on its field, with its default. The examples below run against a
// real database when the package's tests run; the guides in the repository's docs/ directory
// explain each topic at length (enqueueing, handling jobs, operations, flow control, periodic
// jobs, unique jobs, observability, migrations, PgBouncer and pool sizing, testing, the design
// and the guarantees).
package pgqueue
