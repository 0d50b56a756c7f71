package pgqueuetest

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
)

// Querier is what the assertions read jobs through: with pgx, a *pgxpool.Pool, a *pgx.Conn or a
// pgx.Tx (anything with pgx's Query method); with database/sql, a *sql.DB, a *sql.Conn or a
// *sql.Tx (anything with QueryContext), over any Postgres driver. A transaction sees its own
// uncommitted enqueues. Another value fails the test when the assertion runs: no Go interface
// holds both libraries' query methods, so the kind is checked then.
type Querier any

// pgxQuerier is a pgx pool, connection or transaction.
type pgxQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// sqlQuerier is a database/sql handle, connection or transaction.
type sqlQuerier interface {
	QueryContext(ctx context.Context, sql string, args ...any) (*sql.Rows, error)
}

// queryThrough returns pgqueue.ReadWaitingJobs's query run through db; false if db is neither
// pgx's nor database/sql's.
func queryThrough(db Querier) (func(ctx context.Context, sql string, args ...any) (pgqueue.JobRows, error), bool) {
	switch db := db.(type) {
	case pgxQuerier:
		return func(ctx context.Context, sql string, args ...any) (pgqueue.JobRows, error) {
			return db.Query(ctx, sql, args...)
		}, true
	case sqlQuerier:
		return func(ctx context.Context, sql string, args ...any) (pgqueue.JobRows, error) {
			return db.QueryContext(ctx, sql, args...)
		}, true
	}
	return nil, false
}

// RequireEnqueued fails the test unless a job of q is waiting (scheduled or available) whose
// payload match accepts (a nil match accepts any), and returns the jobs it accepts, oldest
// first, whole: every field Queue.Job fills in (pgqueue.ReadWaitingJobs). It reads through db:
// pass the transaction an enqueue used (EnqueueTx's pgx.Tx, or EnqueueSQLTx's *sql.Tx) to see
// the job before that transaction commits, or the pool (or a *sql.DB) to see committed jobs
// only. A payload that does not decode into T fails the test. On failure the message lists the
// queue's waiting jobs.
func RequireEnqueued[T any](t testing.TB, db Querier, q *pgqueue.Queue[T], match func(T) bool) []*pgqueue.Job[T] {
	t.Helper()
	all := waitingJobs(t, db, q)
	matched := matching(all, match)
	if len(matched) == 0 {
		t.Fatalf("pgqueuetest: no waiting job of queue %s matches; %s", q.Name(), describeJobs(all))
	}
	return matched
}

// RequireNotEnqueued fails the test if a job of q is waiting (scheduled or available) whose
// payload match accepts (a nil match accepts any). It reads through db, as RequireEnqueued does.
func RequireNotEnqueued[T any](t testing.TB, db Querier, q *pgqueue.Queue[T], match func(T) bool) {
	t.Helper()
	if matched := matching(waitingJobs(t, db, q), match); len(matched) > 0 {
		t.Fatalf("pgqueuetest: %d waiting jobs of queue %s match, want none; %s", len(matched), q.Name(), describeJobs(matched))
	}
}

// waitingJobs reads the waiting jobs of q through db, whole, failing the test on an error.
func waitingJobs[T any](t testing.TB, db Querier, q *pgqueue.Queue[T]) []*pgqueue.Job[T] {
	t.Helper()
	query, ok := queryThrough(db)
	if !ok {
		t.Fatalf("pgqueuetest: cannot read jobs through a %T: pass a *pgxpool.Pool, *pgx.Conn, pgx.Tx, *sql.DB, *sql.Conn or *sql.Tx", db)
	}
	jobs, err := pgqueue.ReadWaitingJobs(t.Context(), q, query)
	if err != nil {
		t.Fatalf("pgqueuetest: read the waiting jobs of queue %s: %v", q.Name(), err)
	}
	return jobs
}

func matching[T any](jobs []*pgqueue.Job[T], match func(T) bool) []*pgqueue.Job[T] {
	var matched []*pgqueue.Job[T]
	for _, j := range jobs {
		if match == nil || match(j.Payload) {
			matched = append(matched, j)
		}
	}
	return matched
}

// describeJobs lists jobs for a failure message, payloads as JSON.
func describeJobs[T any](jobs []*pgqueue.Job[T]) string {
	if len(jobs) == 0 {
		return "the queue has no waiting job"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "waiting jobs (%d):", len(jobs))
	for _, j := range jobs {
		payload, _ := json.Marshal(j.Payload)
		fmt.Fprintf(&b, "\n  %s %s priority=%d run_at=%s payload=%s", j.ID, j.Status, j.Priority,
			j.RunAt.UTC().Format(time.RFC3339), payload)
	}
	return b.String()
}
