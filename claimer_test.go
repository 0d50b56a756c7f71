package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestWorkerOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[string](t, b.client, "order")

	// A delayed job at the front of the line must not block those behind it.
	if _, err := q.Enqueue(ctx, "delayed-high", &EnqueueOptions{Priority: 100, Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	want := []string{"p9-first", "p9-second", "p5", "p0-first", "p0-second", "p-3"}
	for _, e := range []struct {
		name     string
		priority int
	}{{"p0-first", 0}, {"p5", 5}, {"p9-first", 9}, {"p0-second", 0}, {"p-3", -3}, {"p9-second", 9}} {
		if _, err := q.Enqueue(ctx, e.name, &EnqueueOptions{Priority: e.priority}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var ran []string
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[string]) error {
		mu.Lock()
		ran = append(ran, job.Payload)
		mu.Unlock()
		return nil
	}, &WorkerOptions{Concurrency: 1, OnEvent: ev.on}))
	startWorker(t, w)
	ev.next(t, EventDrained)
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(ran, " ") != strings.Join(want, " ") {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	if n := b.count("status = 'scheduled'"); n != 1 {
		t.Fatalf("the delayed job ran early or vanished (%d scheduled)", n)
	}
}

// Two clients, as two processes would be, compete for 1,000 jobs: each job runs exactly once
// and none is left.
func TestWorkersCompete(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 1000
	payloads := make([]int, n)
	for i := range payloads {
		payloads[i] = i
	}
	var runs [n]atomic.Int32
	var done atomic.Int32
	handler := func(ctx context.Context, job *Job[int]) error {
		runs[job.Payload].Add(1)
		done.Add(1)
		return nil
	}
	var perClient [2]atomic.Int32
	for i, c := range []*Client{b.client, b.newClient()} {
		q := newQueue[int](t, c, "compete")
		w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
			perClient[i].Add(1)
			return handler(ctx, job)
		}, &WorkerOptions{Concurrency: 8}))
		startWorker(t, w)
	}
	q := newQueue[int](t, b.client, "compete")
	if _, err := q.EnqueueMany(t.Context(), payloads[:n/2], nil); err != nil {
		t.Fatal(err)
	}
	for _, p := range payloads[n/2:] {
		if _, err := q.Enqueue(t.Context(), p, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 60*time.Second, "all jobs to run", func() bool { return done.Load() >= n })
	waitFor(t, 10*time.Second, "the table to empty", func() bool { return b.count("true") == 0 })
	for i := range runs {
		if r := runs[i].Load(); r != 1 {
			t.Errorf("job %d ran %d times", i, r)
		}
	}
	t.Logf("client 1 ran %d jobs, client 2 ran %d", perClient[0].Load(), perClient[1].Load())
}

