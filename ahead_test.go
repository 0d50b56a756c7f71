package pgqueue

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	ossignal "os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// The promises that jobs claimed ahead of a free slot keep, tried from outside: a worker in a
// process of its own (aheadMain), which the test kills, pauses or starves, and the table.

// The jobs of the ahead tests: aheadQuick returns at once; aheadBlock holds its slot until the
// process reads "release" on its standard input (or Run ends); aheadPoison kills its process.
const (
	aheadQuick  = 0
	aheadBlock  = 1
	aheadPoison = 2
)

// aheadMain runs a worker of queue PGQUEUE_AHEAD_QUEUE in schema PGQUEUE_TEST_SCHEMA with
// Concurrency PGQUEUE_AHEAD_CONCURRENCY and LockDuration PGQUEUE_AHEAD_LOCK. It prints
// "start <id> <payload>" as each handler starts; "release" on standard input lets the aheadBlock
// handlers return.
func aheadMain() int {
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	concurrency, err := strconv.Atoi(os.Getenv("PGQUEUE_AHEAD_CONCURRENCY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lock, err := time.ParseDuration(os.Getenv("PGQUEUE_AHEAD_LOCK"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var aheadWait time.Duration
	if v := os.Getenv("PGQUEUE_AHEAD_WAIT"); v != "" {
		if aheadWait, err = time.ParseDuration(v); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	released := make(chan struct{})
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			if in.Text() == "release" {
				close(released)
				return
			}
		}
	}()
	pool, err := helperPool(ctx, 0, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	client, err := NewClient(pool, &Config{ID: fmt.Sprintf("ahead-%d", os.Getpid())})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer client.Close()
	q, err := NewQueue[int](client, os.Getenv("PGQUEUE_AHEAD_QUEUE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var out sync.Mutex
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		if aheadWait != 0 {
			// Set before any job claimed ahead has waited long: the first handlers run quick jobs.
			set := job.held.q.rt.set
			set.mu.Lock()
			set.aheadWait = aheadWait
			set.mu.Unlock()
		}
		out.Lock()
		fmt.Printf("start %s %d\n", job.ID, job.Payload)
		out.Unlock()
		switch job.Payload {
		case aheadBlock:
			select {
			case <-released:
			case <-ctx.Done():
			}
		case aheadPoison:
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		return nil
	}, &WorkerOptions{Concurrency: concurrency, LockDuration: lock, PollInterval: 100 * time.Millisecond}))
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// aheadProc is a worker process of aheadMain.
type aheadProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	starts chan aheadStart // every handler start it printed
	done   chan struct{}   // closed when its output ends
}

// aheadStart is a handler start an ahead process printed.
type aheadStart struct {
	id      string
	payload int
}

// startAhead starts a worker process of queue with concurrency slots and a lease of lock.
func startAhead(t *testing.T, b *bundle, queue string, concurrency int, lock time.Duration) *aheadProc {
	t.Helper()
	return startAheadWaiting(t, b, queue, concurrency, lock, 0)
}

// startAheadWaiting is startAhead with jobs claimed ahead waiting up to wait for a slot before
// they go back (0: aheadWaitMax), so that a test can act while the process holds them.
func startAheadWaiting(t *testing.T, b *bundle, queue string, concurrency int, lock, wait time.Duration) *aheadProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=ahead", "PGQUEUE_TEST_DSN="+testDSN,
		"PGQUEUE_TEST_SCHEMA="+b.schema, "PGQUEUE_AHEAD_QUEUE="+queue,
		"PGQUEUE_AHEAD_CONCURRENCY="+strconv.Itoa(concurrency), "PGQUEUE_AHEAD_LOCK="+lock.String(),
		"PGQUEUE_AHEAD_WAIT="+wait.String())
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &aheadProc{cmd: cmd, stdin: stdin, starts: make(chan aheadStart, 10000), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			var s aheadStart
			if _, err := fmt.Sscanf(lines.Text(), "start %s %d", &s.id, &s.payload); err == nil {
				p.starts <- s
			}
		}
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

// kill kills the process with SIGKILL and waits for it.
func (p *aheadProc) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	<-p.done
}

