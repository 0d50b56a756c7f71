package pgqueuetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
)

// Querier is what the assertions read jobs through: a *pgxpool.Pool, a *pgx.Conn, or a pgx.Tx,
// whose own uncommitted enqueues it then sees.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// RequireEnqueued fails the test unless a job of q is waiting (scheduled or available) whose
// payload match accepts (a nil match accepts any), and returns the jobs it accepts, oldest
// first, whole: every field Queue.Job fills in (pgqueue.ReadWaitingJobs). It reads through db: pass the transaction an enqueue used (EnqueueTx) to see the job
// before that transaction commits, or the pool to see committed jobs only. A payload that does
// not decode into T fails the test. On failure the message lists the queue's waiting jobs.
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
	jobs, err := pgqueue.ReadWaitingJobs(t.Context(), q, func(ctx context.Context, sql string, args ...any) (pgqueue.JobRows, error) {
		return db.Query(ctx, sql, args...)
	})
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