// Every claim round trip starts with claim_settings.sql, and in its transaction the claim
// statements are planned without JIT compilation, which a claim's plan over a queue of ~10⁷ jobs
// would otherwise pay on every claim: here with jit_above_cost 0, so that any plan would be
// compiled where JIT is available.
func TestClaimPlannedWithoutJIT(t *testing.T) {
	t.Parallel()
	for _, round := range []claimRound{
		{plain: claimArgs{queues: []string{"q"}}},
		{limited: claimArgs{queues: []string{"q"}, rated: true}, locks: []string{"q"}},
	} {
		if b := round.batch("w"); b.QueuedQueries[0].SQL != claimSettingsSQL {
			t.Fatalf("a claim round trip starts with %.40q, want claim_settings.sql", b.QueuedQueries[0].SQL)
		}
	}
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "q")
	if _, err := q.EnqueueMany(ctx, make([]int, 10), nil); err != nil {
		t.Fatal(err)
	}
	var jitAvailable bool
	if err := b.pool.QueryRow(ctx, `SELECT pg_jit_available()`).Scan(&jitAvailable); err != nil {
		t.Fatal(err)
	}
	b.inTx(false, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL jit = on; SET LOCAL jit_above_cost = 0`); err != nil {
			return err
		}
		if jitAvailable && explainCost(t, tx, claimSQL, []string{"q"}, []int32{5}, []int64{30000}, "w", []int32{5}, []int32{lineStart.priority}, [][16]byte{{}}).jit == 0 {
			return errors.New("with jit_above_cost 0 the claim was not compiled: this test cannot tell")
		}
		if _, err := tx.Exec(ctx, claimSettingsSQL); err != nil {
			return err
		}
		var jit string
		if err := tx.QueryRow(ctx, `SELECT current_setting('jit')`).Scan(&jit); err != nil || jit != "off" {
			return fmt.Errorf("after claim_settings, jit = %q (%v)", jit, err)
		}
		if c := explainCost(t, tx, claimSQL, []string{"q"}, []int32{5}, []int64{30000}, "w", []int32{5}, []int32{lineStart.priority}, [][16]byte{{}}); c.jit != 0 {
			return fmt.Errorf("after claim_settings the claim spent %.1f ms compiling", c.jit)
		}
		return nil
	})
	t.Logf("JIT available: %t", jitAvailable)
}

// A claim cut short by the end of Run (its connection not yet taken when the context ended) is
// no error: no EventError reaches OnEvent, and nothing is logged as a failed claim.
func TestClaimCutShortByShutdownIsNoError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	evs := newEvents()
	w := must(newQueue[int](t, b.client, "cut-short").NewWorker(func(context.Context, *Job[int]) error { return nil },
		&WorkerOptions{OnEvent: evs.on}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	q := rt.queues[0]
	q.events.start()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	p := &claimPipe{c: b.client}
	round := newClaimRound([]claimWant{{q: q, limit: 10}})
	err := p.send(ctx, round)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("sending a claim with its context ended: %v, want context.Canceled", err)
	}
	cl := rt.claimer
	cl.queues[q.index].claiming, cl.queues[q.index].rounds = 10, 1 // as wantedClaims counted them
	cl.fail.add(err, append(p.discard(), round)...)
	cl.claimFailed(ctx)
	if !q.events.close(time.Second) {
		t.Fatal("the events were not delivered within a second")
	}
	for len(evs.ch) > 0 {
		if ev := <-evs.ch; ev.Kind == EventError {
			t.Fatalf("a claim cut short by shutdown was reported: %v", ev.Err)
		}
	}
}

// The jobs of one claim share its lock token, and each claim has a fresh one: a job's newer
// attempt comes from another claim, so a settle under an older token finds nothing, while the
// jobs that share a token are still told apart by their ids.
func TestClaimTokens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "tokens")
	if _, err := q.EnqueueMany(t.Context(), make([]int, 4), nil); err != nil {
		t.Fatal(err)
	}
	claim := func() (ids, tokens [][16]byte) {
		rows, _ := b.pool.Query(t.Context(), claimSQL, []string{"tokens"}, []int32{2}, []int64{30000}, "w", []int32{2}, []int32{lineStart.priority}, [][16]byte{{}})
		got, err := pgx.CollectRows(rows, scanJobRow)
		if err != nil || len(got) != 2 {
			t.Fatalf("claimed %d jobs (%v), want 2", len(got), err)
		}
		for _, r := range got {
			ids, tokens = append(ids, [16]byte(r.id)), append(tokens, r.token)
		}
		return ids, tokens
	}
	ids1, tokens1 := claim()
	_, tokens2 := claim()
	if tokens1[0] != tokens1[1] || tokens2[0] != tokens2[1] {
		t.Errorf("the jobs of one claim hold different tokens: %x, %x", tokens1, tokens2)
	}
	if tokens1[0] == tokens2[0] {
		t.Fatalf("two claims handed out the same token %x", tokens1[0])
	}
	// Settling the first job under the second claim's token touches nothing; under its own, only
	// that job.
	var completed int
	if err := b.pool.QueryRow(t.Context(), "WITH c AS ("+completeSQL+") SELECT count(*) FROM c",
		[][16]byte{ids1[0]}, [][16]byte{tokens2[0]}).Scan(&completed); err != nil || completed != 0 {
		t.Fatalf("a settle under another claim's token completed %d jobs (%v), want 0", completed, err)
	}
	if err := b.pool.QueryRow(t.Context(), "WITH c AS ("+completeSQL+") SELECT count(*) FROM c",
		[][16]byte{ids1[0]}, [][16]byte{tokens1[0]}).Scan(&completed); err != nil || completed != 1 {
		t.Fatalf("the settle completed %d jobs (%v), want 1", completed, err)
	}
	var running int
	if err := b.pool.QueryRow(t.Context(), "SELECT count(*) FROM pgqueue_jobs WHERE status = 'running'").Scan(&running); err != nil || running != 3 {
		t.Fatalf("%d jobs running (%v), want the other 3", running, err)
	}
}

// claimable asks for a job per free slot and, for a queue without limits (or a MaxRunning far
// from reached) whose last job claimed ahead did not wait too long, one ahead per running handler, or job of a round in flight,
// expected to be done within a claim's round trip; those beyond the free slots are claimed
// ahead. The attempts it holds unsettled stay bounded: by 4 per slot, or by 8 in a runtime of 32
// slots or more in all.
func TestClaimable(t *testing.T) {
	ms := time.Millisecond
	for _, c := range []struct {
		name                          string
		busy, waiting, held, claiming int
		runtimeSlots                  int // the runtime's slots in all
		runMean, rtt                  time.Duration
		way                           claimWay
		stalled, paused, exclusive    bool
		want, wantAhead               int
	}{
		{name: "idle", want: 10},
		{name: "no run time known yet", busy: 10, held: 10, rtt: ms, want: 0},
		{name: "handlers quicker than a claim", busy: 10, held: 10, runMean: ms / 2, rtt: ms, want: 10, wantAhead: 10},
		{name: "some slots free, quick handlers", busy: 6, held: 6, runMean: ms / 2, rtt: ms, want: 10, wantAhead: 6},
		{name: "half return within a claim", busy: 10, held: 10, runMean: 2 * ms, rtt: ms, want: 5, wantAhead: 5},
		{name: "long jobs", busy: 10, held: 10, runMean: time.Second, rtt: 3 * ms, want: 0},
		{name: "some slots free, long jobs", busy: 6, held: 6, runMean: time.Second, rtt: 3 * ms, want: 4},
		{name: "already waiting", busy: 10, waiting: 4, held: 14, runMean: ms / 2, rtt: ms, want: 6, wantAhead: 6},
		{name: "completer behind", busy: 10, held: 48, runMean: ms / 2, rtt: ms, want: 2, wantAhead: 2},
		{name: "completer behind, in a runtime of 32 slots or more", busy: 10, held: 48, runtimeSlots: 32, runMean: ms / 2, rtt: ms, want: 10, wantAhead: 10},
		{name: "completer far behind, in a runtime of 32 slots or more", busy: 10, held: 88, runtimeSlots: 100, runMean: ms / 2, rtt: ms, want: 2, wantAhead: 2},
		{name: "MaxRunning far from reached", busy: 6, held: 6, runMean: ms / 2, rtt: ms, way: claimCapped, want: 10, wantAhead: 6},
		{name: "MaxRunning nearly reached", busy: 6, held: 6, runMean: ms / 2, rtt: ms, way: claimCapped, exclusive: true, want: 4},
		{name: "per-key limits or rates", busy: 6, held: 6, runMean: ms / 2, rtt: ms, way: claimLimited, want: 4},
		{name: "stalled: a job claimed ahead waited too long", busy: 6, held: 6, runMean: ms / 2, rtt: ms, stalled: true, want: 4},
		{name: "paused", busy: 6, held: 6, runMean: ms / 2, rtt: ms, paused: true, want: 4},
		{name: "a round in flight, quick handlers", busy: 10, held: 10, claiming: 10, runMean: ms / 4, rtt: ms, want: 10, wantAhead: 10},
		{name: "a round in flight, half return within a claim", busy: 10, held: 10, claiming: 10, runMean: 2 * ms, rtt: ms, want: 0},
		{name: "a round in flight for the free slots, long jobs", busy: 6, held: 6, claiming: 4, runMean: time.Second, rtt: 3 * ms, want: 0},
		{name: "a round in flight, completer behind", busy: 10, held: 45, claiming: 10, runMean: ms / 4, rtt: ms, want: 5, wantAhead: 5},
	} {
		q := &queueRun{opts: WorkerOptions{Concurrency: 10}}
		q.way.Store(uint32(c.way))
		q.paused.Store(c.paused)
		cl := &claimer{queues: []queueClaims{{claiming: c.claiming, exclusive: c.exclusive}}, rtt: c.rtt,
			slots: max(10, c.runtimeSlots)}
		s := slotCounts{busy: c.busy, waiting: c.waiting, held: c.held, runMean: c.runMean, stalled: c.stalled}
		if got, ahead := cl.claimable(q, s); got != c.want || ahead != c.wantAhead {
			t.Errorf("%s: claimable = %d, %d ahead, want %d, %d ahead", c.name, got, ahead, c.want, c.wantAhead)
		}
	}
}

// blockedRuntime returns a runtime, not started, that serves q with two slots and no poll, and
// whose handlers block until release is sent to or closed (or their context ends): for the tests
// that drive its parts alone.
func blockedRuntime(b *bundle, q *Queue[int]) (rt *runtime, release chan struct{}) {
	release = make(chan struct{})
	w := must(q.NewWorker(func(ctx context.Context, _ *Job[int]) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}, &WorkerOptions{Concurrency: 2, PollInterval: noPoll}))
	return newRuntime(b.client, []*workerSpec{&w.spec}), release
}

// The claimer alone, with the attempt set and handlers but no completer: for handlers it takes
// for quick ones, it claims ahead of its two blocked slots; the jobs claimed ahead go back once
// they have waited aheadWaitMax (their outcomes wait for a completer, unstarted), and the queue,
// stalled, claims ahead no more while its handlers do not return.
func TestClaimerHandsBackWhatWaitsTooLong(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "claimer-alone")
	if _, err := q.EnqueueMany(t.Context(), make([]int, 10), nil); err != nil {
		t.Fatal(err)
	}
	rt, release := blockedRuntime(b, q)
	qr, set := rt.queues[0], rt.set
	qr.events.start()
	set.mu.Lock()
	set.queues[qr.index].runMean = time.Nanosecond // as if its handlers were quick
	set.mu.Unlock()
	ctx, cancel := context.WithCancel(t.Context())
	set.start(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		rt.claimer.loop(ctx)
	}()
	defer func() {
		cancel()
		<-done
		close(release)
		rt.handlers.stop()
	}()
	handedBack := func() (n int) {
		set.mu.Lock()
		defer set.mu.Unlock()
		for _, o := range set.outcomes {
			if o.kind == outcomeRequeue && o.a.started.IsZero() {
				n++
			}
		}
		return n
	}
	waitFor(t, 10*time.Second, "jobs claimed ahead of the 2 blocked slots to go back", func() bool { return handedBack() >= 2 })
	set.mu.Lock()
	stalled, waiting := set.queues[qr.index].stalled, len(set.queues[qr.index].waiting)
	set.mu.Unlock()
	if !stalled || waiting != 0 {
		t.Fatalf("after the hand-back: stalled %v, %d waiting; want stalled, none waiting", stalled, waiting)
	}
	claimed := b.count("status = 'running'")
	time.Sleep(3 * aheadWaitMax) // a claimer that claimed ahead again would have by now
	if n := b.count("status = 'running'"); n != claimed {
		t.Fatalf("%d jobs claimed after the hand-back, want none while the handlers block", n-claimed)
	}
	if n := handedBack(); n != claimed-2 {
		t.Fatalf("%d jobs handed back, want the %d claimed beyond the 2 running", n, claimed-2)
	}
}
