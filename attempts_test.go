package pgqueue

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// A job claimed as Run stops is handed back; an older attempt of that job still running here (its
// lease ran out, and the job was taken back and claimed again) has lost it, as when such a job is
// started: its handler's context ends with ErrLockLost and it is reported lost. It was left
// running, unknown to the runtime: never cancelled, at shutdown either.
func TestHandBackSupersedesAnOlderAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "handback")
	job := must(q.Enqueue(ctx, 1, nil))
	ev := newEvents()
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{OnEvent: ev.on}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	qr := rt.queues[0]
	qr.events.start()
	defer rt.closeEvents()
	claim := func() ([]*jobRow, time.Time) {
		t.Helper()
		claimed, _, sent, err := claimOnce(ctx, rt.c, []claimWant{{q: qr, limit: 1}})
		if err != nil || len(claimed[0]) != 1 {
			t.Fatalf("claim: %d jobs, %v", len(claimed[0]), err)
		}
		return claimed[0], sent
	}
	rows, sent := claim()
	_, hctx := rt.set.runInline(qr, rows[0], sent.Add(time.Minute), context.Background())
	if e := ev.nextOf(t, job.ID); e.Kind != EventStarted || e.Attempt != 1 {
		t.Fatalf("event %s of attempt %d, want the first started", e.Kind, e.Attempt)
	}

	// Taken back as a rescue does, and claimed again as Run stops.
	b.exec("UPDATE pgqueue_jobs SET status = 'available', lock_token = NULL, lock_until = NULL WHERE id = $1", job.ID)
	rows, sent = claim()
	rt.logLost(rt.set.handBackRows(qr, rows, sent.Add(time.Minute), time.Now()))
	if cause := context.Cause(hctx); !errors.Is(cause, ErrLockLost) {
		t.Fatalf("the older attempt's context: %v, want ErrLockLost", cause)
	}
	if e := ev.nextOf(t, job.ID); e.Kind != EventLockLost || e.Attempt != 1 {
		t.Fatalf("event %s of attempt %d, want the first lost", e.Kind, e.Attempt)
	}
	if skipped, err := rt.completer.settle(ctx, rt.completer.takeOutcomes(), starts{}, false); err != nil || len(skipped) > 0 {
		t.Fatalf("settle: %d outcomes skipped, %v", len(skipped), err)
	}
	if e := ev.nextOf(t, job.ID); e.Kind != EventHandedBack || e.Attempt != 2 {
		t.Fatalf("event %s of attempt %d, want the second handed back", e.Kind, e.Attempt)
	}
	if n := b.count("id = $1 AND status = 'available' AND attempt = 1", job.ID); n != 1 {
		t.Fatal("the job is not available again with its second attempt uncharged")
	}
}

// Jobs claimed by a later round that come before jobs still waiting for a slot (claimed by a
// round that ran beside theirs, or back in line since) wait ahead of them.
func TestHoldKeepsWaitingInLine(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "line")
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 1}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	qr := rt.queues[0]
	set := rt.set
	set.queues[qr.index].busy = 1 // its one slot is taken: what hold takes waits
	ids := make([]ulid.ULID, 5)
	for i := range ids {
		ids[i] = ulid.Make()
	}
	row := func(i, priority int) *jobRow {
		return &jobRow{queue: qr.name, id: ids[i], priority: priority, attempt: 1}
	}
	leaseEnd := time.Now().Add(time.Minute)
	set.hold(qr, []*jobRow{row(3, 0), row(1, 0)}, leaseEnd, time.Now())
	set.hold(qr, []*jobRow{row(4, 0), row(0, 0), row(2, 5)}, leaseEnd, time.Now())
	var got []ulid.ULID
	for _, a := range set.queues[qr.index].waiting {
		got = append(got, a.id)
	}
	if want := []ulid.ULID{ids[2], ids[0], ids[1], ids[3], ids[4]}; !slices.Equal(got, want) {
		t.Fatalf("waiting %v, want %v (priority 5 first, then by id)", got, want)
	}
}

// Jobs that reach a stalled queue — a claim sent before its last jobs claimed ahead went back
// for waiting too long — go back at once, uncharged, rather than wait for a slot in vain.
func TestHoldHandsBackWhatReachesAStalledQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "stalled")
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 1}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	qr, set := rt.queues[0], rt.set
	set.queues[qr.index].busy = 1 // its one slot is taken
	set.queues[qr.index].stalled = true
	rows := []*jobRow{{queue: qr.name, id: ulid.Make(), attempt: 1}, {queue: qr.name, id: ulid.Make(), attempt: 1}}
	tasks, lost := set.hold(qr, rows, time.Now().Add(time.Minute), time.Now())
	if len(tasks) != 0 || len(lost) != 0 {
		t.Fatalf("%d started, %d lost; want none", len(tasks), len(lost))
	}
	if c := setCounts(set, qr); c[2] != 0 || c[4] != 2 {
		t.Fatalf("%d waiting, %d outcomes; want none waiting, both going back", c[2], c[4])
	}
	set.queues[qr.index].stalled = false // as when a handler returns: what comes next waits
	set.hold(qr, []*jobRow{{queue: qr.name, id: ulid.Make(), attempt: 1}}, time.Now().Add(time.Minute), time.Now())
	if c := setCounts(set, qr); c[2] != 1 {
		t.Fatalf("%d waiting in a queue not stalled, want 1", c[2])
	}
}

