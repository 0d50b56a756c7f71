package pgqueue

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitListening waits until the client's listener has established its nth session.
func waitListening(t testing.TB, c *Client, n int64) {
	t.Helper()
	waitFor(t, 30*time.Second, "the listener to connect", func() bool {
		return c.listener.sessions.Load() >= n && c.listener.pid.Load() != 0
	})
}

// An idle worker that never polls is woken by the NOTIFY of a committed enqueue.
func TestListenWakesIdleWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "wake")
	ran := make(chan int, 10)
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		ran <- job.Payload
		return nil
	}, &WorkerOptions{PollInterval: noPoll, OnEvent: ev.on}))
	startWorker(t, w)
	waitListening(t, b.client, 1)
	ev.next(t, EventDrained) // idle, with an empty queue

	if _, err := q.Enqueue(t.Context(), 1, nil); err != nil {
		t.Fatal(err)
	}
	receive(t, ran, 10*time.Second, "the enqueued job to wake the worker")

	// EnqueueTx wakes on commit.
	tx, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueTx(t.Context(), tx, 2, nil); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	receive(t, ran, 10*time.Second, "the job committed in a transaction")

	// EnqueueMany wakes once for all its jobs.
	if _, err := q.EnqueueMany(t.Context(), []int{3, 4, 5}, nil); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		receive(t, ran, 10*time.Second, "the bulk-enqueued jobs")
	}
}

// A delayed job starts when it falls due, woken by the worker's timer, not by a poll.
func TestScheduledJobStartsWhenDue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "due")
	ran := make(chan time.Time, 2)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		ran <- time.Now()
		return nil
	}, &WorkerOptions{PollInterval: noPoll}))
	startWorker(t, w)
	waitListening(t, b.client, 1)

	job, err := q.Enqueue(t.Context(), 1, &EnqueueOptions{Delay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	started := receive(t, ran, 10*time.Second, "the delayed job to start")
	if started.Before(job.CreatedAt.Add(250 * time.Millisecond)) {
		t.Fatalf("the delayed job started %s after enqueue, before its delay", started.Sub(job.CreatedAt))
	}

	// A job delayed while the worker is already waiting on a later one is still on time.
	if _, err := q.Enqueue(t.Context(), 2, &EnqueueOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(t.Context(), 3, &EnqueueOptions{Delay: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	receive(t, ran, 10*time.Second, "the sooner job to start")
}

// Killing the listener's backend: it reconnects, and workers catch up on anything enqueued
// while it was away.
func TestListenerReconnects(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "reconnect")
	ran := make(chan int, 10)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		ran <- job.Payload
		return nil
	}, &WorkerOptions{PollInterval: noPoll}))
	startWorker(t, w)
	waitListening(t, b.client, 1)

	for round := int64(1); round <= 3; round++ {
		pid := b.client.listener.pid.Load()
		// A job whose notification is lost: inserted without NOTIFY, as if sent while the
		// listener was disconnected.
		b.exec(`INSERT INTO pgqueue_jobs (id, queue, payload) VALUES ($1, 'reconnect', $2)`,
			[16]byte(b.client.ids.next(1)[0]), []byte("100"))
		b.exec("SELECT pg_terminate_backend($1)", int32(pid))
		waitListening(t, b.client, round+1)
		if got := receive(t, ran, 10*time.Second, "the missed job after reconnecting"); got != 100 {
			t.Fatalf("ran %d", got)
		}
		// Wake-ups work on the new connection.
		if _, err := q.Enqueue(t.Context(), int(round), nil); err != nil {
			t.Fatal(err)
		}
		if got := receive(t, ran, 10*time.Second, "a job enqueued after reconnecting"); got != int(round) {
			t.Fatalf("ran %d, want %d", got, round)
		}
	}
}

