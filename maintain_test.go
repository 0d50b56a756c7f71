package pgqueue

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// A worker process killed with SIGKILL leaves its job running; once the lease has run out a
// live worker takes it back and runs it, with no leader involved.
func TestRescueAfterWorkerKilled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "rescue")
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd, out := startHelper(t, b, "rescue")
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "started "+job.ID.String()+"\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if n := b.count("id = $1 AND status = 'running' AND locked_by = 'helper'", [16]byte(job.ID)); n != 1 {
		t.Fatal("the killed worker's job is not left running")
	}

	ran := make(chan *Job[int], 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		ran <- job
		return nil
	}, &WorkerOptions{PollInterval: 50 * time.Millisecond}))
	startWorker(t, w)
	got := receive(t, ran, 30*time.Second, "the job to be rescued and run")
	if got.ID != job.ID || got.Attempt != 2 || len(got.Errors) != 1 || !strings.Contains(got.Errors[0].Error, "lock expired") {
		t.Fatalf("rescued job = %+v", got)
	}
	waitFor(t, 10*time.Second, "the job to complete", func() bool { return b.count("true") == 0 })
}

func TestRetention(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, err := NewClient(b.pool, &Config{
		Logger:         testLogger(t),
		QueueRetention: map[string]Retention{"kept": {Completed: time.Hour, Failed: 300 * time.Millisecond}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	q := newQueue[bool](t, c, "kept")
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[bool]) error {
		if job.Payload {
			return nil
		}
		return Permanent(errors.New("no"))
	}, &WorkerOptions{OnEvent: ev.on, PollInterval: 50 * time.Millisecond}))
	ok, err := q.Enqueue(t.Context(), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := q.Enqueue(t.Context(), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	waitFor(t, 30*time.Second, "both jobs to finish", func() bool {
		return b.count("status IN ('completed', 'failed')") == 2
	})
	if n := b.count("id = $1 AND status = 'completed' AND finished_at IS NOT NULL", [16]byte(ok.ID)); n != 1 {
		t.Fatal("the completed job was not kept")
	}
	// The failed one is pruned once its 300 ms are up; the completed one stays its hour.
	waitFor(t, 30*time.Second, "the failed job to be pruned", func() bool { return b.count("id = $1", [16]byte(bad.ID)) == 0 })
	if n := b.count("id = $1", [16]byte(ok.ID)); n != 1 {
		t.Fatal("the completed job was pruned before its retention ran out")
	}
	if _, err := NewClient(b.pool, &Config{QueueRetention: map[string]Retention{"bad name": {}}}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("QueueRetention with an invalid name = %v", err)
	}
}

// A move into the history that finds nothing due reads next to nothing, however many finished
// jobs its queue holds that finished moments ago: each status is a range of the finished-jobs
// index, not one scan of the queue's part of it filtered by an OR of the three (which read every
// kept job, once per poll).
func TestHistoryMovePlanReadsOnlyWhatIsDue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(`INSERT INTO pgqueue_jobs (id, queue, status, payload, finished_at)
		SELECT gen_random_uuid(), 'kept', 'failed', '0', now() FROM generate_series(1, 50000)`)
	b.exec(`INSERT INTO pgqueue_jobs (id, queue, status, payload)
		SELECT gen_random_uuid(), 'kept', 'available', '0' FROM generate_series(1, 100000)`)
	b.exec("ANALYZE pgqueue_jobs")
	week := (7 * 24 * time.Hour).Microseconds()
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		plan, buffers := explainBuffers(t, b, mode, historyMoveSQL, []string{"kept"}, []*int64{nil}, []int64{week},
			[]int64{week}, historyBatch, historyDelay.Microseconds(), time.Now().Add(30*24*time.Hour))
		t.Logf("%s: a move of a queue holding 50,000 failed jobs that just finished touched %d buffers", mode, buffers)
		if buffers > 100 {
			t.Fatalf("%s: a move with nothing due touched %d buffers:\n%s", mode, buffers, plan)
		}
	}
}