// release lets the process's held handlers return.
func (p *aheadProc) release(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, "release\n"); err != nil {
		t.Fatal(err)
	}
}

// started returns the ids of the jobs whose handlers the process has started so far.
func (p *aheadProc) started() map[string]int {
	got := map[string]int{}
	for {
		select {
		case s := <-p.starts:
			got[s.id] = s.payload
		default:
			return got
		}
	}
}

// aheadBacklog enqueues quick jobs, so that a worker learns its handlers return sooner than a
// claim comes back and claims ahead of its free slots, then blocking jobs behind them, with
// maxAttempts each; it returns the blocking jobs' ids.
func aheadBacklog(t *testing.T, q *Queue[int], quick, blocking, maxAttempts int) []string {
	t.Helper()
	opts := &EnqueueOptions{MaxAttempts: maxAttempts}
	if _, err := q.EnqueueMany(t.Context(), make([]int, quick), &EnqueueOptions{MaxAttempts: maxAttempts, Priority: 1}); err != nil {
		t.Fatal(err)
	}
	payloads := make([]int, blocking)
	for i := range payloads {
		payloads[i] = aheadBlock
	}
	ids, err := q.EnqueueMany(t.Context(), payloads, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// waitHeldAhead waits until process p holds blocking jobs it has not started (claimed ahead,
// waiting for a slot): more blocking jobs of q running than slots, all of its slots blocked. It
// returns the ids of the jobs it started.
func waitHeldAhead(t *testing.T, b *bundle, p *aheadProc, q string, slots int) map[string]int {
	t.Helper()
	started := map[string]int{}
	waitFor(t, 30*time.Second, "jobs claimed ahead behind blocked handlers", func() bool {
		for id, payload := range p.started() {
			started[id] = payload
		}
		blocked := 0
		for _, payload := range started {
			if payload == aheadBlock {
				blocked++
			}
		}
		return blocked == slots && b.count("queue = $1 AND status = 'running' AND payload = $2", q, aheadBlock) > slots
	})
	return started
}

// A job claimed ahead whose process dies before the job starts has not used an attempt: taken
// back once its lease has run out, it is available again with as many attempts left as it had,
// not failed, even with MaxAttempts 1 (the lost hold keeps its attempt number, and MaxAttempts
// grows by one). Before, the claim charged its attempt, and the rescue failed it with "lock
// expired" though its handler never ran. The jobs whose handlers started, and whose starts were
// recorded, are charged.
func TestClaimedAheadLosesNoAttemptWhenItsProcessDies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "ahead-killed")
	blocking := aheadBacklog(t, q, 300, 20, 1)
	// The jobs claimed ahead wait for the kill, not aheadWaitMax: they are still held when it comes.
	p := startAheadWaiting(t, b, q.Name(), 2, time.Minute, time.Hour)
	started := waitHeldAhead(t, b, p, q.Name(), 2)
	// The starts of the blocked jobs are recorded by the time their handlers have run a moment.
	waitFor(t, 10*time.Second, "the blocked jobs' starts to be recorded", func() bool {
		return b.count("queue = $1 AND status = 'running' AND attempted_at IS NOT NULL", q.Name()) == 2
	})
	p.kill()
	for id, payload := range p.started() {
		started[id] = payload
	}
	var unstarted []string
	for _, id := range blocking {
		if _, ok := started[id]; !ok && b.count("id = $1 AND status = 'running'", parseID(t, id)) == 1 {
			unstarted = append(unstarted, id)
		}
	}
	if len(unstarted) == 0 {
		t.Fatal("the killed process held no job it had not started")
	}
	// Its leases run out; any process's maintenance takes the jobs back.
	b.exec("UPDATE pgqueue_jobs SET lock_until = now() - interval '1 second' WHERE status = 'running'")
	var available, failed int
	if err := b.pool.QueryRow(t.Context(), rescueSQL, []string{q.Name()}, 1000, maxErrorsKept).
		Scan(new(string), &available, &failed, new(int)); err != nil {
		t.Fatal(err)
	}
	t.Logf("taken back: %d available, %d failed; %d held and never started", available, failed, len(unstarted))
	for _, id := range unstarted {
		var status Status
		var attempt, maxAttempts int
		if err := b.pool.QueryRow(t.Context(), "SELECT status, attempt, max_attempts FROM pgqueue_jobs WHERE id = $1",
			parseID(t, id)).Scan(&status, &attempt, &maxAttempts); err != nil {
			t.Fatal(err)
		}
		if status != StatusAvailable || maxAttempts-attempt != 1 {
			t.Errorf("job %s, claimed ahead and never started, is %s after attempt %d of %d, want available with 1 attempt left",
				id, status, attempt, maxAttempts)
		}
	}
	for id, payload := range started {
		if payload != aheadBlock {
			continue
		}
		if n := b.count("id = $1 AND status = 'failed' AND attempt = 1", parseID(t, id)); n != 1 {
			t.Errorf("job %s, started and killed with its process at its only attempt, is not failed", id)
		}
	}
}

