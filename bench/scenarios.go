package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// queueName is the queue of every scenario but those of several queues.
const queueName = "bench"

// queueSlots is one queue a worker serves and the slots (Concurrency, MaxWorkers) it gives it.
type queueSlots struct {
	name  string
	slots int
}

// oneQueue is a worker of queueName with slots slots.
func oneQueue(slots int) []queueSlots { return []queueSlots{{queueName, slots}} }

// spreadQueues splits slots evenly over n queues (the first slots%n get one more): queueName
// alone for n = 1, else bench-00, bench-01, …. It panics unless 1 ≤ n ≤ slots.
func spreadQueues(n, slots int) []queueSlots {
	if n < 1 || n > slots {
		panic(fmt.Sprintf("spreadQueues(%d, %d): want 1 to %d queues", n, slots, slots))
	}
	if n == 1 {
		return oneQueue(slots)
	}
	qs := make([]queueSlots, n)
	for i, k := range spread(slots, n) {
		qs[i] = queueSlots{fmt.Sprintf("bench-%02d", i), k}
	}
	return qs
}

// spread splits total into n parts that differ by at most one, the larger ones first.
func spread(total, n int) []int {
	parts := make([]int, n)
	for i := range parts {
		parts[i] = total / n
		if i < total%n {
			parts[i]++
		}
	}
	return parts
}

// payload is the job payload of every scenario.
type payload struct {
	// I numbers the job within its run, so that the harness sees which jobs ran and how often.
	I int64 `json:"i"`
	// Since is when latency is measured from (unix ns), in the latency scenarios.
	Since int64 `json:"s,omitempty"`
}

// handler is the no-op job handler of a scenario; the harness only records that it ran.
type handler func(payload)

// system is one contender set up in a fresh schema of its own: one client, jobs in one queue or
// several, and at most one worker at a time, which serves one queue or several.
type system interface {
	// Contender names the contender the system is (contender.name).
	Contender() string
	// Schema is the system's schema; Table its jobs table there; App the application_name of its
	// connections.
	Schema() string
	Table() string
	App() string
	// DoneState is the state a succeeded job is left in, "" when it is deleted.
	DoneState() string

	// EnqueueBatch inserts jobs into queue in one call, by COPY. A positive delay schedules them
	// that far ahead.
	EnqueueBatch(ctx context.Context, queue string, batch []payload, delay time.Duration) error
	// Enqueue inserts one job into queueName. A positive delay schedules it that far ahead.
	Enqueue(ctx context.Context, p payload, delay time.Duration) error
	// EnqueueTo inserts one job into queue, to run now.
	EnqueueTo(ctx context.Context, queue string, p payload) error

	// Pause pauses queue, also before any worker serves it: a worker that starts then claims
	// nothing of it until Resume. Resume resumes it and tells the workers at once (NOTIFY).
	Pause(ctx context.Context, queue string) error
	Resume(ctx context.Context, queue string) error

	// Start starts one worker that serves every queue of queues with its slots, in one client
	// (pgqueue: one Client.Run of a worker per queue; River: one client with every queue in
	// Config.Queues), and runs h for each job.
	Start(ctx context.Context, queues []queueSlots, h handler) error
	// Stop stops the worker gracefully (and does nothing when none runs).
	Stop(ctx context.Context) error

	// Busy reports whether the table still holds a job, of any queue, that is available,
	// running or waiting for a retry. (The table is the run's own: it holds no other jobs.)
	Busy(ctx context.Context) (bool, error)
	// States counts the table's rows by state.
	States(ctx context.Context) (map[string]int64, error)

	// Close stops the worker, closes the client and drops the schema.
	Close(ctx context.Context) error
}

// contender is one job queue, with the settings it runs with.
type contender struct {
	name     string
	settings string
	open     func(ctx context.Context, e *env) (system, error)
	// attach opens a client on a schema open made, in another process of the harness (the
	// drain of scenario 4d's second process): its Close leaves the schema alone.
	attach func(ctx context.Context, e *env, schema string) (system, error)
}

// metric is one number a scenario reports.
type metric struct {
	name         string
	higherBetter bool
}

// result holds one run's metrics by name.
type result map[string]float64

