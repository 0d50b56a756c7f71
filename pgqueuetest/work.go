package pgqueuetest

import (
	"testing"

	"github.com/pgqueue/pgqueue"
)

// WorkOne runs the first runnable job of w's queue in the test's goroutine (Worker.WorkOne), so
// the handler may call t.Fatal, and returns what became of it. It fails the test if the queue
// has no runnable job, or on a database error.
func WorkOne[T any](t testing.TB, w *pgqueue.Worker[T]) *pgqueue.WorkResult {
	t.Helper()
	r, err := w.WorkOne(t.Context())
	if err != nil {
		t.Fatalf("pgqueuetest: %v", err)
	}
	if r == nil {
		t.Fatalf("pgqueuetest: the queue has no runnable job")
	}
	return r
}

// WorkUntilEmpty runs the jobs of w's queue one at a time, in run order, in the test's goroutine
// (Worker.WorkUntilEmpty), until none is runnable, and returns what became of each. It fails the
// test on a database error.
func WorkUntilEmpty[T any](t testing.TB, w *pgqueue.Worker[T]) []*pgqueue.WorkResult {
	t.Helper()
	results, err := w.WorkUntilEmpty(t.Context())
	if err != nil {
		t.Fatalf("pgqueuetest: %v", err)
	}
	return results
}
