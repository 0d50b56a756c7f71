package pgqueue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
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

// One heartbeat serves the queues of a Run, each with its worker's lease and interval: jobs of
// a queue with a 300 ms lease outlive it many times over, and a job of a queue with a one-hour
// lease keeps an hour.
func TestHeartbeatKeepsEachWorkersLease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	short, long := newQueue[int](t, b.client, "short"), newQueue[int](t, b.client, "long")
	ev := newEvents()
	release := make(chan struct{})
	hold := func(ctx context.Context, job *Job[int]) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	shortWorker := must(short.NewWorker(hold, &WorkerOptions{LockDuration: 300 * time.Millisecond,
		HeartbeatInterval: 100 * time.Millisecond, PollInterval: noPoll, OnEvent: ev.on}))
	longWorker := must(long.NewWorker(hold, &WorkerOptions{LockDuration: time.Hour, PollInterval: noPoll, OnEvent: ev.on}))
	runWorkers(t, b.client, shortWorker, longWorker)
	for _, q := range []*Queue[int]{short, long} {
		if _, err := q.Enqueue(t.Context(), 1, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "both jobs to run", func() bool { return b.count("status = 'running'") == 2 })
	time.Sleep(1500 * time.Millisecond) // five short leases
	if n := b.count("queue = 'short' AND lock_until > now() AND lock_until < now() + interval '1 second'"); n != 1 {
		t.Error("the short queue's lease was not kept at its own length")
	}
	if n := b.count("queue = 'long' AND lock_until > now() + interval '50 minutes'"); n != 1 {
		t.Error("the long queue's lease is not an hour")
	}
	close(release)
	// A lost lock would cancel a handler, and its job would not complete.
	for range 2 {
		if e := ev.next(t, EventCompleted); e.Attempt != 1 {
			t.Fatalf("queue %s completed attempt %d, want the first", e.Queue, e.Attempt)
		}
	}
}

// A row that another transaction keeps locked (here an application's transaction left open for
// several leases) does not hold up the heartbeat of the other running jobs: they keep their
// leases and complete; and the locked job was not taken for lost, so it completes too once the
// row is free again.
func TestHeartbeatSkipsLockedRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "lockedrow")
	const lease = time.Second
	release := make(chan struct{})
	started := make(chan int, 2)
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		started <- job.Payload
		if job.Payload == 1 {
			<-release
			return ctx.Err()
		}
		select {
		case <-time.After(3 * lease):
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}, &WorkerOptions{LockDuration: lease, HeartbeatInterval: lease / 10, PollInterval: noPoll, OnEvent: ev.on}))
	locked, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := q.Enqueue(t.Context(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	receive(t, started, 10*time.Second, "a job to start")
	receive(t, started, 10*time.Second, "the other job to start")

	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var freed sync.Once
	free := func() {
		freed.Do(func() {
			_ = tx.Rollback(context.Background())
			close(release)
		})
	}
	t.Cleanup(free) // before the worker stops, should the test fail
	if _, err := tx.Exec(t.Context(), "SELECT FROM pgqueue_jobs WHERE id = $1 FOR UPDATE", [16]byte(locked.ID)); err != nil {
		t.Fatal(err)
	}
	ev.outcomes(t, map[ulid.ULID]EventKind{other.ID: EventCompleted}) // 3 leases while the row was locked
	free()
	ev.outcomes(t, map[ulid.ULID]EventKind{locked.ID: EventCompleted})
}

// An attempt whose handler has returned keeps its lease while its outcome waits for the
// completer (here, none runs), so that it is not taken back and run again meanwhile.
func TestHeartbeatKeepsFinishingLeases(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "finishing")
	if _, err := q.Enqueue(t.Context(), 1, nil); err != nil {
		t.Fatal(err)
	}
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil },
		&WorkerOptions{LockDuration: time.Second, HeartbeatInterval: 100 * time.Millisecond}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	a := finishedAttempt(t, rt)
	time.Sleep(200 * time.Millisecond) // its HeartbeatInterval passes
	rt.heart.beat(t.Context(), false)
	if n := b.count("id = $1 AND lock_until > attempted_at + interval '1100 milliseconds'", a.id); n != 1 {
		t.Fatal("the heartbeat did not extend the lease of a finished attempt whose outcome waits")
	}
}

// The heartbeater alone, with the attempt set: one statement extends the lease of the attempt
// that still holds its job; the one whose job was taken away (its token changed, as a rescue and
// a new claim would) is given up: its context ends with ErrLockLost, and the set no longer holds
// its job nor counts it, though its handler keeps its slot until it returns.
func TestHeartbeaterGivesUpLostLocks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "beats")
	if _, err := q.EnqueueMany(t.Context(), make([]int, 2), nil); err != nil {
		t.Fatal(err)
	}
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil },
		&WorkerOptions{Concurrency: 2, LockDuration: 5 * time.Second, HeartbeatInterval: time.Second}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	rows, leaseEnd := claimRows(t, rt, 2)
	tasks, _ := rt.set.hold(rt.queues[0], rows, leaseEnd, time.Now())
	kept, taken := tasks[0], tasks[1]
	b.exec("UPDATE pgqueue_jobs SET lock_token = gen_random_uuid() WHERE id = $1", taken.a.id)
	before := b.count("id = $1 AND lock_until > now() + interval '4900 milliseconds'", kept.a.id)
	time.Sleep(200 * time.Millisecond)
	rt.set.beatEverything() // as after the listener reconnected: neither lease is due yet
	rt.heart.beat(t.Context(), true)
	if n := b.count("id = $1 AND lock_until > now() + interval '4900 milliseconds'", kept.a.id); before != 1 || n != 1 {
		t.Fatalf("the held job's lease was not extended (%d, %d)", before, n)
	}
	if cause := context.Cause(taken.ctx); !errors.Is(cause, ErrLockLost) {
		t.Fatalf("the taken job's handler context: %v, want ErrLockLost", cause)
	}
	if kept.a.state != attemptRunning || taken.a.state != attemptAbandoned {
		t.Fatalf("states: %v and %v, want running and abandoned", kept.a.state, taken.a.state)
	}
	if got := setCounts(rt.set, rt.queues[0]); got != [5]int{2, 1, 0, 0, 0} {
		t.Fatalf("busy, held, waiting, released, outcomes = %v, want 2 busy, 1 held", got)
	}
}
