package pgqueue

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestPoisonJobsDoNotStallTheWorker stays one function: the poison jobs and the good ones go
// through one worker in one run, and the checks read in the order the jobs settle.
//
// Poison jobs — a payload that no longer decodes into T, a handler that panics, a handler that
// never returns and ignores its context — each end in a clear, recorded state, and the jobs
// around them keep flowing through the same worker, even with a single slot.
func TestPoisonJobsDoNotStallTheWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	type task struct {
		Kind string `json:"kind"`
	}
	q := newQueue[task](t, b.client, "poison")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var fine atomic.Int32
	w := must(q.NewWorker(func(ctx context.Context, job *Job[task]) error {
		switch job.Payload.Kind {
		case "panic":
			panic("handler bug")
		case "hang":
			<-release // ignores ctx: given up after JobTimeout + ShutdownTimeout
		default:
			fine.Add(1)
		}
		return nil
	}, &WorkerOptions{Concurrency: 1, JobTimeout: 200 * time.Millisecond, ShutdownTimeout: 200 * time.Millisecond,
		LockDuration: time.Second}))

	// An old producer wrote a payload of another shape.
	old := newQueue[[]int](t, b.client, "poison")
	undecodable, err := old.Enqueue(t.Context(), []int{1, 2, 3}, &EnqueueOptions{MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	one := &EnqueueOptions{MaxAttempts: 1}
	panics, err := q.Enqueue(t.Context(), task{Kind: "panic"}, one)
	if err != nil {
		t.Fatal(err)
	}
	hangs, err := q.Enqueue(t.Context(), task{Kind: "hang"}, one)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := q.Enqueue(t.Context(), task{Kind: "fine"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	startWorker(t, w)
	waitFor(t, 60*time.Second, "the good jobs to run past the poison ones", func() bool { return fine.Load() == 20 })
	waitFor(t, 30*time.Second, "the poison jobs to be settled", func() bool {
		return b.count("status = 'failed'") == 3
	})

	for _, c := range []struct {
		name string
		id   ulid.ULID
		want string
	}{
		{"undecodable", undecodable.ID, "does not decode"},
		{"panicking", panics.ID, "panic: handler bug"},
		{"hanging", hangs.ID, "was given up"},
	} {
		e, err := q.Job(t.Context(), c.id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Status != StatusFailed || len(e.Errors) != 1 || !strings.Contains(e.Errors[0].Error, c.want) {
			t.Errorf("%s job: status %s, errors %+v; want failed with %q recorded", c.name, e.Status, e.Errors, c.want)
		}
	}
	// The undecodable job failed at once, without burning its other attempts.
	if n := b.count("id = $1 AND attempt = 1", [16]byte(undecodable.ID)); n != 1 {
		t.Error("the undecodable job was retried")
	}
}