// setCounts returns what the set counts of q: handlers in a slot, jobs held, waiting, handlers
// without a slot (of the whole set), outcomes waiting for the completer.
func setCounts(s *attemptSet, q *queueRun) [5]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	qs := s.queues[q.index]
	return [5]int{qs.busy, qs.held, len(qs.waiting), s.released, len(s.outcomes)}
}

// claimRows claims n jobs of rt's only queue as the claimer would, and returns the rows and when
// their leases end.
func claimRows(t *testing.T, rt *runtime, n int) ([]*jobRow, time.Time) {
	t.Helper()
	q := rt.queues[0]
	claimed, _, sent, err := claimOnce(t.Context(), rt.c, []claimWant{{q: q, limit: n}})
	if err != nil || len(claimed[0]) != n {
		t.Fatalf("claim: %d jobs, %v", len(claimed[0]), err)
	}
	return claimed[0], sent.Add(q.opts.LockDuration)
}

// The attempt set's counts follow its attempts' states through every transition: an attempt holds
// a slot while its handler runs in one (running, abandoned), holds its job until it is settled or
// abandoned, and runs without a slot once given up; the next attempt in line starts in a slot as
// it frees. Each step is one of the set's methods, on jobs claimed from a real table.
func TestAttemptSetStates(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "states")
	if _, err := q.EnqueueMany(t.Context(), make([]int, 4), nil); err != nil {
		t.Fatal(err)
	}
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 1}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	s, qr := rt.set, rt.queues[0]
	check := func(step string, want [5]int) {
		t.Helper()
		if got := setCounts(s, qr); got != want {
			t.Fatalf("%s: busy, held, waiting, released, outcomes = %v, want %v", step, got, want)
		}
	}
	rows, leaseEnd := claimRows(t, rt, 3)
	tasks, lost := s.hold(qr, rows, leaseEnd, time.Now())
	if len(tasks) != 1 || len(lost) != 0 {
		t.Fatalf("hold started %d of 3 jobs for 1 slot (%d lost), want 1", len(tasks), len(lost))
	}
	first := tasks[0].a
	check("held 3 with 1 slot", [5]int{1, 3, 2, 0, 0})

	next := s.finish(first, nil, nil, time.Now())
	if first.state != attemptFinishing || len(next) != 1 {
		t.Fatalf("finished: %v, %d started in its slot, want finishing and 1", first.state, len(next))
	}
	second := next[0].a
	check("the first finished, the second in its slot", [5]int{1, 3, 1, 0, 1})

	// The second overruns its JobTimeout: given up, its slot goes to the third.
	second.deadline = time.Now().Add(-time.Hour)
	tasks, overdue := s.giveUpOverdue(time.Now())
	if len(overdue) != 1 || overdue[0] != second || len(tasks) != 1 {
		t.Fatalf("giveUpOverdue: %d given up, %d started, want the second and 1", len(overdue), len(tasks))
	}
	third := tasks[0].a
	check("the second given up", [5]int{1, 3, 0, 1, 2})

	// Both outcomes settled: the first is done, the second's handler still runs.
	batch := rt.completer.takeOutcomes()
	if waited := s.settled(batch); len(waited) != 0 {
		t.Fatalf("%d attempts had events waiting", len(waited))
	}
	if first.state != attemptDone || second.state != attemptOrphaned {
		t.Fatalf("settled: first %v, second %v, want done and orphaned", first.state, second.state)
	}
	check("two settled", [5]int{1, 1, 0, 1, 0})
	s.finish(second, context.Canceled, nil, time.Now())
	check("the given-up handler returned at last", [5]int{1, 1, 0, 0, 0})

	// The third loses its lock: abandoned, it keeps its slot until its handler returns.
	if lost, _ := s.lose([]*attempt{third}, attemptRunning, nil); len(lost) != 1 || third.state != attemptAbandoned {
		t.Fatalf("lose: %d lost, state %v, want abandoned", len(lost), third.state)
	}
	check("the third abandoned", [5]int{1, 0, 0, 0, 0})
	s.finish(third, nil, ErrLockLost, time.Now())
	if third.state != attemptDone {
		t.Fatalf("the abandoned attempt's handler returned: %v, want done", third.state)
	}
	check("all done", [5]int{0, 0, 0, 0, 0})
	if len(s.byID) != 0 {
		t.Fatalf("the set still knows %d jobs", len(s.byID))
	}

	// A job claimed and waiting goes back when the queue is paused; then nothing starts.
	rows, leaseEnd = claimRows(t, rt, 1)
	s.mu.Lock()
	s.queues[qr.index].busy = 1 // its slot taken: what hold takes waits
	s.mu.Unlock()
	s.hold(qr, rows, leaseEnd, time.Now())
	if n := s.handBackWaiting(qr); n != 1 {
		t.Fatalf("handBackWaiting: %d, want 1", n)
	}
	check("a waiting job handed back", [5]int{1, 1, 0, 0, 1})
}