// scenario is one measurement. Runs of a scenario get a fresh system each (or nil, for a
// scenario that measures no contender).
type scenario struct {
	name      string // for -only
	title     func(e *env) string
	metrics   []metric
	noRiver   bool // measures pgqueue only
	noSystems bool // measures no contender (run gets a nil system)
	run       func(ctx context.Context, e *env, sys system) (result, error)
	// steps, if set, replace run: each run of the scenario makes every step in turn, each step
	// on a fresh system of every contender in turn. Their results have metrics of their own.
	steps []step
	// pairSteps has each contender make every step back to back instead, for a scenario whose
	// steps are compared with each other: so that the machine's speed has little time to drift
	// between them. Which step goes first rotates from run to run, so that neither always runs
	// on a machine the other has just warmed (or left a checkpoint to).
	pairSteps bool
	// derived prints lines computed from this and earlier scenarios' results.
	derived func(all *results) []string
	// contenders, if set, are the only contenders that take part (by name).
	contenders []string
	// privateServer runs the scenario on a PostgreSQL server of its own, started for it
	// (openScenarioEnv), instead of the shared one.
	privateServer bool
	// onlyNamed leaves the scenario out of a run without -only, but for a smoke run.
	onlyNamed bool
	// report, if set, prints what the scenario recorded besides its metrics, under its table.
	report func(w io.Writer)
}

// takesPart reports whether contender c takes part in the scenario.
func (sc *scenario) takesPart(c contender) bool {
	if sc.noRiver && c.name != pgqueueContender.name {
		return false
	}
	return sc.contenders == nil || slices.Contains(sc.contenders, c.name)
}

// chosen reports whether a run with options o includes the scenario: named with -only; or, in a
// run without -only, any scenario but those run only when named, which a smoke run includes
// too (at its small scale).
func (sc *scenario) chosen(o options) bool {
	if o.only != nil {
		return o.only[sc.name]
	}
	return !sc.onlyNamed || o.smoke
}

// step is one part of a scenario's run.
type step struct {
	name string // for progress and errors
	run  func(ctx context.Context, e *env, sys system) (result, error)
}

// allSteps returns the scenario's steps: run alone when it has none.
func (sc *scenario) allSteps() []step {
	if sc.steps != nil {
		return sc.steps
	}
	return []step{{"", sc.run}}
}

// Sizes of the scenarios at -scale 1, and the smallest sizes any scale may shrink them to.
const (
	bulkJobs       = 100_000
	bulkBatch      = 1_000
	enqueueFor     = 5 * time.Second
	drainJobs      = 100_000
	drainSlots     = 100
	prefillBatch   = 10_000
	scheduledJobs  = 1_000_000
	wakeFor        = 10 * time.Second
	wakeEvery      = 5 * time.Millisecond // 200 jobs/s
	idleFor        = 5 * time.Second
	dueFor         = 10 * time.Second
	dueEvery       = 50 * time.Millisecond
	dueDelay       = 100 * time.Millisecond
	pollTableEvery = 5 * time.Millisecond
	settleTime     = time.Second // after a worker starts, before latency or idle measurements
	warmupJobs     = 5
	idleQueues     = 100 // queues of the idle scenario with many queues
)

// queueCounts are the numbers of queues the queues scenario spreads the drain over.
var queueCounts = []int{1, 5, 20, 100}

// count scales a job count, to at least minimum.
func (e *env) count(base, minimum int) int {
	return max(minimum, int(math.Round(float64(base)*e.scale)))
}

// duration scales a duration, to at least minimum.
func (e *env) duration(base, minimum time.Duration) time.Duration {
	return max(minimum, time.Duration(float64(base)*e.scale))
}

func (e *env) bulkJobs() int      { return e.count(bulkJobs, bulkBatch) / bulkBatch * bulkBatch }
func (e *env) drainJobs() int     { return e.count(drainJobs, 1000) }
func (e *env) scheduledJobs() int { return e.count(scheduledJobs, prefillBatch) }
func (e *env) wakeJobs() int      { return int(e.duration(wakeFor, 50*wakeEvery) / wakeEvery) }
func (e *env) dueJobs() int       { return int(e.duration(dueFor, 10*dueEvery) / dueEvery) }

// drainMetrics are the metrics of a drain.
var drainMetrics = []metric{{"jobs/s", true}, {busyMetric, true}, {iowaitMetric, false}}

// idleMetrics are the metrics of an idle worker.
var idleMetrics = []metric{{"client CPU %", false}, {"server CPU %", false}}

// busyMetric is the whole machine's CPU use during a drain; iowaitMetric the part of the rest
// the machine spent idle with a disk request outstanding (mostly commits waiting for the WAL to
// reach the disk).
const (
	busyMetric   = "% of the machine busy"
	iowaitMetric = "% of the machine waiting for the disk"
)

