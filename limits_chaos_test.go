package pgqueue

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	ossignal "os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
)

// The limits chaos test: flow-control limits hold while worker processes are killed and the
// server restarts, and a killed worker leaks no slot. Worker processes are the test binary in
// helper mode "limits" (limitsChaosMain); every run of a job is a row of limits_runs.

// limitsChaosQueue is one queue of the limits chaos test: its limits, and the jobs enqueued
// into it, perKey for each of keys ("" for jobs without a key).
type limitsChaosQueue struct {
	name        string
	limits      Limits
	keys        []string
	perKey      int
	weights     []int // the jobs' weights, taking turns in each key's line; none: 1
	concurrency int   // each worker process's Concurrency on the queue, above the limits
}

// limitsChaosQueues are the queues of TestChaosLimits: a cap on the whole queue, small (every
// claim takes the claim lock exclusively) and large (claims share it while the queue is far from
// its cap, claim_lock.sql); a cap per key under a cap on the queue, with unkeyed jobs beside the
// keyed ones; and a rate per key under a rate on the queue, with three keys whose rates add up to
// less than the queue's, so that unkeyed jobs fill the queue's rate and both rates bind; its jobs
// weigh 1, 2 or 3.
var limitsChaosQueues = []limitsChaosQueue{
	{name: "capped", limits: Limits{MaxRunning: 4}, keys: []string{""}, perKey: 900, concurrency: 7},
	{name: "shared", limits: Limits{MaxRunning: 48}, keys: []string{""}, perKey: 2400, concurrency: 20},
	{name: "keyed", limits: Limits{MaxRunning: 6, KeyMaxRunning: 2}, keys: []string{"k0", "k1", "k2", "k3", ""},
		perKey: 200, concurrency: 9},
	{name: "rated", limits: Limits{Rate: Rate{Starts: 20, Per: 500 * time.Millisecond},
		KeyRate: Rate{Starts: 6, Per: 500 * time.Millisecond}}, keys: []string{"r0", "r1", "r2", ""},
		perKey: 66, weights: []int{1, 2, 3}, concurrency: 9},
}

const (
	// limitsClock is how the test's messages give times of day.
	limitsClock = "15:04:05.000"
	// limitsChaosLock is the worker processes' LockDuration: short, so that a killed worker's
	// jobs are rescued soon.
	limitsChaosLock = 2 * time.Second
	// limitsChaosWork is the longest a handler sleeps (a random time below it).
	limitsChaosWork = 80 * time.Millisecond
)

