package pgqueue

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A worker whose heartbeat finds the lock gone (the row re-claimed under a new token, or
// deleted) cancels the handler's context with ErrLockLost and leaves the row alone.
func TestWorkerHeartbeatDetectsLostLock(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, takeAway string
		rowsLeft       int // rows with the job's id once the worker gave up
	}{
		{"reclaimed", "UPDATE pgqueue_jobs SET lock_token = gen_random_uuid() WHERE id = $1", 1},
		{"deleted", "DELETE FROM pgqueue_jobs WHERE id = $1", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			q := newQueue[int](t, b.client, "heartbeat")
			job, err := q.Enqueue(t.Context(), 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{}, 1)
			cause := make(chan error, 1)
			ev := newEvents()
			w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
				started <- struct{}{}
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return ctx.Err()
			}, &WorkerOptions{LockDuration: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
				OnEvent: ev.on, PollInterval: noPoll}))
			startWorker(t, w)
			receive(t, started, 10*time.Second, "the job to start")

			// Heartbeats keep the lease alive past LockDuration. (A lease long against the
			// interval, so that a loaded machine cannot make the worker give it up first.)
			waitFor(t, 10*time.Second, "a heartbeat to extend the lease", func() bool {
				return b.count("id = $1 AND lock_until > attempted_at + interval '2200 milliseconds'", [16]byte(job.ID)) == 1
			})

			b.exec(c.takeAway, [16]byte(job.ID))
			if got := receive(t, cause, 10*time.Second, "the handler's context to be cancelled"); !errors.Is(got, ErrLockLost) {
				t.Fatalf("context cause = %v, want ErrLockLost", got)
			}
			if lost := ev.next(t, EventLockLost); lost.JobID != job.ID {
				t.Fatalf("lock lost event = %+v", lost)
			}
			// Whatever took the job away decides it: the worker neither completed nor re-inserted it.
			if n := b.count("id = $1 AND status = 'running'", [16]byte(job.ID)); n != c.rowsLeft {
				t.Fatal("the worker changed a row whose lock it lost")
			}
		})
	}
}
