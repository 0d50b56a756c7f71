package pgqueue

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// nextChange waits for the next change of kind, skipping others.
func nextChange(t testing.TB, ch <-chan Change, kind ChangeKind) Change {
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

// nextChangeOf waits for the next change of kind, skipping others, and checks that it names
// job id.
func nextChangeOf(t testing.TB, ch <-chan Change, kind ChangeKind, id ulid.ULID) {
	t.Helper()
	if c := nextChange(t, ch, kind); !hasID(c.JobIDs, id) {
		t.Fatalf("%s change %v lacks %s", kind, c.JobIDs, id)
	}
}

// A watch reports what happens to its queue, also when a worker of another client does it:
// enqueues, starts and outcomes, pause and resume, cancellations; after its listener's connection
// is killed, it asks for a resync and goes on.
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
	nextChangeOf(t, changes, ChangeStarted, job.ID)
	nextChangeOf(t, changes, ChangeCompleted, job.ID)
	bad, err := q.Enqueue(t.Context(), -1, nil)
	if err != nil {
		t.Fatal(err)
	}
	nextChangeOf(t, changes, ChangeFailed, bad.ID)
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
	nextChangeOf(t, changes, ChangeCancelled, later.ID)
	if err := q.Resume(t.Context()); err != nil {
		t.Fatal(err)
	}
	nextChange(t, changes, ChangeResumed)

	// The listener's connection is killed: the watch goes on, after a resync.
	checkWatchSurvivesListenerKill(t, b, q, changes)

	cancel()
	for range changes { // closes when ctx ends
	}
}

// checkWatchSurvivesListenerKill kills the connection of b's listener and checks that the
// watch asks for a resync, then, once the listener is back, reports a new job's completion.
func checkWatchSurvivesListenerKill(t testing.TB, b *bundle, q *Queue[int], changes <-chan Change) {
	t.Helper()
	sessions := b.client.listener.sessions.Load()
	b.exec("SELECT pg_terminate_backend($1)", int32(b.client.listener.pid.Load()))
	nextChange(t, changes, ChangeResync)
	waitListening(t, b.client, sessions+1)
	if _, err := q.Enqueue(t.Context(), 3, nil); err != nil {
		t.Fatal(err)
	}
	nextChange(t, changes, ChangeCompleted)
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

// Watch racing Close returns, with ErrClosed or with a channel that then closes, although its
// context never ends: it does not wait for a listener that Close stopped (or never started).
func TestWatchRacingClose(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 200 {
		c := b.newClient()
		q := newQueue[int](t, c, "racing")
		// Close at various points of Watch: before it subscribes, while it waits for the
		// listener, after it has registered.
		raceWatchClose(t, q, time.Duration(i%20)*100*time.Microsecond)
		if t.Failed() {
			return
		}
	}
}

// raceWatchClose runs q.Watch, with a context that does not end, and q's client's Close after
// delay, and checks that both return.
func raceWatchClose(t *testing.T, q *Queue[int], delay time.Duration) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // only to release a stuck Watch once the test has failed
	watched := make(chan error, 1)
	go func() {
		changes, err := q.Watch(ctx)
		if err == nil {
			for range changes { // must close
			}
		}
		watched <- err
	}()
	closed := make(chan error, 1)
	go func() {
		time.Sleep(delay)
		closed <- q.c.Close()
	}()
	if err := receive(t, closed, 30*time.Second, "Close racing Watch to return"); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-watched:
		if err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Watch racing Close returned %v, want ErrClosed or a channel", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("Watch racing Close had not returned 30s after Close")
		cancel()
		<-watched
	}
}

// nextAnyChange waits for the next change, whatever its kind.
func nextAnyChange(t *testing.T, ch <-chan Change) Change {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatal("the watch closed")
		}
		return c
	case <-time.After(30 * time.Second):
		t.Fatal("timed out waiting for a change")
		panic("unreachable")
	}
}

// A watch starts with exactly one ChangeResync, also when its Watch starts the listener, and gets
// exactly one more each time the listener reconnects.
func TestWatchResyncsOncePerConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "resyncs")
	changes, err := q.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// expect checks that the next changes are a resync and then the one that op causes.
	expect := func(op func(context.Context) error, kind ChangeKind) {
		t.Helper()
		if c := nextAnyChange(t, changes); c.Kind != ChangeResync {
			t.Fatalf("got change %s, want %s", c.Kind, ChangeResync)
		}
		if err := op(t.Context()); err != nil {
			t.Fatal(err)
		}
		if c := nextAnyChange(t, changes); c.Kind != kind {
			t.Fatalf("got change %s after the resync, want %s", c.Kind, kind)
		}
	}
	expect(q.Pause, ChangePaused)
	b.exec("SELECT pg_terminate_backend($1)", int32(b.client.listener.pid.Load()))
	expect(q.Resume, ChangeResumed)
}