// A job whose handler kills its process every time it starts ends failed after a bounded number
// of crashes, whether it was claimed for a free slot or ahead of one: at most MaxAttempts + 1
// (one crash may come before its start was recorded, and is not charged).
func TestPoisonJobEndsFailed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "ahead-poison")
	const maxAttempts = 2
	// Quick jobs first in every run, so that the poison is likely claimed ahead of a free slot.
	poison, err := q.Enqueue(t.Context(), aheadPoison, &EnqueueOptions{MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatal(err)
	}
	crashes := 0
	for ; crashes <= maxAttempts+3; crashes++ {
		if n := b.count("id = $1 AND status = 'failed'", poison.ID); n == 1 {
			break
		}
		if _, err := q.EnqueueMany(t.Context(), make([]int, 200), &EnqueueOptions{Priority: 1}); err != nil {
			t.Fatal(err)
		}
		p := startAhead(t, b, q.Name(), 4, time.Minute)
		select {
		case <-p.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("run %d: the poison did not kill its process", crashes+1)
		}
		p.kill()
		b.exec("UPDATE pgqueue_jobs SET lock_until = now() - interval '1 second' WHERE status = 'running'")
		if _, err := b.pool.Exec(t.Context(), rescueSQL, []string{q.Name()}, 1000, maxErrorsKept); err != nil {
			t.Fatal(err)
		}
	}
	if n := b.count("id = $1 AND status = 'failed'", poison.ID); n != 1 {
		t.Fatalf("the poison job is not failed after %d crashes", crashes)
	}
	if crashes > maxAttempts+1 {
		t.Fatalf("the poison job failed after %d crashes, want at most MaxAttempts+1 = %d", crashes, maxAttempts+1)
	}
	t.Logf("failed after %d crashes", crashes)
}

