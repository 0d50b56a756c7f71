package pgqueue

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
)

// The chaos tests do harm to running workers (kill them, freeze them, cut their connections,
// starve their pool) and then check that nothing was lost. Worker processes are the test binary
// itself in helper mode "chaos" (see chaosMain); every run of a job is a row of chaos_runs.

// chaosJobsDefault is how many jobs TestChaosKilledWorkers works through unless
// PGQUEUE_CHAOS_JOBS says otherwise.
const chaosJobsDefault = 10000

func chaosJobCount(t *testing.T) int {
	t.Helper()
	s := os.Getenv("PGQUEUE_CHAOS_JOBS")
	if s == "" {
		return chaosJobsDefault
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 100 {
		t.Fatalf("PGQUEUE_CHAOS_JOBS=%q: want a number of at least 100", s)
	}
	return n
}

// createChaosRuns creates the table in which chaos workers record each run of a job.
func createChaosRuns(b *bundle) {
	b.t.Helper()
	b.exec(`CREATE TABLE chaos_runs (
		job_id  uuid        NOT NULL,
		pid     integer     NOT NULL,
		attempt integer     NOT NULL,
		tx      boolean     NOT NULL,
		at      timestamptz NOT NULL DEFAULT clock_timestamp())`)
}

// chaosRun is one row of chaos_runs.
type chaosRun struct {
	pid     int
	attempt int
	tx      bool
}

// chaosRuns reads chaos_runs, by job.
func chaosRuns(b *bundle) map[ulid.ULID][]chaosRun {
	b.t.Helper()
	rows, err := b.pool.Query(context.Background(), "SELECT job_id, pid, attempt, tx FROM chaos_runs ORDER BY at")
	if err != nil {
		b.t.Fatal(err)
	}
	runs := map[ulid.ULID][]chaosRun{}
	var id ulid.ULID
	var r chaosRun
	if _, err := pgx.ForEachRow(rows, []any{(*[16]byte)(&id), &r.pid, &r.attempt, &r.tx}, func() error {
		runs[id] = append(runs[id], r)
		return nil
	}); err != nil {
		b.t.Fatal(err)
	}
	return runs
}

// chaosOutput collects the lines that chaos worker processes print, by process id.
type chaosOutput struct {
	mu    sync.Mutex
	lines map[int][]string
}

func (o *chaosOutput) add(pid int, line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lines == nil {
		o.lines = map[int][]string{}
	}
	o.lines[pid] = append(o.lines[pid], line)
}

// has reports whether process pid (any process, if pid is 0) printed line.
func (o *chaosOutput) has(pid int, line string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for p, lines := range o.lines {
		if (pid == 0 || p == pid) && slices.Contains(lines, line) {
			return true
		}
	}
	return false
}

// ids returns the job ids of the lines "<prefix> <id>…" that any process printed.
func (o *chaosOutput) ids(prefix string) map[ulid.ULID]bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	ids := map[ulid.ULID]bool{}
	for _, lines := range o.lines {
		for _, line := range lines {
			rest, ok := strings.CutPrefix(line, prefix+" ")
			if !ok {
				continue
			}
			s, _, _ := strings.Cut(rest, " ")
			if id, err := ulid.ParseStrict(s); err == nil {
				ids[id] = true
			}
		}
	}
	return ids
}

// count returns how many lines equal to line the processes printed, all of them together.
func (o *chaosOutput) count(line string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, lines := range o.lines {
		for _, l := range lines {
			if l == line {
				n++
			}
		}
	}
	return n
}

// completedBy returns the count process pid printed in its "completed <n>" line, or 0.
func (o *chaosOutput) completedBy(pid int) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.lines[pid] {
		if s, ok := strings.CutPrefix(l, "completed "); ok {
			n, _ := strconv.Atoi(s)
			return n
		}
	}
	return 0
}

// chaosProc is a chaos worker process.
type chaosProc struct {
	cmd  *exec.Cmd
	pid  int
	id   string        // its client's Config.ID: locked_by of the jobs it holds
	read chan struct{} // closed when its output has been read to the end

	once    sync.Once
	waitErr error
}

// chaosSettings configure a chaos worker process (see chaosMain).
type chaosSettings struct {
	concurrency int
	lock, poll  time.Duration
	work        time.Duration // handlers sleep a random time below this
	keep        bool          // keep completed jobs
	hold        bool          // hold jobs until stopped and continued
	dsn         string        // the server's URL; the test server's if empty
	netns       string        // the network namespace to run in (a worker host); none if empty
}

