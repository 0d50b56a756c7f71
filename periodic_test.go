package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tick is the payload of the periodic tests' jobs: which schedule, which occurrence.
type tick struct {
	Schedule string    `json:"schedule"`
	At       time.Time `json:"at"`
}

// tickPeriodic returns a periodic job whose payload names it and its occurrence.
func tickPeriodic(p Periodic[tick]) Periodic[tick] {
	p.PayloadFunc = func(_ context.Context, at time.Time) (tick, error) {
		return tick{Schedule: p.Name, At: at}, nil
	}
	return p
}

// periodicRunFor is how long the periodic tests let their schedules run in each phase: short by
// default, PGQUEUE_PERIODIC_RUN (e.g. 1m) for a longer run.
func periodicRunFor(t *testing.T, short time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv("PGQUEUE_PERIODIC_RUN")
	if v == "" {
		return short
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("PGQUEUE_PERIODIC_RUN=%q: want a positive duration such as 1m", v)
	}
	return d
}

// dbNow returns the database's clock.
func (b *bundle) dbNow() time.Time {
	b.t.Helper()
	var now time.Time
	if err := b.pool.QueryRow(context.Background(), "SELECT now()").Scan(&now); err != nil {
		b.t.Fatal(err)
	}
	return now
}

// scheduleRow is a periodic job's row: when it was recorded and how far it is handled.
func (b *bundle) scheduleRow(queue, name string) (created, handled time.Time) {
	b.t.Helper()
	err := b.pool.QueryRow(context.Background(),
		"SELECT created_at, handled_until FROM pgqueue_schedules WHERE queue = $1 AND name = $2",
		queue, name).Scan(&created, &handled)
	if err != nil {
		b.t.Fatalf("schedule %s/%s: %v", queue, name, err)
	}
	return created, handled
}

// enqueuedTicks returns how many jobs of queue each occurrence of schedule got.
func (b *bundle) enqueuedTicks(queue, schedule string) map[time.Time]int {
	b.t.Helper()
	rows, err := b.pool.Query(context.Background(),
		"SELECT (payload->>'at')::timestamptz FROM pgqueue_jobs WHERE queue = $1 AND payload->>'schedule' = $2",
		queue, schedule)
	if err != nil {
		b.t.Fatal(err)
	}
	defer rows.Close()
	got := map[time.Time]int{}
	for rows.Next() {
		var at time.Time
		if err := rows.Scan(&at); err != nil {
			b.t.Fatal(err)
		}
		got[at.UTC()]++
	}
	if err := rows.Err(); err != nil {
		b.t.Fatal(err)
	}
	return got
}

// checkEachOnce checks that every occurrence of next after from and up to to got exactly one
// job, and that no occurrence got two; it returns how many it checked.
func checkEachOnce(t *testing.T, what string, got map[time.Time]int, next func(time.Time) time.Time, from, to time.Time) int {
	t.Helper()
	want := occurrences(next, from, to, 1<<20)
	for _, at := range want {
		if got[at] != 1 {
			t.Errorf("%s: occurrence %s got %d jobs, want 1", what, at.Format(time.RFC3339), got[at])
		}
	}
	for at, n := range got {
		if n > 1 {
			t.Errorf("%s: occurrence %s got %d jobs", what, at.Format(time.RFC3339), n)
		}
	}
	return len(want)
}

func mustNext(t *testing.T, p Periodic[tick]) func(time.Time) time.Time {
	t.Helper()
	ps, err := newPeriodicSpec("q", p)
	if err != nil {
		t.Fatal(err)
	}
	return ps.next
}