// A client has one listening connection, shared by its workers, and only while workers run.
func TestListenerIsSharedAndStopsWithLastWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q1 := newQueue[int](t, b.client, "one")
	q2 := newQueue[int](t, b.client, "two")
	ran := make(chan int, 2)
	h := func(_ context.Context, job *Job[int]) error {
		ran <- job.Payload
		return nil
	}
	stop1 := startWorker(t, must(q1.NewWorker(h, nil)))
	stop2 := startWorker(t, must(q2.NewWorker(h, nil)))
	// Both workers serve (each has run a job) before the first stops.
	for i, q := range []*Queue[int]{q1, q2} {
		if _, err := q.Enqueue(t.Context(), i, nil); err != nil {
			t.Fatal(err)
		}
		receive(t, ran, 30*time.Second, "a job of each queue to run")
	}
	waitListening(t, b.client, 1)
	// One LISTEN connection serves both workers.
	var listening int
	err := b.pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
		WHERE query = 'LISTEN ' || quote_ident(('pgqueue.' || $1)::name)`, b.schema).Scan(&listening)
	if err != nil {
		t.Fatal(err)
	}
	if listening != 1 {
		t.Fatalf("%d connections listen for the schema, want 1", listening)
	}
	stop1()
	if b.client.listener.pid.Load() == 0 {
		t.Fatal("the listener stopped while a worker still runs")
	}
	stop2()
	if b.client.listener.pid.Load() != 0 {
		t.Fatal("the listener is still connected after the last worker stopped")
	}
}

// Enqueues that skip their own notification, because another enqueue to the queue notified
// moments before, are announced by a trailing notification after they commit. Nothing waits for
// a poll: not a burst, and not a job whose window's notification went down with a failed
// enqueue.
func TestCoalescedNotificationsStrandNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "burst")
	var ran atomic.Int32
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		ran.Add(1)
		return nil
	}, &WorkerOptions{PollInterval: noPoll, Concurrency: 4}))
	startWorker(t, w)
	waitListening(t, b.client, 1)

	// A burst from many goroutines.
	const burst = 200
	var wg sync.WaitGroup
	for i := range burst {
		wg.Go(func() {
			if _, err := q.Enqueue(t.Context(), i, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	waitFor(t, 30*time.Second, "every job of the burst to run", func() bool { return ran.Load() == burst })

	// The enqueue that took the window's notification failed (its transaction rolled back); the
	// next one, skipping its own, is still announced.
	for round := range 20 {
		time.Sleep(3 * notifyWindow)
		if !b.client.notifier.inline("burst") {
			t.Fatal("a new window did not start")
		}
		if _, err := q.Enqueue(t.Context(), round, nil); err != nil {
			t.Fatal(err)
		}
		want := int32(burst + round + 1)
		waitFor(t, 10*time.Second, "the job whose window's notification was lost", func() bool { return ran.Load() == want })
	}
}

// When the listener first connects, it tells the subscribers that were waiting for it (they may
// have missed notifications) with msgListening, not msgResync, which runtimes take to mean that
// the database is back; it delivers exactly one msgResync after each reconnect.
func TestListenerResyncsOnlyAfterReconnect(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l := b.client.listener
	msgs := make(chan message, 100)
	sub := l.subscribe("resync", func(m message) { msgs <- m })
	defer sub.close()
	for session := int64(1); session <= 3; session++ {
		want := byte(msgListening)
		if session > 1 {
			b.exec("SELECT pg_terminate_backend($1)", int32(l.pid.Load()))
			want = msgResync
		}
		if m := receive(t, msgs, 30*time.Second, "the message on connecting"); m.kind != want {
			t.Fatalf("session %d: got message %q, want %q", session, m.kind, want)
		}
		waitListening(t, b.client, session)
		// The next message is the one sent now: no other resync came before it.
		b.exec(notifySQL, formatMessage(msgPaused, "resync", nil))
		if m := receive(t, msgs, 30*time.Second, "the pause message"); m.kind != msgPaused {
			t.Fatalf("session %d: got message %q, want the pause", session, m.kind)
		}
	}
}

// An enqueue in flight when its client is closed, which skipped its own notification because
// another enqueue to the queue had just notified, still announces its job when it commits: Close
// did not wait for it, and no trailing notification may be armed after Close.
func TestEnqueueInFlightAtCloseNotifies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	msgs := make(chan message, 10)
	sub := b.client.listener.subscribe("late", func(m message) { msgs <- m })
	defer sub.close()
	if m := receive(t, msgs, 30*time.Second, "the listener to connect"); m.kind != msgListening {
		t.Fatalf("first message %q, want the listener's", m.kind)
	}
	// The middleware runs after the enqueue passed the closed check and before its insert: it
	// closes the client there, and makes the queue's window look freshly notified, so that the
	// insert skips its own notification.
	var closing *Client
	closing, err := NewClient(b.pool, &Config{Logger: testLogger(t), EnqueueMiddleware: []EnqueueMiddleware{
		func(ctx context.Context, e *EnqueueInfo, next func(context.Context) error) error {
			if err := closing.Close(); err != nil {
				return err
			}
			n := closing.notifier
			n.mu.Lock()
			n.last[e.Queue] = time.Now().Add(time.Hour)
			n.mu.Unlock()
			return next(ctx)
		}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closing.Close() })
	if _, err := newQueue[int](t, closing, "late").Enqueue(t.Context(), 1, nil); err != nil {
		t.Fatal(err)
	}
	if m := receive(t, msgs, 10*time.Second, "the wake-up of the job enqueued across Close"); m.kind != msgAvailable {
		t.Fatalf("got message %q, want the wake-up", m.kind)
	}
	if n := b.count("queue = 'late' AND status = 'available'"); n != 1 {
		t.Fatalf("%d jobs, want the one enqueued", n)
	}
}