// A job claimed ahead does not wait in one process, behind handlers that do not return, while
// another process has free slots: once it has waited longer than a job claimed ahead is expected
// to, it goes back to the table, uncharged and in its place, and the idle process runs it.
func TestClaimedAheadGoesToAnIdleProcess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "ahead-idle")
	blocking := aheadBacklog(t, q, 300, 6, 3)
	p := startAhead(t, b, q.Name(), 2, time.Minute)
	started := waitHeldAhead(t, b, p, q.Name(), 2)
	ran := make(chan string, 100)
	attempts := make(chan int, 100)
	startWorker(t, must(q.NewWorker(func(_ context.Context, job *Job[int]) error {
		ran <- job.ID.String()
		attempts <- job.Attempt
		return nil
	}, &WorkerOptions{Concurrency: 10, PollInterval: time.Hour})))
	want := 0
	for _, id := range blocking {
		if _, ok := started[id]; !ok {
			want++
		}
	}
	for range want {
		receive(t, ran, 30*time.Second, "the idle process to run the jobs the busy one had claimed ahead")
		if a := <-attempts; a != 1 {
			t.Errorf("a job handed back ran at attempt %d, want 1 (its wait charged no attempt)", a)
		}
	}
	for id := range p.started() {
		started[id] = 0
	}
	if len(started) != 300+2 {
		t.Errorf("the busy process started %d jobs, want the 300 quick ones and its 2 blocked", len(started))
	}
}

// A MaxRunning is a limit, not a ceiling below it: a job claimed ahead in one process takes no
// place of the limit while it waits, so an idle process starts a job while the first process's
// handler runs.
func TestClaimedAheadTakesNoPlaceOfMaxRunning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "ahead-capped")
	if err := q.SetLimits(t.Context(), Limits{MaxRunning: 2}); err != nil {
		t.Fatal(err)
	}
	aheadBacklog(t, q, 300, 6, 3)
	p := startAhead(t, b, q.Name(), 1, time.Minute)
	var blocked string
	waitFor(t, 30*time.Second, "the busy process's one handler to block", func() bool {
		for id, payload := range p.started() {
			if payload == aheadBlock {
				blocked = id
			}
		}
		return blocked != ""
	})
	ran := make(chan string, 100)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		ran <- job.ID.String()
		<-ctx.Done()
		return nil
	}, &WorkerOptions{Concurrency: 10, PollInterval: time.Hour, ShutdownTimeout: 10 * time.Millisecond}))
	// Give the busy process a moment to claim ahead, as it would have before.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b.count("queue = $1 AND status = 'running'", q.Name()) > 1 {
			break
		}
	}
	startWorker(t, w)
	receive(t, ran, 10*time.Second, "the idle process to start a job beside the busy one's, within MaxRunning 2")
	if n := b.count("queue = $1 AND status = 'running'", q.Name()); n > 2 {
		t.Errorf("%d jobs running, past MaxRunning 2", n)
	}
}

// Pause stops jobs from starting: once the workers have heard it, no job of the queue starts in
// any process, and the jobs they had claimed ahead go back to the table uncharged.
func TestPauseStopsJobsClaimedAhead(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "ahead-paused")
	aheadBacklog(t, q, 300, 20, 3)
	// The jobs claimed ahead wait for the pause, not aheadWaitMax: it is the pause that sends them back.
	p := startAheadWaiting(t, b, q.Name(), 2, time.Minute, time.Hour)
	waitHeldAhead(t, b, p, q.Name(), 2)
	if err := q.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The pause is heard within moments; the jobs the process holds but has not started go back.
	waitFor(t, 10*time.Second, "the jobs claimed ahead to go back once the pause was heard", func() bool {
		return b.count("queue = $1 AND status = 'running'", q.Name()) == 2
	})
	if n := b.count("queue = $1 AND status = 'available' AND attempt <> 0", q.Name()); n != 0 {
		t.Errorf("%d jobs back in line with an attempt charged", n)
	}
	p.release(t)
	waitFor(t, 10*time.Second, "the blocked handlers to return", func() bool {
		return b.count("queue = $1 AND status = 'running'", q.Name()) == 0
	})
	select {
	case s := <-p.starts:
		t.Fatalf("job %s (payload %d) started after the pause was heard", s.id, s.payload)
	case <-time.After(500 * time.Millisecond):
	}
}

// parseID parses a job id printed by a helper process.
func parseID(t *testing.T, s string) ulid.ULID {
	t.Helper()
	id, err := ulid.ParseStrict(strings.TrimSpace(s))
	if err != nil {
		t.Fatal(err)
	}
	return id
}