// A worker that did not hear a Watch begin (its listener was away when the notification went out)
// learns of it from the queue's row when it reads the queue's flags, at its next poll or when its
// listener (re)connects: the outcomes of jobs it claimed before the watch are announced then too.
// The same read still tells it how the queue's limits have it claimed.
func TestUpkeepReadsWatchedQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	noop := func(context.Context, *Job[int]) error { return nil }
	var specs []*workerSpec
	queues := map[string]*Queue[int]{}
	for _, name := range []string{"plain", "watched", "capped", "capped-watched", "keyed-watched"} {
		queues[name] = newQueue[int](t, b.client, name)
		specs = append(specs, &must(queues[name].NewWorker(noop, nil)).spec)
	}
	for name, l := range map[string]Limits{"capped": {MaxRunning: 5}, "capped-watched": {MaxRunning: 5}, "keyed-watched": {KeyMaxRunning: 1}} {
		if err := queues[name].SetLimits(t.Context(), l); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"watched", "capped-watched", "keyed-watched"} {
		b.exec(watchSQL, name, watchTTL.Milliseconds()) // as a Watch records it; nobody listens
	}
	rt := newRuntime(b.client, specs)
	var work []upkeep
	for _, q := range rt.queues {
		work = append(work, upkeep{q: q, limits: true})
	}
	before := time.Now()
	if err := rt.maint.maintain(t.Context(), work); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		way     claimWay
		watched bool
	}{
		"plain": {claimPlain, false}, "watched": {claimPlain, true}, "capped": {claimCapped, false},
		"capped-watched": {claimCapped, true}, "keyed-watched": {claimLimited, true},
	}
	for _, q := range rt.queues {
		w := want[q.name]
		if got := claimWay(q.way.Load()); got != w.way {
			t.Errorf("queue %s is claimed the way %d, want %d", q.name, got, w.way)
		}
		until := time.Unix(0, q.watchedUntil.Load())
		switch {
		case !w.watched && q.watchedUntil.Load() != 0:
			t.Errorf("queue %s is taken as watched until %s; nobody watches it", q.name, until)
		case w.watched && (until.Before(before.Add(watchTTL/2)) || until.After(time.Now().Add(watchTTL+time.Second))):
			t.Errorf("queue %s is taken as watched until %s, want about %s from %s", q.name, until, watchTTL, before)
		}
	}
}

// The maintainer alone, with the attempt set: a pause whose message was missed (here, never
// sent) is learnt from the queue's row at the next read of it; the jobs waiting for a slot go
// back, and none starts. A resume found the same way wants a claim. A read sent before a pause
// message was heard does not undo that message.
func TestMaintainerReadsPause(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "paused-row")
	if _, err := q.EnqueueMany(t.Context(), make([]int, 1), nil); err != nil {
		t.Fatal(err)
	}
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 1}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	qr, set := rt.queues[0], rt.set
	rows, leaseEnd := claimRows(t, rt, 1)
	set.mu.Lock()
	set.queues[qr.index].busy = 1 // its slot taken: the claimed job waits
	set.mu.Unlock()
	set.hold(qr, rows, leaseEnd, time.Now())
	b.exec("INSERT INTO pgqueue_queues (name, paused) VALUES ($1, true) ON CONFLICT (name) DO UPDATE SET paused = true", qr.name)

	stale := upkeep{q: qr, limits: true, pauseHeard: qr.pauseHeard.Load() - 1} // made before a message
	if err := rt.maint.maintain(t.Context(), []upkeep{stale}); err != nil {
		t.Fatal(err)
	}
	if qr.paused.Load() {
		t.Fatal("a read made before a pause message was heard was applied")
	}
	if err := rt.maint.maintain(t.Context(), []upkeep{{q: qr, limits: true, pauseHeard: qr.pauseHeard.Load()}}); err != nil {
		t.Fatal(err)
	}
	if !qr.paused.Load() {
		t.Fatal("the queue's row says paused, the runtime does not know")
	}
	if got := setCounts(set, qr); got[2] != 0 || got[4] != 1 {
		t.Fatalf("waiting %d, outcomes %d; want the waiting job handed back", got[2], got[4])
	}
	b.exec("UPDATE pgqueue_queues SET paused = false WHERE name = $1", qr.name)
	qr.wantClaim.Store(false)
	if err := rt.maint.maintain(t.Context(), []upkeep{{q: qr, limits: true, pauseHeard: qr.pauseHeard.Load()}}); err != nil {
		t.Fatal(err)
	}
	if qr.paused.Load() || !qr.wantClaim.Load() {
		t.Fatalf("after the row said resumed: paused %v, wants a claim %v", qr.paused.Load(), qr.wantClaim.Load())
	}
}