// scenarios returns every scenario in the order they run. It stays one function: it is
// the benchmark's table of contents, one entry a scenario, read in the order they run.
func scenarios() []*scenario {
	jobsPerSec := []metric{{"jobs/s", true}}
	return []*scenario{
		{
			name: "bulk",
			title: func(e *env) string {
				return fmt.Sprintf("1. Bulk enqueue: %s jobs in batches of %s (pgqueue EnqueueMany, River InsertManyFast: both COPY)",
					groupInt(e.bulkJobs()), groupInt(bulkBatch))
			},
			metrics: jobsPerSec,
			run:     runBulk,
		},
		{
			name:    "enqueue-1",
			title:   func(e *env) string { return enqueueTitle(e, 1) },
			metrics: enqueueMetrics(),
			run:     func(ctx context.Context, e *env, s system) (result, error) { return runEnqueue(ctx, e, s, 1) },
		},
		{
			name:    "enqueue-16",
			title:   func(e *env) string { return enqueueTitle(e, 16) },
			metrics: enqueueMetrics(),
			run:     func(ctx context.Context, e *env, s system) (result, error) { return runEnqueue(ctx, e, s, 16) },
		},
		{
			name: "drain",
			title: func(e *env) string {
				return fmt.Sprintf("3. Drain: %s pre-inserted no-op jobs, one worker with %d slots; from worker start until the table shows none available or running (polled every %s once every job has started)",
					groupInt(e.drainJobs()), drainSlots, pollTableEvery)
			},
			metrics: drainMetrics,
			run: func(ctx context.Context, e *env, s system) (result, error) {
				return runDrain(ctx, e, s, oneQueue(drainSlots), 0)
			},
			derived: drainBusyTarget,
		},
		{
			name: "queues",
			title: func(e *env) string {
				return fmt.Sprintf("3b. Queues: %s pre-inserted no-op jobs spread evenly over %s queues, one process, %d slots split evenly (%s per queue); pgqueue one Client.Run of a worker per queue, River one client with every queue in Queues; timed as 3",
					groupInt(e.drainJobs()), joinInts(queueCounts, ", ", " and "), drainSlots, joinInts(slotsPerQueue(), ", ", ", "))
			},
			metrics: queuesMetrics(),
			steps:   queuesSteps(),
			derived: queuesRatios,
		},
		{
			name: "wake",
			title: func(e *env) string {
				return fmt.Sprintf("4. Wake-up latency: idle worker, %d jobs enqueued one at a time every %s; from the enqueue call (so including the insert) to handler start",
					e.wakeJobs(), wakeEvery)
			},
			metrics: []metric{{"p50 ms", false}, {"p95 ms", false}, {"p99 ms", false}},
			run:     runWake,
		},
		{
			name: "idle",
			title: func(e *env) string {
				d := e.duration(idleFor, time.Second)
				return fmt.Sprintf("4b. Idle CPU: one worker (%d slots) with nothing to do, over %s; %% of one core, this process (getrusage) and the server backends of its pool (/proc, resolution %.2g %%)",
					drainSlots, d, 100*(time.Second/clockTicks).Seconds()/d.Seconds())
			},
			metrics: idleMetrics,
			run: func(ctx context.Context, e *env, s system) (result, error) {
				return runIdle(ctx, e, s, oneQueue(drainSlots))
			},
		},
		{
			name: "idle-queues",
			title: func(e *env) string {
				d := e.duration(idleFor, time.Second)
				return fmt.Sprintf("4c. Idle CPU with %[1]d queues: as 4b, but the worker serves %[1]d queues with %[2]d slots split evenly (pgqueue %[1]d workers in one Client.Run, River %[1]d queues in one client), over %[3]s; %% of one core, this process and the server backends of its pool",
					idleQueues, drainSlots, d)
			},
			metrics: idleMetrics,
			run: func(ctx context.Context, e *env, s system) (result, error) {
				return runIdle(ctx, e, s, spreadQueues(idleQueues, drainSlots))
			},
		},
		besideScenario(),
		{
			name: "due",
			title: func(e *env) string {
				return fmt.Sprintf("5. Due-time latency: %d jobs delayed by %s, one enqueued every %s; handler start − (enqueue call start + delay)",
					e.dueJobs(), dueDelay, dueEvery)
			},
			metrics: []metric{{"p50 ms", false}, {"p99 ms", false}},
			run:     runDue,
		},
		{
			name: "drain-scheduled",
			title: func(e *env) string {
				return fmt.Sprintf("6. Drain beside scheduled jobs: as 3, with %s jobs scheduled for tomorrow in the same queue, against the plain drain of 3, each contender making both back to back in every run",
					groupInt(e.scheduledJobs()))
			},
			metrics:   scheduledMetrics(),
			steps:     scheduledSteps(),
			pairSteps: true,
			derived:   drainScheduledRatios,
		},
		drainLimitedScenario(),
		drainKeysScenario(),
		keyFairnessScenario(),
		{
			name:      "limit",
			title:     limitTitle,
			metrics:   limitMetrics,
			noSystems: true,
			run:       func(ctx context.Context, e *env, _ system) (result, error) { return runLimit(ctx, e) },
			derived:   limitFraction,
		},
		horizonScenario(),
	}
}