func TestPeriodicPlan(t *testing.T) {
	t.Parallel()
	base := time.Unix(0, 0).UTC()
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		missed MissedPolicy
		max    int
		want   []int
	}{
		{MissedSkip, 0, []int{90, 100}},
		{MissedRunLatest, 0, []int{80, 90, 100}},
		{MissedRunAll, 3, []int{60, 70, 80, 90, 100}},
		{MissedRunAll, 1000, []int{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}},
	} {
		ps, err := newPeriodicSpec("q", Periodic[int]{Name: "p", Every: 10 * time.Second, Missed: tc.missed,
			MissedMax: tc.max, Grace: 15 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		enq, to := ps.plan(at(0), at(104))
		var got []int
		for _, e := range enq {
			got = append(got, int(e.Sub(base)/time.Second))
		}
		if !slices.Equal(got, tc.want) || !to.Equal(at(100)) {
			t.Errorf("%s(%d): enqueue %v, handled to %s; want %v, to %s", tc.missed, tc.max, got, to, tc.want, at(100))
		}
		if enq, to := ps.plan(at(100), at(109)); len(enq) != 0 || !to.IsZero() {
			t.Errorf("%s: nothing due enqueues %v, handled to %s", tc.missed, enq, to)
		}
	}
	// A schedule of every second down for a year: only the missed ones kept are looked at.
	ps, err := newPeriodicSpec("q", Periodic[int]{Name: "p", Cron: "* * * * * *", Missed: MissedRunAll, MissedMax: 2,
		Grace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	now := at(400 * 24 * 3600)
	enq, to := ps.plan(now.Add(-365*24*time.Hour), now)
	if want := []time.Time{now.Add(-2 * time.Second), now.Add(-time.Second), now}; !slices.Equal(enq, want) || !to.Equal(now) {
		t.Errorf("after a year: enqueue %v, handled to %s; want %v", enq, to, want)
	}
}

func TestPeriodicSchedules(t *testing.T) {
	t.Parallel()
	june := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		p    Periodic[tick]
		want time.Time
	}{
		{Periodic[tick]{Cron: "CRON_TZ=Europe/Paris 0 3 * * *"}, june.Add(time.Hour)}, // 03:00 CEST
		{Periodic[tick]{Cron: "0 3 * * *"}, june.Add(3 * time.Hour)},                  // UTC by default
		{Periodic[tick]{Cron: "30 * * * * *"}, june.Add(30 * time.Second)},            // with seconds
		{Periodic[tick]{Cron: "@hourly"}, june.Add(time.Hour)},
		{Periodic[tick]{Cron: "@every 90s"}, june.Add(90 * time.Second)}, // on the grid since the epoch
		{Periodic[tick]{Every: 90 * time.Second}, june.Add(90 * time.Second)},
	} {
		tc.p.Name = "p"
		if got := mustNext(t, tc.p)(june); !got.Equal(tc.want) {
			t.Errorf("%q/%s: next after %s is %s, want %s", tc.p.Cron, tc.p.Every, june, got, tc.want)
		}
	}
}

func TestAddPeriodicInvalid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[tick](t, b.client, "periodic")
	w := must(q.NewWorker(func(context.Context, *Job[tick]) error { return nil }, nil))
	if err := w.AddPeriodic(Periodic[tick]{Name: "taken", Every: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p    Periodic[tick]
		want string
	}{
		{Periodic[tick]{Name: "c", Cron: "61 * * * *"}, `Cron "61 * * * *"`},
		{Periodic[tick]{Name: "c", Cron: "* * *"}, `Cron "* * *"`},
		{Periodic[tick]{Name: "z", Cron: "CRON_TZ=Mars/Olympus 0 3 * * *"}, "Mars/Olympus"},
		{Periodic[tick]{Name: "n", Cron: "0 0 30 2 *"}, "never occurs"},
		{Periodic[tick]{Name: "e"}, "give a Cron expression or an Every interval"},
		{Periodic[tick]{Name: "e", Every: -time.Second}, "below one second"},
		{Periodic[tick]{Name: "e", Every: 500 * time.Millisecond}, "below one second"},
		{Periodic[tick]{Name: "b", Every: time.Second, Cron: "* * * * *"}, "both set"},
		{Periodic[tick]{Name: "taken", Every: time.Second}, "declared twice"},
		{Periodic[tick]{Name: "", Every: time.Second}, "name"},
		{Periodic[tick]{Name: "a b", Every: time.Second}, "name"},
		{Periodic[tick]{Name: "m", Every: time.Second, Missed: MissedRunAll}, "MissedMax 0 of MissedRunAll"},
		{Periodic[tick]{Name: "m", Every: time.Second, Missed: MissedRunAll, MissedMax: MaxMissedRuns + 1}, "out of range"},
		{Periodic[tick]{Name: "m", Every: time.Second, MissedMax: 3}, "only MissedRunAll"},
		{Periodic[tick]{Name: "m", Every: time.Second, Missed: 7}, "not a policy"},
		{Periodic[tick]{Name: "g", Every: time.Second, Grace: -time.Second}, "Grace"},
		{Periodic[tick]{Name: "o", Every: time.Second, Options: &EnqueueOptions{RunAt: time.Now()}}, "RunAt"},
		{Periodic[tick]{Name: "o", Every: time.Second, Options: &EnqueueOptions{Delay: -1}}, "Delay"},
	} {
		err := w.AddPeriodic(tc.p)
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "queue periodic") {
			t.Errorf("%+v: %v, want ErrInvalidOption saying %q and naming the queue", tc.p, err, tc.want)
		}
	}
	stop := startWorker(t, w)
	waitFor(t, 10*time.Second, "the worker to run", w.spec.running.Load)
	if err := w.AddPeriodic(Periodic[tick]{Name: "late", Every: time.Second}); !errors.Is(err, ErrWorkerRunning) {
		t.Errorf("AddPeriodic while running: %v, want ErrWorkerRunning", err)
	}
	stop()
}

// TestPeriodicExactlyOnceAcrossClients runs the same schedules, at second resolution, on several
// clients with pools of their own, which race for every occurrence: each gets exactly one job.
func TestPeriodicExactlyOnceAcrossClients(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const clients = 6
	schedules := []Periodic[tick]{
		{Name: "every", Every: time.Second, Missed: MissedRunAll, MissedMax: 100},
		{Name: "cron", Cron: "CRON_TZ=America/New_York * * * * * *"},
	}
	var stops []func()
	for i := range clients {
		pool := newPool(t, b.schema, 3)
		c, err := NewClient(pool, &Config{Logger: testLogger(t), Retention: Retention{Completed: KeepForever}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		q := newQueue[tick](t, c, "periodic")
		w := must(q.NewWorker(func(context.Context, *Job[tick]) error { return nil }, &WorkerOptions{Concurrency: 2}))
		for _, p := range schedules {
			if err := w.AddPeriodic(tickPeriodic(p)); err != nil {
				t.Fatalf("client %d: %v", i, err)
			}
		}
		stops = append(stops, runWorkers(t, c, w))
	}
	time.Sleep(periodicRunFor(t, 6*time.Second))
	var wg sync.WaitGroup
	for _, stop := range stops {
		wg.Go(stop)
	}
	wg.Wait()
	for _, p := range schedules {
		created, handled := b.scheduleRow("periodic", p.Name)
		n := checkEachOnce(t, p.Name, b.enqueuedTicks("periodic", p.Name), mustNext(t, p), created, handled)
		if n < 3 {
			t.Errorf("%s: %d occurrences between %s and %s, want a few", p.Name, n, created, handled)
		}
		t.Logf("%s: %d occurrences, each enqueued once by one of %d clients", p.Name, n, clients)
	}
}

// TestSchedulesListing lists declared and recorded schedules, and deletes the row of one that
// is no longer declared, which is no longer enqueued.
func TestSchedulesListing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[tick](t, b.client, "periodic")
	w := must(q.NewWorker(func(context.Context, *Job[tick]) error { return nil }, nil))
	for _, name := range []string{"kept", "removed"} {
		if err := w.AddPeriodic(tickPeriodic(Periodic[tick]{Name: name, Every: time.Second})); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	if list := must(b.client.Schedules(ctx)); len(list) != 2 || list[0].Recorded || !list[0].Declared || list[0].Next.IsZero() {
		t.Fatalf("before Run: %+v, want two declared schedules, not recorded, with a next occurrence", list)
	}
	stop := startWorker(t, w)
	waitFor(t, 10*time.Second, "both schedules to enqueue", func() bool {
		list := must(b.client.Schedules(ctx))
		return len(list) == 2 && !list[0].Last.IsZero() && !list[1].Last.IsZero()
	})
	stop()
	for _, s := range must(b.client.Schedules(ctx)) {
		if !s.Declared || !s.Recorded || s.Spec != "@every 1s" || !s.Next.After(s.Last) || s.Handled.Before(s.Last) {
			t.Errorf("%+v: want declared, recorded, Next after Last", s)
		}
	}

	// A new version of the program declares only "kept".
	c := b.newClient()
	w2 := must(newQueue[tick](t, c, "periodic").NewWorker(func(context.Context, *Job[tick]) error { return nil }, nil))
	if err := w2.AddPeriodic(tickPeriodic(Periodic[tick]{Name: "kept", Every: time.Second})); err != nil {
		t.Fatal(err)
	}
	_, removedAt := b.scheduleRow("periodic", "removed")
	_, keptAt := b.scheduleRow("periodic", "kept")
	stop = runWorkers(t, c, w2)
	waitFor(t, 10*time.Second, "kept to enqueue again", func() bool {
		_, h := b.scheduleRow("periodic", "kept")
		return h.After(keptAt.Add(time.Second))
	})
	stop()
	if _, h := b.scheduleRow("periodic", "removed"); !h.Equal(removedAt) {
		t.Errorf("the removed schedule was handled to %s after its removal, from %s", h, removedAt)
	}
	list := must(c.Schedules(ctx))
	if len(list) != 2 || list[0].Name != "kept" || !list[0].Declared || list[1].Name != "removed" || list[1].Declared {
		t.Fatalf("after removal: %+v, want kept declared and removed not", list)
	}
	// A client that does not declare it tells the next occurrence from the recorded spec.
	if r := list[1]; !r.Next.Equal(r.Handled.Truncate(time.Second).Add(time.Second)) {
		t.Errorf("the removed schedule's Next = %s, want the second after Handled %s", r.Next, r.Handled)
	}
	if err := c.DeleteSchedule(ctx, "periodic", "removed"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSchedule(ctx, "periodic", "removed"); !errors.Is(err, ErrNotFound) || strings.Count(err.Error(), "pgqueue:") != 1 {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
	if list := must(c.Schedules(ctx)); len(list) != 1 || list[0].Name != "kept" {
		t.Errorf("after delete: %+v", list)
	}
}

// TestPeriodicPayloadError: an occurrence whose PayloadFunc fails is reported as EventError,
// nothing of it is recorded, and it is enqueued once when a later try succeeds.
func TestPeriodicPayloadError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	evs := newEvents()
	c := must(NewClient(b.pool, &Config{Logger: testLogger(t), Retention: Retention{Completed: KeepForever}}))
	t.Cleanup(func() { _ = c.Close() })
	q := newQueue[tick](t, c, "periodic")
	w := must(q.NewWorker(func(context.Context, *Job[tick]) error { return nil }, &WorkerOptions{OnEvent: evs.on}))
	var mu sync.Mutex
	var failed []time.Time
	err := w.AddPeriodic(Periodic[tick]{Name: "flaky", Cron: "@every 1h", Missed: MissedRunAll, MissedMax: 10,
		Grace: 2 * time.Hour,
		PayloadFunc: func(_ context.Context, at time.Time) (tick, error) {
			mu.Lock()
			defer mu.Unlock()
			if len(failed) == 0 {
				failed = append(failed, at)
				return tick{}, errors.New("not yet")
			}
			return tick{Schedule: "flaky", At: at}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	// The schedule was recorded 3 hours ago: its hourly occurrences since then are due.
	b.exec(`INSERT INTO pgqueue_schedules (queue, name, spec, handled_until, created_at)
		VALUES ('periodic', 'flaky', '@every 1h', now() - interval '3 hours', now() - interval '3 hours')`)
	created, _ := b.scheduleRow("periodic", "flaky")
	startWorker(t, w)
	ev := evs.next(t, EventError)
	if !strings.Contains(ev.Err.Error(), "not yet") || !strings.Contains(ev.Err.Error(), "periodic job flaky of queue periodic") ||
		strings.Count(ev.Err.Error(), "pgqueue:") != 1 {
		t.Errorf("EventError %v, want the payload's error, naming the schedule", ev.Err)
	}
	if _, h := b.scheduleRow("periodic", "flaky"); !h.Equal(created) {
		t.Errorf("a failed try moved the schedule to %s", h)
	}
	var handled time.Time
	waitFor(t, 30*time.Second, "the next try", func() bool {
		_, handled = b.scheduleRow("periodic", "flaky")
		return handled.After(created)
	})
	if n := checkEachOnce(t, "flaky", b.enqueuedTicks("periodic", "flaky"), mustNext(t, Periodic[tick]{Name: "f", Every: time.Hour}), created, handled); n < 2 {
		t.Errorf("%d occurrences enqueued after the failure, want the 2 or 3 due", n)
	}
}

// TestPeriodicPayloadPanic: an occurrence whose PayloadFunc panics, after the job of an earlier
// occurrence was enqueued in the same transaction, is reported as EventError wrapping a
// *PanicError; the process keeps running, nothing of the try is kept, and each occurrence is
// enqueued once when a later try succeeds.
func TestPeriodicPayloadPanic(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	checkPeriodicPanic(t, nil, "payload boom", Periodic[tick]{Name: "panicky",
		PayloadFunc: func(_ context.Context, at time.Time) (tick, error) {
			mu.Lock()
			defer mu.Unlock()
			if calls++; calls == 2 { // the first occurrence's job is already in the transaction
				panic("payload boom")
			}
			return tick{Schedule: "panicky", At: at}, nil
		}})
}

// TestPeriodicEnqueueMiddlewarePanic: an enqueue middleware that panics on a periodic job's
// enqueue, after the insert, fails that try as a panicking PayloadFunc does: EventError wrapping
// a *PanicError, the insert rolled back, the occurrence enqueued once by a later try.
func TestPeriodicEnqueueMiddlewarePanic(t *testing.T) {
	t.Parallel()
	var panicked atomic.Bool
	mw := func(ctx context.Context, e *EnqueueInfo, next func(context.Context) error) error {
		err := next(ctx)
		if panicked.CompareAndSwap(false, true) {
			panic(errors.New("middleware boom"))
		}
		return err
	}
	checkPeriodicPanic(t, []EnqueueMiddleware{mw}, "middleware boom", tickPeriodic(Periodic[tick]{Name: "wrapped"}))
}

// checkPeriodicPanic declares p (hourly, its missed occurrences all run) on a worker of a client
// with the enqueue middleware mw, three hours behind, and checks that the panic (of value) its
// first try meets is recovered: reported as EventError wrapping a *PanicError with its stack, the
// try rolled back and the schedule not moved, and every due occurrence enqueued once by a later
// try, whose jobs reach the handler.
func checkPeriodicPanic(t *testing.T, mw []EnqueueMiddleware, value string, p Periodic[tick]) {
	b := setup(t)
	evs := newEvents()
	c := must(NewClient(b.pool, &Config{Logger: testLogger(t), Retention: Retention{Completed: KeepForever},
		EnqueueMiddleware: mw}))
	t.Cleanup(func() { _ = c.Close() })
	q := newQueue[tick](t, c, "periodic")
	handled := make(chan tick, 100)
	w := must(q.NewWorker(func(_ context.Context, j *Job[tick]) error {
		handled <- j.Payload
		return nil
	}, &WorkerOptions{OnEvent: evs.on}))
	p.Cron, p.Missed, p.MissedMax, p.Grace = "@every 1h", MissedRunAll, 10, 2*time.Hour
	if err := w.AddPeriodic(p); err != nil {
		t.Fatal(err)
	}
	b.exec(`INSERT INTO pgqueue_schedules (queue, name, spec, handled_until, created_at)
		VALUES ('periodic', $1, '@every 1h', now() - interval '3 hours', now() - interval '3 hours')`, p.Name)
	created, _ := b.scheduleRow("periodic", p.Name)
	startWorker(t, w)
	ev := evs.next(t, EventError)
	var pe *PanicError
	if !errors.As(ev.Err, &pe) || fmt.Sprint(pe.Value) != value || !strings.Contains(pe.Stack, t.Name()) {
		t.Fatalf("EventError %v, want it to wrap a *PanicError of %q, with its stack", ev.Err, value)
	}
	if !strings.Contains(ev.Err.Error(), "periodic job "+p.Name+" of queue periodic") || strings.Count(ev.Err.Error(), "pgqueue:") != 1 {
		t.Errorf("EventError %v, want it to name the schedule", ev.Err)
	}
	if _, h := b.scheduleRow("periodic", p.Name); !h.Equal(created) {
		t.Errorf("a panicking try moved the schedule to %s", h)
	}
	if n := len(b.enqueuedTicks("periodic", p.Name)); n != 0 {
		t.Errorf("the panicking try left %d jobs, want its transaction rolled back", n)
	}
	// The retry's jobs reach the handler: the scheduler and the worker outlived the panic.
	receive(t, handled, 30*time.Second, "a job of the next try")
	_, h := b.scheduleRow("periodic", p.Name)
	if n := checkEachOnce(t, p.Name, b.enqueuedTicks("periodic", p.Name), mustNext(t, Periodic[tick]{Name: "p", Every: time.Hour}), created, h); n < 3 {
		t.Errorf("%d occurrences enqueued after the panic, want the 3 or more due", n)
	}
}

// A recorded spec gives the occurrences it was declared with, also an interval that is not a
// whole number of seconds; a spec that no longer parses gives none.
func TestSpecNext(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for spec, want := range map[string]time.Time{
		"@every 1.5s":           time.UnixMicro((at.UnixMicro()/1_500_000 + 1) * 1_500_000).UTC(),
		"*/15 * * * *":          at.Add(15 * time.Minute),
		"CRON_TZ=UTC 0 3 * * *": time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC),
	} {
		if next := specNext(spec); next == nil || !next(at).Equal(want) {
			t.Errorf("specNext(%q) at %s: want %s", spec, at, want)
		}
	}
	for _, bad := range []string{"@every soon", "@every 10ms", "61 * * * *"} {
		if specNext(bad) != nil {
			t.Errorf("specNext(%q) parsed", bad)
		}
	}
}