// startChaos starts a chaos worker process on the bundle's schema. It is killed, if still
// running, when the test ends.
func startChaos(t *testing.T, b *bundle, out *chaosOutput, s chaosSettings) *chaosProc {
	t.Helper()
	flag := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	dsn := s.dsn
	if dsn == "" {
		dsn = testDSN
	}
	var in []string
	if s.netns != "" {
		in = []string{"ip", "netns", "exec", s.netns}
	}
	return startHelperProcIn(t, out, "chaos", in, helperEnv+"=chaos", "PGQUEUE_TEST_DSN="+dsn,
		"PGQUEUE_TEST_SCHEMA="+b.schema,
		"PGQUEUE_CHAOS_CONCURRENCY="+strconv.Itoa(s.concurrency),
		"PGQUEUE_CHAOS_LOCK="+s.lock.String(),
		"PGQUEUE_CHAOS_POLL="+s.poll.String(),
		"PGQUEUE_CHAOS_WORK="+s.work.String(),
		"PGQUEUE_CHAOS_KEEP="+flag(s.keep),
		"PGQUEUE_CHAOS_HOLD="+flag(s.hold))
}

// startHelperProc starts the test binary as a helper process with env added to the test's
// environment; its output lines go to out, and its id is name-<pid>. It is killed, if still
// running, when the test ends.
func startHelperProc(t testing.TB, out *chaosOutput, name string, env ...string) *chaosProc {
	t.Helper()
	return startHelperProcIn(t, out, name, nil, env...)
}

// startHelperProcIn is startHelperProc with the test binary run by the command in (such as
// "ip netns exec <namespace>"), when given; the process's id is then the binary's own, which
// ip netns exec becomes.
func startHelperProcIn(t testing.TB, out *chaosOutput, name string, in []string, env ...string) *chaosProc {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := append(append([]string(nil), in...), os.Args[0], "-test.run=^$")
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = w
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		w.Close()
		r.Close()
		t.Fatal(err)
	}
	w.Close()
	p := &chaosProc{cmd: cmd, pid: cmd.Process.Pid, id: fmt.Sprintf("%s-%d", name, cmd.Process.Pid),
		read: make(chan struct{})}
	go func() {
		defer close(p.read)
		defer r.Close()
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			out.add(p.pid, sc.Text())
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = p.wait()
	})
	return p
}

// wait waits for the process to exit and its output to be read; it returns what cmd.Wait did.
func (p *chaosProc) wait() error {
	p.once.Do(func() {
		p.waitErr = p.cmd.Wait()
		<-p.read
	})
	return p.waitErr
}

func (p *chaosProc) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to worker process %d: %v", sig, p.pid, err)
	}
}

// kill kills the process with SIGKILL and waits for it to be gone.
func (p *chaosProc) kill(t *testing.T) {
	t.Helper()
	p.signal(t, syscall.SIGKILL)
	_ = p.wait()
}

// stop shuts the process down with SIGTERM and checks that its worker stopped cleanly.
func (p *chaosProc) stop(t testing.TB) {
	t.Helper()
	p.signal(t, syscall.SIGTERM)
	if err := p.wait(); err != nil {
		t.Errorf("worker process %d did not shut down cleanly: %v", p.pid, err)
	}
}