func enqueueTitle(e *env, goroutines int) string {
	return fmt.Sprintf("2. Single enqueues from %d goroutine(s) for %s (pgqueue Enqueue, River Insert); latency per call",
		goroutines, e.duration(enqueueFor, 100*time.Millisecond))
}

func enqueueMetrics() []metric {
	return []metric{{"jobs/s", true}, {"p50 ms", false}, {"p99 ms", false}}
}

// runBulk enqueues bulkJobs in batches of bulkBatch.
func runBulk(ctx context.Context, e *env, s system) (result, error) {
	n := e.bulkJobs()
	batch := make([]payload, bulkBatch)
	start := time.Now()
	for i := 0; i < n; i += bulkBatch {
		for j := range batch {
			batch[j] = payload{I: int64(i + j)}
		}
		if err := s.EnqueueBatch(ctx, queueName, batch, 0); err != nil {
			return nil, err
		}
	}
	elapsed := time.Since(start)
	if err := expectStates(ctx, s, map[string]int64{"available": int64(n)}); err != nil {
		return nil, err
	}
	return result{"jobs/s": float64(n) / elapsed.Seconds()}, nil
}

// runEnqueue enqueues single jobs from goroutines goroutines for the scenario's duration.
func runEnqueue(ctx context.Context, e *env, s system, goroutines int) (result, error) {
	d := e.duration(enqueueFor, 100*time.Millisecond)
	var next atomic.Int64
	lat := make([][]time.Duration, goroutines)
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(d)
	for g := range goroutines {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if err := s.Enqueue(ctx, payload{I: next.Add(1)}, 0); err != nil {
					errs[g] = err
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	all := slices.Concat(lat...)
	if err := expectStates(ctx, s, map[string]int64{"available": int64(len(all))}); err != nil {
		return nil, err
	}
	r := result{"jobs/s": float64(len(all)) / elapsed.Seconds()}
	maps.Copy(r, latencyMetrics("", all, 0.50, 0.99))
	return r, nil
}

// runDrain pre-inserts scheduled jobs due tomorrow (in the first queue) and drainJobs runnable
// ones, spread evenly over the queues, then measures how fast one worker serving the queues
// works the runnable ones off, and how busy the whole machine is meanwhile.
func runDrain(ctx context.Context, e *env, s system, queues []queueSlots, scheduled int) (result, error) {
	n := e.drainJobs()
	// Jobs scheduled for tomorrow are numbered from n on: the tracker fails the run if one runs.
	if err := prefill(ctx, s, queues[0].name, n, scheduled, 24*time.Hour); err != nil {
		return nil, err
	}
	first := 0
	for i, k := range spread(n, len(queues)) {
		if err := prefill(ctx, s, queues[i].name, first, k, 0); err != nil {
			return nil, err
		}
		first += k
	}
	return timeDrain(ctx, e, s, queues, n, scheduled)
}

// timeDrain measures how fast one worker serving queues works off the n runnable jobs already
// in the table, numbered 0 to n-1, beside the given number of jobs due tomorrow, and how busy
// the whole machine is meanwhile. It runs VACUUM ANALYZE first, as autovacuum would after the
// bulk load.
func timeDrain(ctx context.Context, e *env, s system, queues []queueSlots, n, scheduled int) (result, error) {
	if err := e.vacuumAnalyze(ctx, s.Schema(), s.Table()); err != nil {
		return nil, err
	}

	t := newTracker(n)
	busy := machineBusy()
	start := time.Now()
	if err := s.Start(ctx, queues, t.handle); err != nil {
		return nil, err
	}
	// A contender that manages 200 jobs/s still finishes in time. The table is polled only once
	// every job has started: a poll every pollTableEvery throughout would spend server time the
	// contenders compete for (on a draining table it walks the dead index entries at the head of
	// the line: ~0.5 ms each, a tenth of a core), and the drain is done only when the last
	// outcomes are settled, a moment after the last start.
	timeout := time.Minute + time.Duration(n)*5*time.Millisecond
	if err := t.wait(ctx, n, timeout); err != nil {
		return nil, errors.Join(err, s.Stop(ctx))
	}
	elapsed, err := waitIdle(ctx, s, start, timeout)
	if err != nil {
		return nil, errors.Join(err, s.Stop(ctx))
	}
	busyPercent, iowaitPercent := busy()
	if err := s.Stop(ctx); err != nil {
		return nil, err
	}
	if err := t.check(n); err != nil {
		return nil, err
	}
	want := map[string]int64{}
	if scheduled > 0 {
		want["scheduled"] = int64(scheduled)
	}
	if d := s.DoneState(); d != "" {
		want[d] = int64(n)
	}
	if err := expectStates(ctx, s, want); err != nil {
		return nil, err
	}
	return result{"jobs/s": float64(n) / elapsed.Seconds(), busyMetric: busyPercent, iowaitMetric: iowaitPercent}, nil
}

// prefill enqueues n jobs numbered from first into queue, in COPY batches of prefillBatch,
// delayed by delay.
func prefill(ctx context.Context, s system, queue string, first, n int, delay time.Duration) error {
	return prefillWith(first, n, func(batch []payload) error { return s.EnqueueBatch(ctx, queue, batch, delay) })
}

// prefillWith passes jobs numbered first to first+n-1 to enqueue in batches of prefillBatch.
func prefillWith(first, n int, enqueue func(batch []payload) error) error {
	batch := make([]payload, 0, prefillBatch)
	for i := 0; i < n; i += prefillBatch {
		batch = batch[:0]
		for j := i; j < min(n, i+prefillBatch); j++ {
			batch = append(batch, payload{I: int64(first + j)})
		}
		if err := enqueue(batch); err != nil {
			return fmt.Errorf("pre-insert: %w", err)
		}
	}
	return nil
}

// waitIdle polls the table every pollTableEvery until it shows no job available, running or
// retrying, and returns the time since start.
func waitIdle(ctx context.Context, s system, start time.Time, timeout time.Duration) (time.Duration, error) {
	t := time.NewTicker(pollTableEvery)
	defer t.Stop()
	for {
		busy, err := s.Busy(ctx)
		if err != nil {
			return 0, err
		}
		if !busy {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return 0, fmt.Errorf("jobs still not done after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-t.C:
		}
	}
}

// runWake measures the latency from an enqueue call to the start of its handler, on an idle
// worker, at wakeEvery between enqueues.
func runWake(ctx context.Context, e *env, s system) (result, error) {
	n := e.wakeJobs()
	t := newTracker(warmupJobs + n)
	if err := startAndWarm(ctx, s, t); err != nil {
		return nil, err
	}
	tick := time.NewTicker(wakeEvery)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		now := time.Now()
		if err := s.Enqueue(ctx, payload{I: int64(warmupJobs + i), Since: now.UnixNano()}, 0); err != nil {
			return nil, errors.Join(err, s.Stop(ctx))
		}
	}
	return finishLatency(ctx, s, t, n, 30*time.Second, 0.50, 0.95, 0.99)
}

// runDue measures how late delayed jobs start after they fall due.
func runDue(ctx context.Context, e *env, s system) (result, error) {
	n := e.dueJobs()
	t := newTracker(warmupJobs + n)
	if err := startAndWarm(ctx, s, t); err != nil {
		return nil, err
	}
	tick := time.NewTicker(dueEvery)
	defer tick.Stop()
	for i := range n {
		<-tick.C
		due := time.Now().Add(dueDelay)
		if err := s.Enqueue(ctx, payload{I: int64(warmupJobs + i), Since: due.UnixNano()}, dueDelay); err != nil {
			return nil, errors.Join(err, s.Stop(ctx))
		}
	}
	return finishLatency(ctx, s, t, n, dueDelay+time.Minute, 0.50, 0.99)
}

// startAndWarm starts a worker, lets it settle, and runs warmupJobs jobs through it (so that
// connections and prepared statements are ready) before a latency measurement.
func startAndWarm(ctx context.Context, s system, t *tracker) error {
	if err := s.Start(ctx, oneQueue(drainSlots), t.handle); err != nil {
		return err
	}
	time.Sleep(settleTime)
	for i := range warmupJobs {
		if err := s.Enqueue(ctx, payload{I: int64(i), Since: time.Now().UnixNano()}, 0); err != nil {
			return errors.Join(err, s.Stop(ctx))
		}
	}
	if err := t.wait(ctx, warmupJobs, 30*time.Second); err != nil {
		return errors.Join(fmt.Errorf("warm-up: %w", err), s.Stop(ctx))
	}
	return nil
}

// finishLatency waits for the n measured jobs of a latency scenario, stops the worker, checks
// that every job ran once and was settled, and returns the latency percentiles.
func finishLatency(ctx context.Context, s system, t *tracker, n int, timeout time.Duration, ps ...float64) (result, error) {
	if err := t.wait(ctx, n, timeout); err != nil {
		return nil, errors.Join(err, s.Stop(ctx))
	}
	if _, err := waitIdle(ctx, s, time.Now(), timeout); err != nil {
		return nil, errors.Join(err, s.Stop(ctx))
	}
	if err := s.Stop(ctx); err != nil {
		return nil, err
	}
	if err := t.check(warmupJobs + n); err != nil {
		return nil, err
	}
	want := map[string]int64{}
	if d := s.DoneState(); d != "" {
		want[d] = int64(warmupJobs + n)
	}
	if err := expectStates(ctx, s, want); err != nil {
		return nil, err
	}
	return result(latencyMetrics("", t.latencies()[warmupJobs:], ps...)), nil
}

// runIdle measures the CPU an idle worker serving queues costs, in this process and in the
// server.
func runIdle(ctx context.Context, e *env, s system, queues []queueSlots) (result, error) {
	t := newTracker(0)
	if err := s.Start(ctx, queues, t.handle); err != nil {
		return nil, err
	}
	time.Sleep(settleTime)
	backends0, err := e.backendTimes(ctx, s.App())
	if err != nil {
		return nil, errors.Join(err, s.Stop(ctx))
	}
	cpu0, start := processCPU(), time.Now()
	time.Sleep(e.duration(idleFor, time.Second))
	cpu1, elapsed := processCPU(), time.Since(start)
	backends1, err := e.backendTimes(ctx, s.App())
	if err != nil {
		return nil, errors.Join(err, s.Stop(ctx))
	}
	if err := s.Stop(ctx); err != nil {
		return nil, err
	}
	if err := t.check(0); err != nil {
		return nil, err
	}
	server := math.NaN() // the server is not on this host
	if len(backends1) > 0 {
		var used time.Duration
		for pid, t1 := range backends1 {
			used += t1 - backends0[pid]
		}
		server = 100 * used.Seconds() / elapsed.Seconds()
	}
	return result{
		"client CPU %": 100 * (cpu1 - cpu0).Seconds() / elapsed.Seconds(),
		"server CPU %": server,
	}, nil
}

// expectStates checks the table's row count by state against want (states not in want must
// have no rows), which catches lost, duplicated and stuck jobs.
func expectStates(ctx context.Context, s system, want map[string]int64) error {
	got, err := s.States(ctx)
	if err != nil {
		return err
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("table %s.%s holds %v jobs by state, want %v", s.Schema(), s.Table(), got, want)
	}
	return nil
}

// countStates counts the rows of schema.table by the column col.
func countStates(ctx context.Context, e *env, schema, table, col string) (map[string]int64, error) {
	rows, err := e.admin.Query(ctx, fmt.Sprintf("SELECT %[1]s::text, count(*) FROM %[2]s.%[3]s GROUP BY %[1]s",
		col, schema, table))
	if err != nil {
		return nil, fmt.Errorf("count %s.%s by %s: %w", schema, table, col, err)
	}
	defer rows.Close()
	got := make(map[string]int64)
	for rows.Next() {
		var state string
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("count %s.%s by %s: %w", schema, table, col, err)
		}
		got[state] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count %s.%s by %s: %w", schema, table, col, err)
	}
	return got, nil
}

// tracker records which jobs of a run the handler ran, how often, and when each first started.
type tracker struct {
	runs       []atomic.Int32
	latency    []atomic.Int64 // ns from payload.Since to the first start
	outOfRange atomic.Int64   // jobs with a number beyond the run's
	firsts     chan struct{}  // one value per job started for the first time
}

func newTracker(n int) *tracker {
	return &tracker{
		runs:    make([]atomic.Int32, n),
		latency: make([]atomic.Int64, n),
		firsts:  make(chan struct{}, n),
	}
}

// handle is the handler of every scenario.
func (t *tracker) handle(p payload) {
	started := time.Now()
	if p.I < 0 || p.I >= int64(len(t.runs)) {
		t.outOfRange.Add(1)
		return
	}
	if t.runs[p.I].Add(1) == 1 {
		if p.Since != 0 {
			t.latency[p.I].Store(started.UnixNano() - p.Since)
		}
		t.firsts <- struct{}{}
	}
}

// wait waits until n more jobs have started for the first time.
func (t *tracker) wait(ctx context.Context, n int, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i := range n {
		select {
		case <-t.firsts:
		case <-deadline.C:
			return fmt.Errorf("only %d of %d jobs started within %s", i, n, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// check fails unless jobs 0..n-1 each ran exactly once and no other job ran.
func (t *tracker) check(n int) error {
	var missing, dups int
	for i := range t.runs[:n] {
		switch c := t.runs[i].Load(); {
		case c == 0:
			missing++
		case c > 1:
			dups++
		}
	}
	if o := t.outOfRange.Load(); missing+dups > 0 || o > 0 {
		return fmt.Errorf("of %d jobs, %d never ran and %d ran more than once; %d jobs that should not have run ran",
			n, missing, dups, o)
	}
	return nil
}

// latencies returns the recorded latency of every job, by number.
func (t *tracker) latencies() []time.Duration {
	lat := make([]time.Duration, len(t.latency))
	for i := range t.latency {
		lat[i] = time.Duration(t.latency[i].Load())
	}
	return lat
}

// Scenario 6's two drains, each run: the plain drain of scenario 3, then the same beside the
// scheduled jobs, back to back for each contender (pairSteps), so that the ratio does not take
// in how the machine's speed drifted between scenarios 3 and 6.
const (
	plainDrain      = "plain"
	besideScheduled = "beside scheduled"
)

// scheduledMetric names a metric of one of scenario 6's drains.
func scheduledMetric(drain, m string) string { return drain + ": " + m }

// scheduledMetrics are scenario 6's metrics: each drain metric without and with the scheduled
// jobs.
func scheduledMetrics() []metric {
	var ms []metric
	for _, m := range drainMetrics {
		for _, d := range []string{plainDrain, besideScheduled} {
			ms = append(ms, metric{scheduledMetric(d, m.name), m.higherBetter})
		}
	}
	return ms
}

// scheduledSteps are scenario 6's drains: the plain one first.
func scheduledSteps() []step {
	drain := func(name string, scheduled func(e *env) int) step {
		return step{
			name: name,
			run: func(ctx context.Context, e *env, s system) (result, error) {
				res, err := runDrain(ctx, e, s, oneQueue(drainSlots), scheduled(e))
				return renamed(res, func(m string) string { return scheduledMetric(name, m) }), err
			},
		}
	}
	return []step{
		drain(plainDrain, func(*env) int { return 0 }),
		drain(besideScheduled, (*env).scheduledJobs),
	}
}

// targetScheduledDrain is the target for the drain beside scheduled jobs, as a fraction
// of the plain drain.
const targetScheduledDrain = 0.95

// drainScheduledRatios prints, per contender, scenario 6's drain beside the scheduled jobs as a
// fraction of its plain drain.
func drainScheduledRatios(all *results) []string {
	var lines []string
	for _, c := range all.contenders {
		with, ok1 := all.median("drain-scheduled", c, scheduledMetric(besideScheduled, "jobs/s"))
		without, ok2 := all.median("drain-scheduled", c, scheduledMetric(plainDrain, "jobs/s"))
		if ok1 && ok2 && without > 0 {
			line := fmt.Sprintf("%s: drain beside scheduled jobs ÷ plain drain = %s", c, formatRatio(with/without))
			if c == pgqueueContender.name {
				line += fmt.Sprintf(" (the issue's target: ≥ %g×)", targetScheduledDrain)
			}
			lines = append(lines, line)
		}
	}
	return lines
}

// queuesLabel names a number of queues: "1 queue", "5 queues".
func queuesLabel(n int) string {
	if n == 1 {
		return "1 queue"
	}
	return fmt.Sprintf("%d queues", n)
}

// queuesMetric names a metric of the queues scenario at n queues.
func queuesMetric(n int, m string) string { return queuesLabel(n) + ": " + m }

// queuesMetrics are the queues scenario's metrics: jobs/s at each count, then the machine's
// busy share at each count, then its share waiting for the disk.
func queuesMetrics() []metric {
	var ms []metric
	for _, m := range drainMetrics {
		for _, n := range queueCounts {
			ms = append(ms, metric{queuesMetric(n, m.name), m.higherBetter})
		}
	}
	return ms
}

// queuesSteps are the queues scenario's drains, one per count of queues, each with its metrics
// renamed for the count.
func queuesSteps() []step {
	var steps []step
	for _, n := range queueCounts {
		steps = append(steps, step{
			name: queuesLabel(n),
			run: func(ctx context.Context, e *env, s system) (result, error) {
				res, err := runDrain(ctx, e, s, spreadQueues(n, drainSlots), 0)
				return renamed(res, func(m string) string { return queuesMetric(n, m) }), err
			},
		})
	}
	return steps
}

// slotsPerQueue returns the slots each queue gets at each count of the queues scenario.
func slotsPerQueue() []int {
	var slots []int
	for _, n := range queueCounts {
		slots = append(slots, spreadQueues(n, drainSlots)[n-1].slots)
	}
	return slots
}

// The targets for many queues: at targetQueues queues, pgqueue keeps targetOwnFraction
// of its 1-queue rate and is targetOverRiverFast times as fast as river-fast.
const (
	targetQueues        = 20
	targetOwnFraction   = 0.80
	targetOverRiverFast = 3.0
)

// queuesRatios prints, per contender, each count's rate as a fraction of the contender's own
// 1-queue rate, and pgqueue's rate divided by river-fast's at each count.
func queuesRatios(all *results) []string {
	jobs := func(c string, n int) (float64, bool) {
		return all.median("queues", c, queuesMetric(n, "jobs/s"))
	}
	var lines []string
	for _, c := range all.contenders {
		one, ok := jobs(c, 1)
		if !ok || one <= 0 {
			continue
		}
		var parts []string
		for _, n := range queueCounts[1:] {
			if v, ok := jobs(c, n); ok {
				parts = append(parts, fmt.Sprintf("%s %.0f%%", queuesLabel(n), 100*v/one))
			}
		}
		line := fmt.Sprintf("%s: rate as a fraction of its own 1-queue rate: %s", c, strings.Join(parts, ", "))
		if c == pgqueueContender.name {
			line += fmt.Sprintf(" (the issue's target: ≥ %.0f%% at %d queues)", 100*targetOwnFraction, targetQueues)
		}
		lines = append(lines, line)
	}
	var parts []string
	for _, n := range queueCounts {
		pq, ok1 := jobs(pgqueueContender.name, n)
		rf, ok2 := jobs(riverFast.name, n)
		if ok1 && ok2 && rf > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", queuesLabel(n), formatRatio(pq/rf)))
		}
	}
	if len(parts) > 0 {
		lines = append(lines, fmt.Sprintf("pgqueue ÷ %s: %s (the issue's target: ≥ %g× at %d queues)",
			riverFast.name, strings.Join(parts, ", "), targetOverRiverFast, targetQueues))
	}
	return lines
}

// targetDrainBusy is the target for pgqueue's use of the machine during the drain
// (scenario 3), in percent.
const targetDrainBusy = 90.0

// drainBusyTarget prints pgqueue's use of the machine during the drain against the issue's
// target.
func drainBusyTarget(all *results) []string {
	busy, ok := all.median("drain", pgqueueContender.name, busyMetric)
	if !ok {
		return nil
	}
	line := fmt.Sprintf("pgqueue kept %s%% of the machine busy during the drain, all processes counted (the issue's target: ≥ %g%%)",
		formatValue(busy), targetDrainBusy)
	if iowait, ok := all.median("drain", pgqueueContender.name, iowaitMetric); ok {
		line += fmt.Sprintf("; the machine waited for the disk %s%% of the time", formatValue(iowait))
	}
	return []string{line}
}

// joinInts joins numbers with sep, and the last two with last.
func joinInts(ns []int, sep, last string) string {
	var b strings.Builder
	for i, n := range ns {
		switch {
		case i == 0:
		case i == len(ns)-1:
			b.WriteString(last)
		default:
			b.WriteString(sep)
		}
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// groupInt formats an integer with thousands separators.
func groupInt(n int) string { return groupThousands(fmt.Sprint(n)) }