// limitsChaosMain runs a worker process of TestChaosLimits: one client on PGQUEUE_TEST_DSN that
// works every queue of limitsChaosQueues, keeping completed jobs. Each handler sleeps a random
// time below limitsChaosWork, then records its run in limits_runs (job, queue, key, process,
// attempt, and when the handler started and ended by this machine's clock). The process prints
// "event <kind> <id> <attempt> <time>" for lock_lost, cancelled, failed, retrying and completed
// events.
func limitsChaosMain() int {
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := helperPool(ctx, 16, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	// Connection errors are expected by the dozen while the server restarts: no log.
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 4}))
	client, err := NewClient(pool, &Config{ID: fmt.Sprintf("limits-%d", os.Getpid()), Logger: quiet,
		Retention: Retention{Completed: KeepForever}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer client.Close()
	onEvent := func(ev Event) {
		switch ev.Kind {
		case EventLockLost, EventCancelled, EventFailed, EventRetrying, EventCompleted:
			fmt.Printf("event %s %s %d %s\n", ev.Kind, ev.JobID, ev.Attempt, time.Now().Format(limitsClock))
		}
	}
	var workers []AnyWorker
	for _, lq := range limitsChaosQueues {
		q := must(NewQueue[int](client, lq.name))
		workers = append(workers, must(q.NewWorker(limitsChaosHandler(pool), &WorkerOptions{
			Concurrency: lq.concurrency, LockDuration: limitsChaosLock,
			PollInterval: 200 * time.Millisecond, OnEvent: onEvent})))
	}
	if err := client.Run(ctx, workers...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// limitsChaosHandler sleeps a random time below limitsChaosWork and records the run.
func limitsChaosHandler(pool *pgxpool.Pool) Handler[int] {
	pid := os.Getpid()
	return func(ctx context.Context, job *Job[int]) error {
		started := time.Now()
		if !sleepCtx(ctx, rand.N(limitsChaosWork)) {
			return context.Cause(ctx)
		}
		_, err := pool.Exec(ctx, `INSERT INTO limits_runs (job_id, queue, key, pid, attempt, started, ended)
			VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			[16]byte(job.ID), job.Queue, job.Key, pid, job.Attempt, started, time.Now())
		return err
	}
}

// startLimitsWorker starts a worker process of TestChaosLimits on the private server pg; its
// output lines go to out. It is killed, if still running, when the test ends.
func startLimitsWorker(t *testing.T, pg *pgInstance, out *chaosOutput) *chaosProc {
	t.Helper()
	return startHelperProc(t, out, "limits", helperEnv+"=limits", "PGQUEUE_TEST_DSN="+pg.dsn())
}

// limitsSampler samples, many times a second, how many jobs run per queue and per key, and
// keeps the most it saw.
type limitsSampler struct {
	mu       sync.Mutex
	samples  int
	failed   int                  // samples that failed: the server was away
	running  map[string]int       // queue → most running jobs seen at once
	keyRun   map[[2]string]int    // (queue, key) → most running jobs seen at once
	keyHeld  map[[2]string]int    // (queue, key) → most jobs holding the key's places
	lastFull map[string]time.Time // queue → when it was last seen at its MaxRunning
	over     []string             // the first samples that broke a limit
	limits   map[string]limitsChaosQueue
}

func newLimitsSampler() *limitsSampler {
	s := &limitsSampler{running: map[string]int{}, keyRun: map[[2]string]int{}, keyHeld: map[[2]string]int{},
		lastFull: map[string]time.Time{}, limits: map[string]limitsChaosQueue{}}
	for _, lq := range limitsChaosQueues {
		s.limits[lq.name] = lq
	}
	return s
}

// limitsSampleSQL counts, in one statement (one snapshot), the running jobs of each queue and
// of each key, and the jobs that hold a key's places: running, or waiting to run again after
// an attempt. A killed worker's jobs count until they are rescued: that is the design.
const limitsSampleSQL = `SELECT queue, coalesce(key, ''), grouping(key) = 1,
	count(*) FILTER (WHERE status = 'running'), count(*)
	FROM pgqueue_jobs
	WHERE status = 'running' OR (status = 'scheduled' AND attempted_at IS NOT NULL)
	GROUP BY GROUPING SETS ((queue), (queue, key))`

// run samples every interval until ctx ends, carrying on through failed samples.
func (s *limitsSampler) run(ctx context.Context, pool *pgxpool.Pool, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := s.sample(ctx, pool); err != nil && ctx.Err() == nil {
			s.mu.Lock()
			s.failed++
			s.mu.Unlock()
		}
	}
}

// sample takes one sample and records it.
func (s *limitsSampler) sample(ctx context.Context, pool *pgxpool.Pool) error {
	rows, err := pool.Query(ctx, limitsSampleSQL)
	if err != nil {
		return err
	}
	type row struct {
		queue, key     string
		whole          bool
		running, holds int
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		return x, r.Scan(&x.queue, &x.key, &x.whole, &x.running, &x.holds)
	})
	if err != nil {
		return err
	}
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	for _, x := range got {
		l := s.limits[x.queue].limits
		if x.whole {
			s.running[x.queue] = max(s.running[x.queue], x.running)
			if l.MaxRunning > 0 && x.running >= l.MaxRunning {
				s.lastFull[x.queue] = now
			}
			if l.MaxRunning > 0 && x.running > l.MaxRunning {
				s.overf("queue %s: %d running, MaxRunning %d", x.queue, x.running, l.MaxRunning)
			}
			continue
		}
		if x.key == "" {
			continue
		}
		k := [2]string{x.queue, x.key}
		s.keyRun[k] = max(s.keyRun[k], x.running)
		s.keyHeld[k] = max(s.keyHeld[k], x.holds)
		if l.KeyMaxRunning > 0 && x.holds > l.KeyMaxRunning {
			s.overf("queue %s key %s: %d running, %d holding places, KeyMaxRunning %d",
				x.queue, x.key, x.running, x.holds, l.KeyMaxRunning)
		}
	}
	return nil
}

// overf records a sample that broke a limit (the first 20 of them, with the time).
func (s *limitsSampler) overf(format string, args ...any) {
	if len(s.over) < 20 {
		s.over = append(s.over, time.Now().Format(limitsClock)+" "+fmt.Sprintf(format, args...))
	}
}

// limitsChaos is the state of one TestChaosLimits run: the private server, the worker
// processes, and what the kills and restarts did.
type limitsChaos struct {
	t       *testing.T
	pg      *pgInstance
	b       *bundle // on the private server's public schema
	out     *chaosOutput
	workers []*chaosProc
	total   int // jobs enqueued

	kills, restarts int
	inFlight        map[ulid.ULID]bool // jobs a killed process held when it died
	heldAtKill      []int              // how many jobs each killed process held, of every queue
	cappedAtKill    []int              // and of the queue "capped"
	rescuedAt       time.Time          // when the last killed process's jobs had all been taken back
	backlogAtRescue int                // available jobs of "capped" then
	restartTook     []string
	timeline        []string // what the chaos did, and when
}

// TestChaosLimits checks the two promises about flow control under faults. Limits hold
// under contention: three worker processes, each with a Concurrency above every limit, work
// three limited queues while a sampler reads, every 10 ms in one statement, how many jobs run
// per queue and per key; it never sees more than MaxRunning per queue, or more than
// KeyMaxRunning jobs running or holding places per key, and no window of Rate.Per holds more
// logged starts (by the database clock) than Rate.Starts per queue, or KeyRate.Starts per key,
// although worker processes are killed with SIGKILL while holding jobs and the server restarts
// twice (pg_ctl restart -m fast, then -m immediate). And limits are derived from rows, not
// counters: once a killed worker's leases run out and its jobs are rescued, the queue it held
// at its MaxRunning reaches MaxRunning again, and every queue drains. Besides: every job
// completes, none is lost, each attempt runs at most once, a job runs twice only if a killed
// process held it, a worker lost its lease, or the server died between committing a handler's
// write and answering it (checkRuns), every start of a rated queue is logged, and the handlers
// themselves (by their own clocks) never overlap beyond the limits.
func TestChaosLimits(t *testing.T) {
	t.Parallel()
	c := newLimitsChaos(t)
	starts := recordStarts(t, c.b)
	c.enqueue()

	sampler := newLimitsSampler()
	samplePool := c.pg.newPool(2)
	sctx, stopSampling := context.WithCancel(context.Background())
	var sampling sync.WaitGroup
	sampling.Go(func() { sampler.run(sctx, samplePool, 10*time.Millisecond) })
	stopSampler := func() { stopSampling(); sampling.Wait() }
	t.Cleanup(stopSampler)

	began := time.Now()
	for range 3 {
		c.workers = append(c.workers, startLimitsWorker(t, c.pg, c.out))
	}
	c.chaos()
	waitSlowly(t, 2*time.Minute, "every job to complete", func() bool { return c.completed() == c.total })
	elapsed := time.Since(began)
	for _, w := range c.workers {
		w.stop(t)
	}
	stopSampler()

	sampler.check(t, c.rescuedAt, c.backlogAtRescue)
	runs := c.checkRuns()
	rates := c.checkRates(starts())
	sampler.mu.Lock()
	defer sampler.mu.Unlock()
	t.Logf("chaos limits: jobs=%d procs=3 kills=%d (held %v, of capped %v) restarts=%d (%s) samples=%d "+
		"failed-samples=%d max-running=%v max-key-running=%v max-key-held=%v %s handler-overlap=%s "+
		"duplicates=%d (lock-lost=%d in-flight-at-kill=%d write-answer-lost=%d) elapsed=%s",
		c.total, c.kills, c.heldAtKill, c.cappedAtKill, c.restarts, strings.Join(c.restartTook, " "),
		sampler.samples, sampler.failed, sampler.running, keyMaxima(sampler.keyRun), keyMaxima(sampler.keyHeld),
		rates, runs.overlap, runs.duplicates, runs.lockLost, len(c.inFlight), runs.unknown, elapsed.Round(time.Millisecond))
}

// newLimitsChaos starts a private server, migrates it, creates limits_runs and sets the queues'
// limits.
func newLimitsChaos(t *testing.T) *limitsChaos {
	pg := startPostgres(t)
	pool := pg.newPool(10)
	migrate(t, pool)
	quiet := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelError + 4}))
	client, err := NewClient(pool, &Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	c := &limitsChaos{t: t, pg: pg, b: &bundle{t: t, schema: "public", pool: pool, client: client},
		out: &chaosOutput{}, inFlight: map[ulid.ULID]bool{}}
	c.b.exec(`CREATE TABLE limits_runs (job_id uuid NOT NULL, queue text NOT NULL, key text NOT NULL,
		pid integer NOT NULL, attempt integer NOT NULL, started timestamptz NOT NULL, ended timestamptz NOT NULL)`)
	for _, lq := range limitsChaosQueues {
		if err := newQueue[int](t, client, lq.name).SetLimits(t.Context(), lq.limits); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// enqueue enqueues every queue's jobs, key after key in rounds of 10, so that keyed and unkeyed
// jobs are mixed in each queue's line, each round of a key with the next of the queue's weights.
func (c *limitsChaos) enqueue() {
	for _, lq := range limitsChaosQueues {
		q := newQueue[int](c.t, c.b.client, lq.name)
		for round, done := 0, 0; done < lq.perKey; round, done = round+1, done+10 {
			weight := 1
			if len(lq.weights) > 0 {
				weight = lq.weights[round%len(lq.weights)]
			}
			for _, key := range lq.keys {
				n := min(10, lq.perKey-done)
				if _, err := q.EnqueueMany(c.t.Context(), make([]int, n), &EnqueueOptions{Key: key, Weight: weight}); err != nil {
					c.t.Fatal(err)
				}
				c.total += n
			}
		}
	}
}

// completed returns how many jobs have completed, or -1 while the server cannot answer.
func (c *limitsChaos) completed() int {
	var n int
	if err := c.b.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM pgqueue_all_jobs WHERE status = 'completed'`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// chaos kills a worker process at 15 % of the jobs done, restarts the server (fast) at 35 %,
// kills another at 50 % and crash-restarts the server (immediate) at 65 %.
func (c *limitsChaos) chaos() {
	for _, step := range []struct {
		at     float64
		action string
	}{{0.15, "kill"}, {0.35, "fast"}, {0.50, "kill"}, {0.65, "immediate"}} {
		point := int(step.at * float64(c.total))
		waitSlowly(c.t, 2*time.Minute, fmt.Sprintf("%d jobs to complete", point), func() bool {
			return c.completed() >= point
		})
		if step.action == "kill" {
			c.kill()
			continue
		}
		c.timeline = append(c.timeline, time.Now().Format(limitsClock)+" restart -m "+step.action)
		took := c.pg.restart(step.action)
		c.timeline = append(c.timeline, time.Now().Format(limitsClock)+" restarted")
		// The pool's connections died with the server: drop them rather than fail on each.
		c.b.pool.Reset()
		c.restarts++
		c.restartTook = append(c.restartTook, fmt.Sprintf("%s=%s", step.action, took.Round(time.Millisecond)))
	}
}

// kill kills, with SIGKILL, the worker process that holds the most jobs of "capped" (so that
// its slots would be the ones to leak), replaces it, and waits for its jobs to be rescued.
func (c *limitsChaos) kill() {
	t := c.t
	i := 0
	// Jobs of capped come and go by the millisecond: look a few times for a process holding
	// at least half the queue's slots.
	for range 100 {
		most := -1
		for j, w := range c.workers {
			if n := c.b.count("status = 'running' AND queue = 'capped' AND locked_by = $1", w.id); n > most {
				i, most = j, n
			}
		}
		if most >= 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	victim := c.workers[i]
	victim.kill(t)
	killedAt := time.Now()
	c.timeline = append(c.timeline, fmt.Sprintf("%s killed %d", killedAt.Format(limitsClock), victim.pid))
	c.kills++
	// Nobody can have taken them back yet: their leases run for another LockDuration.
	held := heldBy(c.b, victim.id)
	for _, id := range held {
		c.inFlight[id] = true
	}
	capped := c.b.count("status = 'running' AND queue = 'capped' AND locked_by = $1", victim.id)
	c.heldAtKill = append(c.heldAtKill, len(held))
	c.cappedAtKill = append(c.cappedAtKill, capped)
	c.workers[i] = startLimitsWorker(t, c.pg, c.out)
	waitSlowly(t, time.Minute, "the killed process's jobs to be rescued", func() bool {
		return c.b.count("status = 'running' AND locked_by = $1", victim.id) == 0
	})
	c.rescuedAt = time.Now()
	c.backlogAtRescue = c.b.count("status = 'available' AND queue = 'capped'")
	t.Logf("killed worker process %d holding %d jobs (%d of capped); rescued after %s, capped backlog %d",
		victim.pid, len(held), capped, c.rescuedAt.Sub(killedAt).Round(time.Millisecond),
		c.backlogAtRescue)
}

// check fails the test if a sample broke a limit, if the limits were never reached (the test
// would prove nothing), or if "capped" never ran at its MaxRunning again once the last killed
// process's jobs were rescued while it still had a backlog: a slot would have leaked.
func (s *limitsSampler) check(t *testing.T, rescuedAt time.Time, backlog int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.over {
		t.Errorf("a sample broke a limit: %s", o)
	}
	for _, lq := range limitsChaosQueues {
		if n := lq.limits.MaxRunning; n > 0 && s.running[lq.name] < n {
			t.Errorf("queue %s: at most %d jobs ran at once; MaxRunning %d was never reached", lq.name, s.running[lq.name], n)
		}
		if k := lq.limits.KeyMaxRunning; k > 0 && !slices.ContainsFunc(lq.keys, func(key string) bool {
			return s.keyRun[[2]string{lq.name, key}] == k
		}) {
			t.Errorf("queue %s: no key ever ran KeyMaxRunning %d jobs at once", lq.name, k)
		}
	}
	if s.samples < 100 {
		t.Errorf("only %d samples were taken", s.samples)
	}
	full := s.lastFull["capped"]
	switch {
	case backlog < 20:
		t.Logf("capped had only %d jobs waiting when the last kill's jobs were rescued: not checked for a full queue after it", backlog)
	case !full.After(rescuedAt):
		t.Errorf("capped had %d jobs waiting once the killed process's jobs were rescued, but never ran MaxRunning %d "+
			"jobs again (last seen full %s before): a slot leaked", backlog, s.limits["capped"].limits.MaxRunning,
			rescuedAt.Sub(full).Round(time.Millisecond))
	}
}

// limitsRun is one row of limits_runs.
type limitsRun struct {
	id             ulid.ULID
	queue, key     string
	pid, attempt   int
	started, ended time.Time
}

// limitsRuns reads limits_runs.
func (c *limitsChaos) limitsRuns() []limitsRun {
	rows, err := c.b.pool.Query(c.t.Context(), `SELECT job_id, queue, key, pid, attempt, started, ended FROM limits_runs`)
	if err != nil {
		c.t.Fatal(err)
	}
	runs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (limitsRun, error) {
		var x limitsRun
		return x, r.Scan((*[16]byte)(&x.id), &x.queue, &x.key, &x.pid, &x.attempt, &x.started, &x.ended)
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return runs
}

// failedAttempts returns, per job, the attempts that its row records as failed by their handler
// (not taken back after their lease ran out).
func (c *limitsChaos) failedAttempts() map[ulid.ULID]map[int]bool {
	rows, err := c.b.pool.Query(c.t.Context(), `SELECT j.id, (e->>'attempt')::int
		FROM pgqueue_all_jobs AS j, jsonb_array_elements(coalesce(j.errors, '[]')) AS e
		WHERE e->>'error' NOT LIKE 'lock expired%'`)
	if err != nil {
		c.t.Fatal(err)
	}
	failed := map[ulid.ULID]map[int]bool{}
	var id ulid.ULID
	var attempt int
	if _, err := pgx.ForEachRow(rows, []any{(*[16]byte)(&id), &attempt}, func() error {
		if failed[id] == nil {
			failed[id] = map[int]bool{}
		}
		failed[id][attempt] = true
		return nil
	}); err != nil {
		c.t.Fatal(err)
	}
	return failed
}

// runFigures are what checkRuns counts.
type runFigures struct {
	duplicates int // jobs that ran more than once
	lockLost   int // lock_lost events
	unknown    int // runs whose write committed though their handler saw its connection die
	overlap    string
}

// checkRuns checks limits_runs against the jobs: every job completed and ran, no attempt ran
// twice, and a job ran again only after an attempt that a killed process held, that lost its
// lease, or whose handler failed after its write had committed: the server died before the
// commit's answer reached it (the handler saw "unexpected EOF" and returned it; the job was
// retried, as at-least-once delivery does). And the handlers of attempts that kept their lease
// never ran beyond the queue's or a key's limit at once.
func (c *limitsChaos) checkRuns() runFigures {
	t := c.t
	if n := c.b.count("status = 'completed'"); n != c.total {
		t.Errorf("%d of %d jobs completed", n, c.total)
	}
	if n := c.b.count("true"); n != c.total {
		t.Errorf("%d jobs in the table, want the %d enqueued", n, c.total)
	}
	runs := c.limitsRuns()
	lost := c.out.ids("event " + string(EventLockLost))
	failed := c.failedAttempts()
	byJob := map[ulid.ULID][]limitsRun{}
	for _, r := range runs {
		byJob[r.id] = append(byJob[r.id], r)
	}
	if n := c.b.count("id <> ALL ($1::uuid[])", jobIDs(byJob)); n != 0 {
		t.Errorf("%d jobs completed without a recorded run", n)
	}
	f := runFigures{lockLost: len(lost)}
	for id, rs := range byJob {
		attempts := map[int]bool{}
		last := 0
		for _, r := range rs {
			if attempts[r.attempt] {
				t.Errorf("job %s: attempt %d ran twice", id, r.attempt)
			}
			attempts[r.attempt] = true
			last = max(last, r.attempt)
		}
		if len(rs) == 1 {
			continue
		}
		f.duplicates++
		for _, r := range rs {
			switch {
			case r.attempt == last || c.inFlight[id] || lost[id]:
			case failed[id][r.attempt]:
				f.unknown++
			default:
				t.Errorf("job %s ran %d times, but no killed process held it, no worker lost its lease and no "+
					"handler failed after its write:\n%s", id, len(rs), c.describe(id, rs))
			}
		}
	}
	f.overlap = c.checkOverlap(runs, lost)
	return f
}

// jobIDs returns the keys of byJob as uuids.
func jobIDs(byJob map[ulid.ULID][]limitsRun) [][16]byte {
	ids := make([][16]byte, 0, len(byJob))
	for id := range byJob {
		ids = append(ids, id)
	}
	return ids
}

// checkOverlap checks that the recorded handler runs (start to end, by the machine's clock) of
// jobs whose attempts kept their lease never overlap beyond MaxRunning per queue or
// KeyMaxRunning per key: each lies within its attempt's time as 'running' in the table. It
// returns the most seen at once per queue, as text.
func (c *limitsChaos) checkOverlap(runs []limitsRun, lost map[ulid.ULID]bool) string {
	perQueue, perKey := map[string][][2]time.Time{}, map[[2]string][][2]time.Time{}
	for _, r := range runs {
		if lost[r.id] {
			continue
		}
		perQueue[r.queue] = append(perQueue[r.queue], [2]time.Time{r.started, r.ended})
		if r.key != "" {
			k := [2]string{r.queue, r.key}
			perKey[k] = append(perKey[k], [2]time.Time{r.started, r.ended})
		}
	}
	var figures []string
	for _, lq := range limitsChaosQueues {
		most := maxOverlap(perQueue[lq.name])
		keyMost := 0
		for _, key := range lq.keys {
			keyMost = max(keyMost, maxOverlap(perKey[[2]string{lq.name, key}]))
		}
		figures = append(figures, fmt.Sprintf("%s:%d/key:%d", lq.name, most, keyMost))
		if n := lq.limits.MaxRunning; n > 0 && most > n {
			c.t.Errorf("queue %s: %d handlers ran at once, more than MaxRunning %d", lq.name, most, n)
		}
		if k := lq.limits.KeyMaxRunning; k > 0 && keyMost > k {
			c.t.Errorf("queue %s: %d handlers of one key ran at once, more than KeyMaxRunning %d", lq.name, keyMost, k)
		}
	}
	return strings.Join(figures, ",")
}

// maxOverlap returns the most intervals [start, end] that overlap at one time.
func maxOverlap(intervals [][2]time.Time) int {
	type edge struct {
		at    time.Time
		delta int
	}
	edges := make([]edge, 0, 2*len(intervals))
	for _, iv := range intervals {
		edges = append(edges, edge{iv[0], 1}, edge{iv[1], -1})
	}
	// At equal times an end comes first: intervals that only touch do not overlap.
	slices.SortFunc(edges, func(a, b edge) int {
		if d := a.at.Compare(b.at); d != 0 {
			return d
		}
		return a.delta - b.delta
	})
	most, now := 0, 0
	for _, e := range edges {
		now += e.delta
		most = max(most, now)
	}
	return most
}

// checkRates checks the starts of "rated" that recordStarts kept: as many as its jobs' attempts
// (every start logged), no window of Rate.Per whose starts weigh more than Rate.Starts, and none
// whose starts of one key weigh more than KeyRate.Starts. It returns the busiest windows, as text.
func (c *limitsChaos) checkRates(starts map[string][]loggedStart) string {
	t := c.t
	var lq limitsChaosQueue
	for _, q := range limitsChaosQueues {
		if q.name == "rated" {
			lq = q
		}
	}
	var attempts int
	if err := c.b.pool.QueryRow(t.Context(), `SELECT coalesce(sum(attempt), 0) FROM pgqueue_all_jobs WHERE queue = 'rated'`).
		Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	var all []loggedStart
	keyMost := 0
	for key, s := range starts {
		all = append(all, s...)
		if key == "" {
			continue
		}
		most := busiestWindow(s, lq.limits.KeyRate.Per)
		keyMost = max(keyMost, most)
		if most > lq.limits.KeyRate.Starts {
			t.Errorf("rated key %s: starts weighing %d within %s, more than KeyRate.Starts %d", key, most, lq.limits.KeyRate.Per, lq.limits.KeyRate.Starts)
		}
	}
	if len(all) != attempts {
		t.Errorf("%d starts of rated were logged, for %d attempts", len(all), attempts)
	}
	slices.SortFunc(all, func(x, y loggedStart) int { return x.at.Compare(y.at) })
	most := busiestWindow(all, lq.limits.Rate.Per)
	if most > lq.limits.Rate.Starts {
		t.Errorf("rated: starts weighing %d within %s, more than Rate.Starts %d", most, lq.limits.Rate.Per, lq.limits.Rate.Starts)
	}
	// A window is full once the next job does not fit: within one job's weight of the rate.
	heaviest := slices.Max(lq.weights)
	if most <= lq.limits.Rate.Starts-heaviest || keyMost <= lq.limits.KeyRate.Starts-heaviest {
		t.Errorf("rated: starts weighing at most %d (%d of one key) within a window: the rates were never reached", most, keyMost)
	}
	return fmt.Sprintf("rated-starts=%d busiest-window=%d/%d busiest-key-window=%d/%d",
		len(all), most, lq.limits.Rate.Starts, keyMost, lq.limits.KeyRate.Starts)
}

// keyMaxima returns the per-key maxima as "queue/key:n", sorted.
func keyMaxima(m map[[2]string]int) string {
	var s []string
	for k, n := range m {
		s = append(s, fmt.Sprintf("%s/%s:%d", k[0], k[1], n))
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// describe returns what is known of a job, for a failure message: its runs, the errors its row
// recorded, the events the worker processes printed about it, and the chaos timeline.
func (c *limitsChaos) describe(id ulid.ULID, runs []limitsRun) string {
	var b strings.Builder
	for _, r := range runs {
		fmt.Fprintf(&b, "  run: queue %s key %q process %d attempt %d from %s to %s\n", r.queue, r.key, r.pid,
			r.attempt, r.started.Format(limitsClock), r.ended.Format(limitsClock))
	}
	var errs string
	_ = c.b.pool.QueryRow(context.Background(), "SELECT coalesce(errors::text, '') FROM pgqueue_all_jobs WHERE id = $1",
		[16]byte(id)).Scan(&errs)
	fmt.Fprintf(&b, "  errors: %s\n", errs)
	c.out.mu.Lock()
	for pid, lines := range c.out.lines {
		for _, line := range lines {
			if strings.Contains(line, id.String()) {
				fmt.Fprintf(&b, "  process %d: %s\n", pid, line)
			}
		}
	}
	c.out.mu.Unlock()
	fmt.Fprintf(&b, "  chaos: %s", strings.Join(c.timeline, "; "))
	return b.String()
}
