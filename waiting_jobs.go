package pgqueue

// A queue's waiting jobs read through a connection of the caller's, pgx or database/sql: what
// test helpers (pgqueuetest's RequireEnqueued) need to see a transaction's jobs before it
// commits, whole, with the scan the listings use.

import (
	"cmp"
	"context"
)

// JobRows is the result of the statement ReadWaitingJobs sends: pgx.Rows and *sql.Rows both
// have these methods.
type JobRows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ReadWaitingJobs returns the waiting (scheduled or available) jobs of q, oldest first, each
// with every field Queue.Job fills in, read by one statement that query runs on a connection of
// the caller's. It is for test helpers and tools that must see jobs as that connection sees them:
// a pgx or database/sql transaction whose enqueues have not committed yet. query runs sql with
// args and returns the rows, as pgx's Query and database/sql's QueryContext do; ReadWaitingJobs
// reads them to their end, which closes both. The connection must reach pgqueue's tables by the
// same search_path as the client's pool. A payload that does not decode into T is an error.
//
// It blocks for the one statement, which reads every waiting job of the queue: meant for a test's
// few jobs. Queue.Jobs pages through a queue of any size.
func ReadWaitingJobs[T any](ctx context.Context, q *Queue[T], query func(ctx context.Context, sql string, args ...any) (JobRows, error)) ([]*Job[T], error) {
	rows, err := query(ctx, waitingJobsSQL, q.name)
	if err != nil {
		return nil, wrapf(err, "waiting jobs of %s", q.name)
	}
	var jobs []*Job[T]
	var first error
	for rows.Next() {
		if first != nil {
			continue // read on to the end, which closes the rows
		}
		r := &entryRow{queue: q.name}
		// database/sql drivers return a uuid as its text, and pgx hands a sql.Scanner the same.
		if err := rows.Scan(r.columns(false, (*uuidText)(&r.id), false)...); err != nil {
			first = err
			continue
		}
		e, err := decodeEntry[T](q.name, r)
		if err == nil {
			err = e.PayloadError
		}
		if err != nil {
			first = err
			continue
		}
		jobs = append(jobs, &e.Job)
	}
	if err := cmp.Or(first, rows.Err()); err != nil {
		return nil, wrapf(err, "waiting jobs of %s", q.name)
	}
	return jobs, nil
}