// A watch of every queue reports the changes of queues that existed when it started and of a
// queue whose first job comes later: its workers announce starts and outcomes once the watch has
// seen the enqueue. Its resyncs name no queue.
func TestClientWatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := newQueue[int](t, b.client, "old")
	if _, err := old.Enqueue(t.Context(), 1, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	changes, err := b.client.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := nextChange(t, changes, ChangeResync); c.Queue != "" {
		t.Fatalf("the first resync names queue %q", c.Queue)
	}
	if err := old.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := nextChange(t, changes, ChangePaused); c.Queue != "old" {
		t.Fatalf("pause of %q reported", c.Queue)
	}

	// The new queue's first enqueue makes the watch record it; the jobs after it are announced.
	fresh := newQueue[int](t, b.client, "fresh")
	if _, err := fresh.Enqueue(t.Context(), 1, nil); err != nil {
		t.Fatal(err)
	}
	if c := nextChange(t, changes, ChangeEnqueued); c.Queue != "fresh" {
		t.Fatalf("enqueue into %q reported", c.Queue)
	}
	waitFor(t, 10*time.Second, "the new queue to be recorded as watched", func() bool {
		var watched bool
		err := b.pool.QueryRow(t.Context(), "SELECT watched_until > now() FROM pgqueue_queues WHERE name = 'fresh'").Scan(&watched)
		return err == nil && watched
	})
	wq := newQueue[int](t, b.newClient(), "fresh")
	startWorker(t, must(wq.NewWorker(func(context.Context, *Job[int]) error { return nil }, nil)))
	job, err := fresh.Enqueue(t.Context(), 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for c := nextChange(t, changes, ChangeCompleted); !hasID(c.JobIDs, job.ID); c = nextChange(t, changes, ChangeCompleted) {
		if c.Queue != "fresh" {
			t.Fatalf("completion in %q reported", c.Queue)
		}
	}

	checkWatchSurvivesListenerKill(t, b, fresh, changes)
	cancel()
	for range changes {
	}
}

// A watcher can count the jobs a worker starts and completes, however big its batches: every id
// is named, in as many changes as it takes.
func TestWatchNamesEveryJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "counted")
	changes, err := b.client.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	nextChange(t, changes, ChangeResync)
	const n = 1500
	enqueueInts(t, q, n, nil)
	nextChange(t, changes, ChangeEnqueued) // the queue is recorded as watched from here on
	waitFor(t, 10*time.Second, "the queue to be recorded as watched", func() bool {
		var watched bool
		err := b.pool.QueryRow(t.Context(), "SELECT watched_until > now() FROM pgqueue_queues WHERE name = 'counted'").Scan(&watched)
		return err == nil && watched
	})
	startWorker(t, must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 500})))
	started, completed := map[ulid.ULID]bool{}, map[ulid.ULID]bool{}
	deadline := time.After(60 * time.Second)
	for len(completed) < n {
		select {
		case c := <-changes:
			switch c.Kind {
			case ChangeResync:
				t.Fatal("the watch fell behind: a resync")
			case ChangeStarted:
				for _, id := range c.JobIDs {
					started[id] = true
				}
			case ChangeCompleted:
				for _, id := range c.JobIDs {
					completed[id] = true
				}
			}
		case <-deadline:
			t.Fatalf("%d jobs seen started and %d completed of %d", len(started), len(completed), n)
		}
	}
	if len(started) != n {
		t.Fatalf("%d jobs seen started of %d", len(started), n)
	}
}

// A job claimed before a watch of its queue began is announced when it settles: the workers hear
// of the watch (a notification) and announce the outcomes of the jobs they hold, not only of those
// they claimed while the queue was watched. A watch of every queue tells them in one notification,
// however many queues there are.
func TestWatchHearsJobsClaimedBeforeIt(t *testing.T) {
	t.Parallel()
	for name, watch := range map[string]func(context.Context, *Client, *Queue[int]) (<-chan Change, error){
		"queue":       func(ctx context.Context, _ *Client, q *Queue[int]) (<-chan Change, error) { return q.Watch(ctx) },
		"every queue": func(ctx context.Context, c *Client, _ *Queue[int]) (<-chan Change, error) { return c.Watch(ctx) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			for _, other := range []string{"a", "b", "c"} { // more queues a watch of every queue records
				if _, err := newQueue[int](t, b.client, other).Enqueue(t.Context(), 0, &EnqueueOptions{Delay: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			q := newQueue[int](t, b.client, "watched-later")
			started, release := make(chan struct{}), make(chan struct{})
			startWorker(t, must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
				if job.Payload == 1 {
					close(started)
					<-release
				}
				return nil
			}, &WorkerOptions{Concurrency: 1})))
			job, err := q.Enqueue(t.Context(), 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			receive(t, started, 30*time.Second, "the job to start")

			l := listenConn(t, b)
			changes, err := watch(t.Context(), b.client, q)
			if err != nil {
				t.Fatal(err)
			}
			nextChange(t, changes, ChangeResync)
			var told []string
			for _, p := range notificationsUntilMarker(t, b, l) {
				if strings.HasPrefix(p, "w ") {
					told = append(told, p)
				}
			}
			if len(told) != 1 {
				t.Fatalf("the watch sent %d notifications to the workers (%v), want 1", len(told), told)
			}
			// The listener hands each notification to every subscriber of the client in the order
			// they were sent, so once the watch sees this enqueue, the worker has heard of the watch.
			if _, err := q.Enqueue(t.Context(), 2, nil); err != nil {
				t.Fatal(err)
			}
			nextChange(t, changes, ChangeEnqueued)
			close(release)
			// The two jobs may be settled in either order, together or apart.
			for c := nextChange(t, changes, ChangeCompleted); !hasID(c.JobIDs, job.ID); {
				c = nextChange(t, changes, ChangeCompleted)
			}
		})
	}
}