// waitSlowly is waitFor for conditions that cost a query over many rows: it checks every 50 ms.
func waitSlowly(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// heldBy returns the jobs that the table says a worker holds: running under its lease.
func heldBy(b *bundle, workerID string) []ulid.ULID {
	b.t.Helper()
	rows, err := b.pool.Query(context.Background(),
		"SELECT id FROM pgqueue_jobs WHERE status = 'running' AND locked_by = $1", workerID)
	if err != nil {
		b.t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, scanID)
	if err != nil {
		b.t.Fatal(err)
	}
	return ids
}

// Worker processes are killed with SIGKILL at random moments while three of them work through
// a queue, and replaced. No job is lost, none is left running, and a job runs more than once only
// if it was in flight in a killed process (or a worker reported losing its lock). Jobs that record
// their run in the transaction that completes them (Job.CompleteTx) run exactly once in effect.
//
// Twice, one after the other (each has three processes with pools of their own): with 10 slots a
// process, the jobs held at the kills stay within 2×Concurrency a kill; with 40, their queue is
// claimed on both claim connections, with up to six claims in flight, and up to 8×Concurrency of
// its attempts may wait for the completer (claimsInParallel, heldPerSlot), so a process killed
// mid-drain may hold more, and they stay within that bound (in three runs a kill found 2–68
// jobs, 200–310 at six kills; bound 1,920).
func TestChaosKilledWorkers(t *testing.T) {
	t.Parallel()
	t.Run("10 slots", func(t *testing.T) { chaosKilledWorkers(t, 10, 2) })
	t.Run("40 slots", func(t *testing.T) { chaosKilledWorkers(t, 40, heldPerSlotWide) })
}

// chaosKilledWorkers stays one function: the kills, the replacements and the final accounting
// share the run's processes and records, and read in the order they happen. Its processes have
// concurrency slots each; what the killed ones held, in all, stays within heldPerKill ×
// concurrency a kill.
func chaosKilledWorkers(t *testing.T, concurrency, heldPerKill int) {
	b := setup(t)
	createChaosRuns(b)
	jobs := chaosJobCount(t)
	q := newQueue[chaosJob](t, b.client, "chaos")
	payloads := make([]chaosJob, jobs)
	for i := range payloads {
		payloads[i].Tx = i%2 == 1
	}
	enqueued, err := q.EnqueueMany(t.Context(), payloads, nil)
	if err != nil {
		t.Fatal(err)
	}

	const procs = 3
	kills := max(6, jobs*6/chaosJobsDefault) // 6 per 10,000 jobs
	settings := chaosSettings{concurrency: concurrency, lock: 2 * time.Second,
		poll: 200 * time.Millisecond, work: 5 * time.Millisecond}
	out := &chaosOutput{}
	began := time.Now()
	workers := make([]*chaosProc, procs)
	for i := range workers {
		workers[i] = startChaos(t, b, out, settings)
	}

	// Kill at random points of the run, one in each of `kills` equal stretches between 5 % and 80 %
	// of the jobs done (so that a replacement has time to start working before it may be
	// killed), a few milliseconds after the point is passed so that kills land in the middle of
	// jobs.
	points := make([]int, kills)
	for i := range points {
		points[i] = jobs/20 + int(float64(jobs*3/4)*(float64(i)+rand.Float64())/float64(kills))
	}
	inFlight := map[ulid.ULID]bool{} // jobs a killed process held when it died
	killedPIDs := map[int]bool{}
	for _, point := range points {
		waitSlowly(t, 2*time.Minute, fmt.Sprintf("%d jobs to be done", point), func() bool {
			return jobs-b.count("true") >= point
		})
		// A random one of the processes that hold jobs (a replacement may still be starting).
		var busy []int
		for i, w := range workers {
			if len(heldBy(b, w.id)) > 0 {
				busy = append(busy, i)
			}
		}
		i := rand.IntN(procs)
		if len(busy) > 0 {
			i = busy[rand.IntN(len(busy))]
		}
		time.Sleep(rand.N(20 * time.Millisecond))
		victim := workers[i]
		victim.kill(t)
		killedPIDs[victim.pid] = true
		// Nobody can have taken them back yet: their leases run for another LockDuration.
		held := heldBy(b, victim.id)
		for _, id := range held {
			inFlight[id] = true
		}
		t.Logf("killed worker process %d after %d jobs were done; it held %d", victim.pid, point, len(held))
		workers[i] = startChaos(t, b, out, settings)
	}

	waitSlowly(t, 2*time.Minute, "every job to finish", func() bool { return b.count("true") == 0 })
	elapsed := time.Since(began)
	for _, w := range workers {
		w.stop(t)
	}

	// Completed jobs are deleted (the default retention), so the table is empty: nothing is
	// left running, failed or waiting. Every job ran, each attempt at most once.
	runs := chaosRuns(b)
	lost := 0
	for _, id := range enqueued {
		if len(runs[id]) == 0 {
			lost++
		}
	}
	if len(runs) != jobs {
		t.Errorf("chaos_runs holds %d jobs, want the %d enqueued", len(runs), jobs)
	}
	lockLost := out.ids("event " + string(EventLockLost))
	var duplicates, txDuplicates, unexplained int
	for id, rs := range runs {
		attempts := map[int]bool{}
		for _, r := range rs {
			if attempts[r.attempt] {
				t.Errorf("job %s: attempt %d ran twice", id, r.attempt)
			}
			attempts[r.attempt] = true
		}
		if len(rs) == 1 {
			continue
		}
		duplicates++
		if rs[0].tx {
			txDuplicates++
			t.Errorf("job %s completed in the transaction of its run has %d runs: %v", id, len(rs), rs)
		}
		killedRun := slices.ContainsFunc(rs, func(r chaosRun) bool { return killedPIDs[r.pid] })
		if !(inFlight[id] && killedRun) && !lockLost[id] {
			unexplained++
			t.Errorf("job %s ran %d times, but no killed process held it and no worker lost its lock: %v", id, len(rs), rs)
		}
	}
	if lost > 0 {
		t.Errorf("%d jobs never ran", lost)
	}
	bound := kills * heldPerKill * concurrency
	if len(inFlight) > bound {
		t.Errorf("killed processes held %d jobs, more than the bound %d", len(inFlight), bound)
	}
	t.Logf("chaos killed-workers: jobs=%d procs=%d concurrency=%d kills=%d lost=%d in-flight-at-kill=%d duplicates=%d (tx=%d, bound %d) lock-lost=%d unexplained=%d elapsed=%s",
		jobs, procs, concurrency, kills, lost, len(inFlight), duplicates, txDuplicates, bound,
		len(lockLost), unexplained, elapsed.Round(time.Millisecond))
}

// chaosSnapshot returns every job as text, in id order, wherever it is (pgqueue_all_jobs: a job
// that moves into the history meanwhile is the same job).
func chaosSnapshot(b *bundle) string {
	b.t.Helper()
	var s string
	err := b.pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(concat_ws('|', id, status, attempt,
		lock_token, lock_until, locked_by, run_at, attempted_at, finished_at, errors::text, payload::text), E'\n' ORDER BY id), '')
		FROM pgqueue_all_jobs`).Scan(&s)
	if err != nil {
		b.t.Fatal(err)
	}
	return s
}

// TestChaosFrozenWorker stays one function: freezing, the takeover, the thaw and the fencing
// checks are one story over the same two processes, told in the order it happens.
//
// A worker process is frozen with SIGSTOP while it holds jobs (a stand-in for a network
// partition) for longer than its LockDuration; another process takes the jobs back and completes
// them. When the frozen process is continued, the contexts of its handlers are cancelled with
// ErrLockLost and its late outcomes are fenced off: no job is completed twice and no row changes.
// A late handler's own effect is committed again only if it is made outside the transaction that
// completes the job: with Job.CompleteTx, never.
func TestChaosFrozenWorker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	createChaosRuns(b)
	q := newQueue[chaosJob](t, b.client, "chaos")
	// Wait jobs wait for their context in the frozen process; the others work late, on waking.
	kinds := []chaosJob{{Wait: true}, {Wait: true, Tx: true}, {}, {Tx: true}}
	var payloads []chaosJob
	for range 3 {
		payloads = append(payloads, kinds...)
	}
	ids, err := q.EnqueueMany(t.Context(), payloads, nil)
	if err != nil {
		t.Fatal(err)
	}
	kind := map[ulid.ULID]chaosJob{}
	for i, id := range ids {
		kind[id] = payloads[i]
	}

	out := &chaosOutput{}
	// The frozen worker's lease is short, so that the freeze need not be long; the rescuer's is
	// long, so that a loaded machine cannot make it lose the jobs in turn.
	holding := chaosSettings{concurrency: 2 * len(ids), lock: 2 * time.Second, poll: 100 * time.Millisecond,
		keep: true, hold: true}
	rescuing := holding
	rescuing.lock, rescuing.hold = 10*time.Second, false
	frozen := startChaos(t, b, out, holding)
	waitFor(t, 30*time.Second, "the first worker to start every job", func() bool {
		return len(out.ids("started")) == len(ids)
	})
	if held := heldBy(b, frozen.id); len(held) != len(ids) {
		t.Fatalf("the first worker holds %d jobs, want %d", len(held), len(ids))
	}

	frozen.signal(t, syscall.SIGSTOP)
	frozenAt := time.Now()
	waitFor(t, 30*time.Second, "the frozen worker's leases to run out", func() bool {
		return b.count("status = 'running' AND locked_by = $1 AND lock_until < now()", frozen.id) == len(ids)
	})
	rescuer := startChaos(t, b, out, rescuing)
	waitFor(t, 30*time.Second, "the other worker to take every job back and complete it", func() bool {
		return b.count("status = 'completed'") == len(ids)
	})
	if n := b.count(`status = 'completed' AND attempt = 2 AND jsonb_array_length(errors) = 1
		AND errors->0->>'error' LIKE '%lock expired%' || $1::text || '%'`, frozen.id); n != len(ids) {
		t.Fatalf("%d of %d jobs were completed by the second attempt after a rescue:\n%s", n, len(ids), chaosSnapshot(b))
	}
	before := chaosSnapshot(b)
	runsBefore := chaosRuns(b)

	frozen.signal(t, syscall.SIGCONT)
	frozenFor := time.Since(frozenAt)
	waitFor(t, 30*time.Second, "the woken worker to give up every job", func() bool {
		lost, cancelled, finished := out.ids("event "+string(EventLockLost)), out.ids("cancelled"), out.ids("finished")
		for _, id := range ids {
			if !lost[id] || (kind[id].Wait && !cancelled[id]) || (!kind[id].Wait && !finished[id]) {
				return false
			}
		}
		return true
	})
	frozen.stop(t)
	rescuer.stop(t)

	// Fencing: the late outcomes changed no row.
	if after := chaosSnapshot(b); after != before {
		t.Errorf("the woken worker changed jobs completed by another:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	runs := chaosRuns(b)
	cancelled, lateEffects := 0, 0
	for _, id := range ids {
		k := kind[id]
		switch {
		case k.Wait:
			if !out.has(frozen.pid, "cancelled "+id.String()+" lock-lost") {
				t.Errorf("job %s: the handler's context did not end with ErrLockLost", id)
			} else {
				cancelled++
			}
		case k.Tx:
			if !out.has(frozen.pid, "finished "+id.String()+" not-held") {
				t.Errorf("job %s: CompleteTx in the woken worker did not fail with ErrNotHeld", id)
			}
		default:
			if !out.has(frozen.pid, "finished "+id.String()+" ok") {
				t.Errorf("job %s: the woken worker's late work did not go through", id)
			}
		}
		// Every job's effect was committed once by the rescuer's attempt 2; only a late handler
		// recording its run outside the completing transaction adds another, of attempt 1.
		want := []chaosRun{{pid: rescuer.pid, attempt: 2, tx: k.Tx}}
		if !k.Wait && !k.Tx {
			want = append(want, chaosRun{pid: frozen.pid, attempt: 1})
			lateEffects++
		}
		if !slices.Equal(runsBefore[id], want[:1]) || !slices.Equal(runs[id], want) {
			t.Errorf("job %s (%+v): runs %v, want %v", id, k, runs[id], want)
		}
	}
	waits := len(ids) / len(kinds) * 2
	t.Logf("chaos frozen-worker: jobs=%d lock=%s frozen-for=%s ctx-cancelled=%d/%d late-completions-applied=0 tx-effects-doubled=0 non-tx-late-effects=%d",
		len(ids), holding.lock, frozenFor.Round(time.Millisecond), cancelled, waits, lateEffects)
}

// latencies records, per job payload, when it was enqueued and when its handler started.
type latencies struct {
	mu                  sync.Mutex
	enqueued, startedAt map[int]time.Time
}

func newLatencies() *latencies {
	return &latencies{enqueued: map[int]time.Time{}, startedAt: map[int]time.Time{}}
}

func (l *latencies) enqueue(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.enqueued[i] = time.Now()
}

func (l *latencies) start(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.startedAt[i]; !ok {
		l.startedAt[i] = time.Now()
	}
}

func (l *latencies) started(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.startedAt[i]
	return ok
}

// of returns the wait (enqueue to start) of the jobs from..to-1, sorted.
func (l *latencies) of(from, to int) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for i := from; i < to; i++ {
		ds = append(ds, l.startedAt[i].Sub(l.enqueued[i]))
	}
	slices.Sort(ds)
	return ds
}

// quantile returns the q-quantile of sorted durations.
func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// TestChaosListenerKilled stays one function: the kill loop, the enqueues beside it and the
// wake-up checks after it share their state and read in the order they happen.
//
// The listener's connection is killed again and again with pg_terminate_backend, found the way
// an operator would find it (pg_stat_activity), while jobs are enqueued all along. With the
// safety-net poll at 30 s, no job waits for it: jobs announced while the listener was away are
// picked up when it reconnects. Once the kills stop, wake-ups are as quick as before.
func TestChaosListenerKilled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "listen-chaos")
	const poll = 30 * time.Second
	lat := newLatencies()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		lat.start(job.Payload)
		return nil
	}, &WorkerOptions{PollInterval: poll, Concurrency: 4}))
	startWorker(t, w)
	workerStarted := time.Now()
	waitListening(t, b.client, 1)

	// A steady stream of enqueues while the listener is being killed.
	stopEnqueue := make(chan struct{})
	var enqueuer sync.WaitGroup
	var enqueued int
	var stopOnce sync.Once
	stopEnqueuer := func() {
		stopOnce.Do(func() { close(stopEnqueue) })
		enqueuer.Wait()
	}
	t.Cleanup(stopEnqueuer) // if the test fails early
	enqueuer.Go(func() {
		for ; ; enqueued++ {
			select {
			case <-stopEnqueue:
				return
			case <-time.After(10 * time.Millisecond):
			}
			lat.enqueue(enqueued)
			if _, err := q.Enqueue(context.Background(), enqueued, nil); err != nil {
				t.Errorf("enqueue: %v", err)
				return
			}
		}
	})

	const kills = 10
	terminated := []int32{} // backends already terminated, which may linger a moment in the view
	for k := range kills {
		sessions := b.client.listener.sessions.Load()
		var killed []int32
		err := b.pool.QueryRow(t.Context(), `SELECT coalesce(array_agg(pid) FILTER (WHERE pg_terminate_backend(pid)), '{}')
			FROM pg_stat_activity
			WHERE query = 'LISTEN ' || quote_ident(left('pgqueue.' || $1, 63)) AND pid <> ALL ($2::int[])`,
			b.schema, terminated).Scan(&killed)
		if err != nil {
			t.Fatal(err)
		}
		if len(killed) != 1 {
			t.Fatalf("kill %d: terminated %d listening backends, want 1", k+1, len(killed))
		}
		terminated = append(terminated, killed...)
		waitListening(t, b.client, sessions+1)
		// Sometimes at once, before anything was enqueued on the new connection.
		time.Sleep(rand.N(300 * time.Millisecond))
	}
	stopEnqueuer()
	during := enqueued
	waitFor(t, poll/2, "every job enqueued during the kills to start", func() bool {
		for i := range during {
			if !lat.started(i) {
				return false
			}
		}
		return true
	})

	// After the last reconnect: enqueues one at a time, each picked up by its wake-up.
	const after = 20
	for i := during; i < during+after; i++ {
		lat.enqueue(i)
		if _, err := q.Enqueue(t.Context(), i, nil); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "a job enqueued after the kills to start", func() bool { return lat.started(i) })
	}
	if time.Since(workerStarted) >= poll {
		t.Fatalf("the test ran past the worker's first poll (%s): the waits prove nothing", poll)
	}
	d, a := lat.of(0, during), lat.of(during, during+after)
	t.Logf("chaos listener-killed: kills=%d poll=%s jobs=%d wait p50=%s p99=%s max=%s; after the kills: jobs=%d wait p50=%s max=%s",
		kills, poll, during, quantile(d, 0.5).Round(10*time.Microsecond), quantile(d, 0.99).Round(10*time.Microsecond),
		d[len(d)-1].Round(10*time.Microsecond), after, quantile(a, 0.5).Round(10*time.Microsecond), a[len(a)-1].Round(10*time.Microsecond))
}

// A worker of concurrency 50 on a pool of 2 connections, whose handlers use the same pool
// (queries, and transactions that complete their job with CompleteTx), while enqueues go through
// that pool too: nothing deadlocks, every job runs once and completes.
func TestChaosPoolStarvation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	createChaosRuns(b)
	small := newPool(t, b.schema, 2)
	client, err := NewClient(small, &Config{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[int](t, client, "starved")
	w := must(q.NewWorker(starvedHandler(small), &WorkerOptions{Concurrency: 50}))
	began := time.Now()
	stop := startWorker(t, w)

	// Enqueue through the starved pool while the worker runs: in batches, and one at a time.
	ids := enqueueStarved(t, q)
	jobs := len(ids)

	deadline := time.Now().Add(2 * time.Minute)
	for b.count("true") > 0 {
		if time.Now().After(deadline) {
			s := small.Stat()
			t.Fatalf("deadlock? %d of %d jobs left after 2 minutes; pool: %d of %d connections acquired, %d idle",
				b.count("true"), jobs, s.AcquiredConns(), s.MaxConns(), s.IdleConns())
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(began)
	stop()

	runs := chaosRuns(b)
	for _, id := range ids {
		if len(runs[id]) != 1 {
			t.Errorf("job %s ran %d times, want once: %v", id, len(runs[id]), runs[id])
		}
	}
	if len(runs) != jobs {
		t.Errorf("chaos_runs holds %d jobs, want %d", len(runs), jobs)
	}
	s := small.Stat()
	t.Logf("chaos pool-starvation: jobs=%d max-conns=%d concurrency=50 elapsed=%s acquires=%d waited=%d (%.0f%%) wait-total=%s",
		jobs, s.MaxConns(), elapsed.Round(time.Millisecond), s.AcquireCount(), s.EmptyAcquireCount(),
		100*float64(s.EmptyAcquireCount())/float64(s.AcquireCount()), s.EmptyAcquireWaitTime().Round(time.Millisecond))
}

// starvedHandler is the handler of TestChaosPoolStarvation: it records the job's run in
// chaos_runs through small, by one of three paths by payload: an insert; a query, then an
// insert; or a transaction that inserts and completes the job with CompleteTx.
func starvedHandler(small *pgxpool.Pool) func(context.Context, *Job[int]) error {
	const insert = "INSERT INTO chaos_runs (job_id, pid, attempt, tx) VALUES ($1, 0, $2, $3)"
	return func(ctx context.Context, job *Job[int]) error {
		switch job.Payload % 3 {
		case 0:
			_, err := small.Exec(ctx, insert, [16]byte(job.ID), job.Attempt, false)
			return err
		case 1:
			var runs int
			if err := small.QueryRow(ctx, "SELECT count(*) FROM chaos_runs WHERE job_id = $1", [16]byte(job.ID)).Scan(&runs); err != nil {
				return err
			}
			_, err := small.Exec(ctx, insert, [16]byte(job.ID), job.Attempt, false)
			return err
		default:
			tx, err := small.Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if _, err := tx.Exec(ctx, insert, [16]byte(job.ID), job.Attempt, true); err != nil {
				return err
			}
			if err := job.CompleteTx(ctx, tx); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}
	}
}

// enqueueStarved enqueues the 2,000 jobs of TestChaosPoolStarvation into q, in batches of 450
// with single enqueues between them, and returns their ids.
func enqueueStarved(t testing.TB, q *Queue[int]) []ulid.ULID {
	t.Helper()
	const batches, batch, singles = 4, 450, 200
	var ids []ulid.ULID
	for k := range batches {
		payloads := make([]int, batch)
		for i := range payloads {
			payloads[i] = k*batch + i
		}
		got, err := q.EnqueueMany(t.Context(), payloads, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
		for i := range singles / batches {
			job, err := q.Enqueue(t.Context(), batches*batch+k*singles/batches+i, nil)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, job.ID)
		}
	}
	return ids
}

// A handler completes its job with CompleteTx, but the transaction rolls back (its commit failed,
// say), and the handler goes on working for several LockDurations. The job is still the
// handler's: its lease must be kept, and the job must not run a second time.
func TestChaosCompleteTxRolledBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "rollback")
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	const lock = 2 * time.Second
	var mu sync.Mutex
	var attempts []int
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		mu.Lock()
		attempts = append(attempts, job.Attempt)
		mu.Unlock()
		if job.Attempt == 1 {
			tx, err := b.pool.Begin(ctx)
			if err != nil {
				return err
			}
			if err := job.CompleteTx(ctx, tx); err != nil {
				_ = tx.Rollback(ctx)
				return err
			}
			if err := tx.Rollback(ctx); err != nil {
				return err
			}
		}
		if !sleepCtx(ctx, 5*lock/2) {
			return context.Cause(ctx)
		}
		return nil
	}, &WorkerOptions{Concurrency: 2, LockDuration: lock, PollInterval: 50 * time.Millisecond, OnEvent: ev.on}))
	startWorker(t, w)
	if done := ev.next(t, EventCompleted); done.JobID != job.ID || done.Attempt != 1 {
		t.Fatalf("completed event = %+v, want attempt 1 of job %s", done, job.ID)
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs left after the job completed", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(attempts, []int{1}) {
		t.Fatalf("the job ran attempts %v, want only attempt 1: its lease was not kept after the rollback", attempts)
	}
}

// TestChaosWorkerReclaimsItsOwnLostJob stays one function: it stages one race step by step, and
// the steps share the two attempts' channels and read in the order they happen.
//
// A running job's lease runs out in the database and the job is taken back before its worker
// notices (as when its heartbeats are held up while its claims go through), and the same worker
// claims the job again. The worker then holds two attempts of one job: the older one has lost its
// lock and its handler's context must end with ErrLockLost; the newer one runs and completes.
func TestChaosWorkerReclaimsItsOwnLostJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "reclaim")
	started := make(chan int, 10)
	cause := make(chan error, 1)
	release := make(chan struct{})
	ev := newEvents()
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		started <- job.Attempt
		if job.Attempt == 1 {
			<-ctx.Done()
			cause <- context.Cause(ctx)
			return ctx.Err()
		}
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}, &WorkerOptions{
		// A free slot to claim the job again, and no heartbeat before that has happened.
		Concurrency: 2, LockDuration: 4 * time.Second, HeartbeatInterval: 2 * time.Second,
		PollInterval: 50 * time.Millisecond, OnEvent: ev.on,
	}))
	startWorker(t, w)
	// The listener's first connection makes the worker check its leases at once; let that pass.
	waitListening(t, b.client, 1)
	ev.next(t, EventDrained)
	job, err := q.Enqueue(t.Context(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := receive(t, started, 10*time.Second, "the first attempt to start"); a != 1 {
		t.Fatalf("attempt %d started, want 1", a)
	}
	// Taken back, as a rescue does once the lease has run out; the worker's next poll claims it.
	b.exec(`UPDATE pgqueue_jobs SET status = 'available', lock_token = NULL, lock_until = NULL, locked_by = NULL
		WHERE id = $1`, [16]byte(job.ID))
	if a := receive(t, started, 10*time.Second, "the worker to claim the job again"); a != 2 {
		t.Fatalf("attempt %d started, want 2", a)
	}
	if got := receive(t, cause, 10*time.Second, "the first attempt's context to end"); !errors.Is(got, ErrLockLost) {
		t.Fatalf("the first attempt's context ended with %v, want ErrLockLost", got)
	}
	if lost := ev.next(t, EventLockLost); lost.JobID != job.ID || lost.Attempt != 1 {
		t.Fatalf("lock lost event = %+v, want attempt 1", lost)
	}
	close(release)
	if done := ev.next(t, EventCompleted); done.JobID != job.ID || done.Attempt != 2 {
		t.Fatalf("completed event = %+v, want attempt 2", done)
	}
	if n := b.count("true"); n != 0 {
		t.Fatalf("%d jobs left after the job completed", n)
	}
	select {
	case a := <-started:
		t.Fatalf("attempt %d started, after the job completed", a)
	default:
	}
}

// TestChaosCompleteTxRolledBackThenLost stays one function: it is one race, staged step by step,
// whose steps share the handler's channels and must read in the order they happen.
//
// A handler completes its job with CompleteTx, the transaction rolls back, and meanwhile the job
// is taken by another attempt. The attempt has lost the job: the heartbeat cancels its handler
// (ErrLockLost), or, if the handler returns first, its success is reported as EventLockLost —
// not as EventCompleted, since the row was never completed by it.
func TestChaosCompleteTxRolledBackThenLost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name      string
		heartbeat time.Duration
		returns   bool // the handler returns nil once the job is taken; else it waits for its context
	}{
		{"heartbeat", 200 * time.Millisecond, false},
		{"completer", time.Hour, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			q := newQueue[int](t, b.client, "rollback-lost")
			rolledBack, taken := make(chan struct{}), make(chan struct{})
			cause := make(chan error, 1)
			ev := newEvents()
			w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
				tx, err := b.pool.Begin(ctx)
				if err != nil {
					return err
				}
				if err := job.CompleteTx(ctx, tx); err != nil {
					_ = tx.Rollback(ctx)
					return err
				}
				if err := tx.Rollback(ctx); err != nil {
					return err
				}
				close(rolledBack)
				if c.returns {
					<-taken
					return nil
				}
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return ctx.Err()
			}, &WorkerOptions{Concurrency: 1, LockDuration: 2 * time.Hour, HeartbeatInterval: c.heartbeat,
				PollInterval: time.Hour, OnEvent: ev.on}))
			startWorker(t, w)
			job, err := q.Enqueue(t.Context(), 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			receive(t, rolledBack, 10*time.Second, "the handler's transaction to roll back")
			// Another attempt holds the job now, as after a rescue and a claim elsewhere.
			b.exec(`UPDATE pgqueue_jobs SET lock_token = gen_random_uuid(), attempt = 2, locked_by = 'other'
				WHERE id = $1`, [16]byte(job.ID))
			close(taken)
			if !c.returns {
				if got := receive(t, cause, 10*time.Second, "the handler's context to end"); !errors.Is(got, ErrLockLost) {
					t.Fatalf("the handler's context ended with %v, want ErrLockLost", got)
				}
			}
			deadline := time.After(10 * time.Second)
			for {
				select {
				case e := <-ev.ch:
					if e.JobID != job.ID {
						continue
					}
					switch e.Kind {
					case EventCompleted:
						t.Fatalf("attempt %d reported completed, though its transaction rolled back and another attempt has the job", e.Attempt)
					case EventLockLost:
						if n := b.count("status = 'running' AND attempt = 2 AND locked_by = 'other'"); n != 1 {
							t.Fatalf("the other attempt's row was changed (%d rows as it left them)", n)
						}
						return
					}
				case <-deadline:
					t.Fatal("no EventLockLost for the attempt that lost its job")
				}
			}
		})
	}
}
