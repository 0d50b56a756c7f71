package pgqueue

import (
	"context"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// nextChange waits for the next change of kind, skipping others.
func nextChange(t *testing.T, ch <-chan Change, kind ChangeKind) Change {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case c, ok := <-ch:
			if !ok {
				t.Fatalf("the watch closed while waiting for %s", kind)
			}
			if c.Kind == kind {
				return c
			}
		case <-deadline:
			t.Fatalf("timed out waiting for change %s", kind)
		}
	}
}

func TestWatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "watched")
	ctx, cancel := context.WithCancel(t.Context())
	changes, err := q.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextChange(t, changes, ChangeResync) // the watch starts by asking for a fresh read

	// A worker in another client: it announces starts and outcomes because the queue is watched.
	wq := newQueue[int](t, b.newClient(), "watched")
	w := must(wq.NewWorker(func(ctx context.Context, job *Job[int]) error {
		if job.Payload < 0 {
			return Permanent(nil)
		}
		return nil
	}, nil))
	startWorker(t, w)

	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	nextChange(t, changes, ChangeEnqueued)
	if c := nextChange(t, changes, ChangeStarted); !hasID(c.JobIDs, job.ID) {
		t.Fatalf("started change %v lacks %s", c.JobIDs, job.ID)
	}
	if c := nextChange(t, changes, ChangeCompleted); !hasID(c.JobIDs, job.ID) {
		t.Fatalf("completed change %v lacks %s", c.JobIDs, job.ID)
	}
	bad, err := q.Enqueue(t.Context(), -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := nextChange(t, changes, ChangeFailed); !hasID(c.JobIDs, bad.ID) {
		t.Fatalf("failed change %v lacks %s", c.JobIDs, bad.ID)
	}
	if err := q.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	nextChange(t, changes, ChangePaused)
	later, err := q.Enqueue(t.Context(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Cancel(t.Context(), later.ID); err != nil {
		t.Fatal(err)
	}
	if c := nextChange(t, changes, ChangeCancelled); !hasID(c.JobIDs, later.ID) {
		t.Fatalf("cancelled change %v lacks %s", c.JobIDs, later.ID)
	}
	if err := q.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	nextChange(t, changes, ChangeResumed)

	// The listener's connection is killed: the watch goes on, after a resync.
	sessions := b.client.listener.sessions.Load()
	b.exec("SELECT pg_terminate_backend($1)", int32(b.client.listener.pid.Load()))
	nextChange(t, changes, ChangeResync)
	waitListening(t, b.client, sessions+1)
	if _, err := q.Enqueue(t.Context(), 3, nil); err != nil {
		t.Fatal(err)
	}
	nextChange(t, changes, ChangeCompleted)

	cancel()
	for range changes { // closes when ctx ends
	}
}

func hasID(ids []ulid.ULID, id ulid.ULID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestWatchEndsWithClose(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClient()
	q := newQueue[int](t, c, "closing")
	changes, err := q.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range changes { // must close
	}
	if _, err := q.Watch(t.Context()); err == nil {
		t.Fatal("Watch on a closed client succeeded")
	}
}