// The maintainer's scans (rescue, prune, the heads of the lines) wait while their pace holds them
// back, and run once it allows them, with what the polls put off meanwhile; a poll still claims,
// promotes and reads the queue's flags. A rescue asked for while held back is not lost, and does
// not make the loop spin: the next upkeep is due when the pace allows it.
func TestMaintainerPacesScans(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "paced")
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{PollInterval: time.Hour}))
	rt := newRuntime(b.client, []*workerSpec{&w.spec})
	m, qr := rt.maint, rt.queues[0]
	now := time.Now()
	m.scans.from = now.Add(30 * time.Minute) // as after a scan of 90 s
	qr.rescueAt.Store(now.Add(-time.Millisecond).UnixNano())

	work := m.upkeepDue(now)
	if len(work) != 1 || !work[0].poll || !work[0].promote || !work[0].limits || work[0].rescue || work[0].heads {
		t.Fatalf("upkeep while the scans are held back = %+v, want the poll without rescue or heads", work)
	}
	if qr.rescueAt.Load() == 0 {
		t.Fatal("the rescue asked for was dropped while the scans were held back")
	}
	if next := m.nextUpkeep(time.Time{}); !next.Equal(m.scans.from) {
		t.Fatalf("next upkeep at %s, want when the pace allows the scans (%s)", next, m.scans.from)
	}

	later := m.scans.from
	work = m.upkeepDue(later)
	if len(work) != 1 || work[0].poll || !work[0].rescue || !work[0].heads {
		t.Fatalf("upkeep once the pace allows the scans = %+v, want the rescue and heads put off", work)
	}
	if qr.rescueAt.Load() != 0 || m.queues[qr.index].owed {
		t.Fatal("the scans ran, but are still owed")
	}
	start := time.Now()
	if err := m.maintain(t.Context(), work); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if !m.scans.from.After(start) || m.scans.from.After(start.Add(scanPaceFactor*took)) {
		t.Fatalf("after scans of %s begun at %s, the next may run at %s", took, start, m.scans.from)
	}
}

func TestScanPaceIsBounded(t *testing.T) {
	var p scanPace
	start := time.Now()
	p.took(start, 3*time.Millisecond)
	if want := start.Add(60 * time.Millisecond); !p.from.Equal(want) || p.allows(want.Add(-time.Nanosecond)) || !p.allows(want) {
		t.Fatalf("after 3 ms the scans may run from %s, want %s", p.from, want)
	}
	p.took(start, time.Hour)
	if !p.from.Equal(start.Add(scanPaceMax)) {
		t.Fatalf("after an hour's scan the next may run %s later, want at most %s", p.from.Sub(start), scanPaceMax)
	}
	if got := p.after(start); !got.Equal(p.from) {
		t.Fatalf("a rescue asked for at %s is due at %s, want %s", start, got, p.from)
	}
}

// While the server is down, the maintainer retries its failed round trip with backoff: it does
// not send one, and log its error, every few milliseconds (as it did when the failed work, still
// wanted, made the next upkeep due at once).
func TestMaintainerBacksOffWhileTheServerIsDown(t *testing.T) {
	t.Parallel()
	pg := startPostgres(t)
	pool := pg.newPool(10)
	migrate(t, pool)
	var logs testenv.SyncBuffer
	client, err := NewClient(pool, &Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[int](t, client, "down")
	ran := make(chan struct{}, 1)
	stop := startWorker(t, must(q.NewWorker(func(context.Context, *Job[int]) error {
		ran <- struct{}{}
		return nil
	}, &WorkerOptions{PollInterval: 100 * time.Millisecond})))
	defer stop()
	waitListening(t, client, 1)
	if err := pg.ctl("stop", "-m", "fast"); err != nil {
		t.Fatal(err)
	}
	const down = 3 * time.Second
	time.Sleep(down)
	failed := strings.Count(logs.String(), `msg="pgqueue: maintain queues"`)
	if err := pg.ctl("start", "-o", pg.serverOptions()); err != nil {
		t.Fatal(err)
	}
	// Retries 50 ms apart, doubling (retryDelay): about 6 in 3 s, with jitter, and as many when
	// the claimer, retrying its own claims so, asks for upkeep.
	t.Logf("maintainer: %d failed round trips logged in %s down", failed, down)
	if failed == 0 || failed > 20 {
		t.Fatalf("the maintainer logged %d failed round trips in %s with the server down, want 1 to 20", failed, down)
	}
	// And it comes back: a job enqueued now runs.
	waitFor(t, 30*time.Second, "an enqueue to be accepted", func() bool {
		_, err := q.Enqueue(t.Context(), 1, nil)
		return err == nil
	})
	receive(t, ran, 30*time.Second, "the job to run after the restart")
}
