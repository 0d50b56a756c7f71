package main

// Scenario 8, horizon: how a queue degrades while a transaction left open holds back the MVCC
// horizon. Vacuum can then remove no row version that any snapshot might still see, so the
// claim's index range fills with dead entries that every claim steps over, until the
// transaction ends and vacuum catches up. A steady flow of single enqueues at horizonRate jobs/s
// runs through one worker, on a private server at Postgres's defaults (autovacuum on: the shared
// server runs with it off), plain, and held: with a REPEATABLE READ transaction that has taken a
// snapshot and an xid open on another connection for the whole flow, then committed, the flow
// going on for a recovery period measured apart. River's default setting is left out: its
// FetchCooldown caps it at about 1,000 jobs/s, the flow's own rate.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sizes of scenario 8 at -scale 1. The floors of the -scale'd ones are in the env methods below.
const (
	horizonRate        = 1000 // jobs/s, not scaled
	horizonEvery       = time.Second / horizonRate
	horizonFor         = 5 * time.Minute  // the plain flow, and the held step's hold
	horizonRecovery    = time.Minute      // the held step's flow after the commit
	horizonWindow      = 10 * time.Second // the time series' windows
	horizonTail        = 30 * time.Second // the end of the recovery, measured apart
	horizonEnqueuers   = 8                // goroutines that make the flow's enqueue calls
	horizonSampleEvery = time.Second      // how often the server is read during a step
	horizonProgress    = time.Minute      // how often a step reports progress
	recoveredFactor    = 1.5              // a recovered window's p99 is within this of the plain step's
	topStatements      = 5
	// horizonStatsWait is the wait, once the worker has stopped, before the jobs table's
	// statistics are read: a backend that goes idle within a second of its last flush of
	// statistics flushes the rest only 10 s later (PGSTAT_IDLE_INTERVAL).
	horizonStatsWait = 11 * time.Second
)

func (e *env) horizonFor() time.Duration      { return e.duration(horizonFor, 2*time.Second) }
func (e *env) horizonRecovery() time.Duration { return e.duration(horizonRecovery, 2*time.Second) }
func (e *env) horizonWindow() time.Duration   { return e.duration(horizonWindow, time.Second) }
func (e *env) horizonTail() time.Duration {
	return min(e.horizonRecovery(), e.duration(horizonTail, time.Second))
}
func (e *env) horizonStatsWait() time.Duration {
	return e.duration(horizonStatsWait, 500*time.Millisecond)
}

// The steps of scenario 8, and the stretches of their flows that metrics are named after.
const (
	plainStep = "plain"
	heldStep  = "held"
	segPlain  = plainStep                   // the plain step's whole flow
	segHeld   = heldStep                    // the held step's whole flow: hold and recovery
	segHold   = "held, during the hold"     // from the flow's start to the commit
	segTail   = "held, end of the recovery" // the recovery's last horizonTail
)

// Names of scenario 8's other metrics, of the time series' phases, and of the scenario.
const (
	recoveredAt = "held: recovered after s" // see recoveredAfter
	enqueuedPS  = "enqueued jobs/s"
	startedPS   = "started jobs/s"
	phasePlain  = plainStep
	phaseHold   = "hold"
	phaseRecov  = "recovery"
	horizonName = "horizon"
	// horizonApp is the application_name of the held transaction's connection.
	horizonApp = "pgqbench_horizon_hold"
)

// horizonMetrics are scenario 8's metrics: the waits' p50, then p99, over each stretch; the
// rates of each step, and how busy the machine was during its flow (lower is better: the same
// flow on less CPU); and when the held step recovered.
func horizonMetrics() []metric {
	var ms []metric
	for _, m := range []string{"p50 ms", "p99 ms"} {
		for _, seg := range []string{segPlain, segHeld, segHold, segTail} {
			ms = append(ms, metric{seg + ": " + m, false})
		}
	}
	for _, m := range []string{enqueuedPS, startedPS, busyMetric} {
		for _, seg := range []string{segPlain, segHeld} {
			ms = append(ms, metric{seg + ": " + m, m != busyMetric})
		}
	}
	return append(ms, metric{recoveredAt, false})
}

func horizonScenario() *scenario {
	rep := &horizonReport{}
	run := func(held bool) func(ctx context.Context, e *env, s system) (result, error) {
		return func(ctx context.Context, e *env, s system) (result, error) { return runHorizon(ctx, e, s, rep, held) }
	}
	return &scenario{
		name: horizonName,
		title: func(e *env) string {
			return fmt.Sprintf("8. Horizon: a steady flow of %s jobs/s enqueued one at a time (pgqueue Enqueue, River Insert; from %d goroutines paced by a %s ticker) to one worker with %d slots, for %s, on a private server at Postgres's defaults (autovacuum on); plain, and held: a REPEATABLE READ transaction with a snapshot and an xid (txid_current()) open on another connection for those %s, then committed, the flow going on for %s of recovery. Wait from the enqueue call (so including the insert, as in 4) to handler start: p50 and p99 over each step's flow, during the hold, and over the recovery's last %s; river-default left out (its FetchCooldown caps it at ~1,000 jobs/s, the flow's rate)",
				groupInt(horizonRate), horizonEnqueuers, horizonEvery, drainSlots, e.horizonFor(), e.horizonFor(), e.horizonRecovery(), e.horizonTail())
		},
		metrics:       horizonMetrics(),
		steps:         []step{{plainStep, run(false)}, {heldStep, run(true)}},
		contenders:    []string{pgqueueContender.name, riverFast.name},
		privateServer: true,
		onlyNamed:     true,
		report:        rep.print,
	}
}

// runHorizon runs one step of scenario 8 on s: a worker of drainSlots slots, warmed up as in
// scenario 4, then the flow (held: beside the open transaction, and on after its commit) while
// the server is read every horizonSampleEvery; then it checks that every job ran once, reads
// the jobs table's statistics and sizes and the statements' times, and records the step.
func runHorizon(ctx context.Context, e *env, s system, rep *horizonReport, held bool) (result, error) {
	if err := rep.prepare(ctx, e); err != nil {
		return nil, err
	}
	d, total := e.horizonFor(), e.horizonFor()
	if held {
		total += e.horizonRecovery()
	}
	maxJobs := dueCount(total, horizonEvery, total, 1<<62)
	t := newTracker(warmupJobs + maxJobs)
	if err := startAndWarm(ctx, s, t); err != nil {
		return nil, err
	}
	label := fmt.Sprintf("%s (%s) %s", horizonName, stepName(held), s.Contender())
	sampler := startSampler(ctx, e, s, e.duration(horizonProgress, 5*time.Second), label)
	f, err := runHorizonFlow(ctx, e, s, held, d, total, maxJobs)
	if err == nil {
		_, err = finishLatency(ctx, s, t, len(f.since), time.Minute+total)
	}
	samples, sampleErr := sampler.finish()
	if err = errors.Join(err, sampleErr); err != nil {
		return nil, errors.Join(err, s.Stop(ctx))
	}
	time.Sleep(e.horizonStatsWait())
	rec := newHorizonRecord(s.Contender(), held, f, t.latencies()[warmupJobs:], samples, e.horizonWindow())
	if err := rec.readServer(ctx, e, s); err != nil {
		return nil, err
	}
	return rep.add(rec, e.horizonTail()), nil
}

// stepName names scenario 8's step.
func stepName(held bool) string {
	if held {
		return heldStep
	}
	return plainStep
}

// horizonFlow is what a step's flow did: when it began and ended (its last enqueue returned),
// when the held transaction committed (zero in the plain step), and when each job's enqueue
// call began (unix ns, by job number within the flow); and how busy the whole machine was
// meanwhile (machine.go), with the load average at its end, which show other work on the
// machine as well as the flow's own.
type horizonFlow struct {
	start, end, commit time.Time
	since              []int64
	busy, iowait       float64
	load               string
}

// runHorizonFlow runs the flow for total, the jobs numbered from warmupJobs on; held, it opens
// the held transaction first and commits it d after the flow's start.
func runHorizonFlow(ctx context.Context, e *env, s system, held bool, d, total time.Duration, maxJobs int) (*horizonFlow, error) {
	var hold *horizonHold
	if held {
		var err error
		if hold, err = openHold(ctx, e.dsn); err != nil {
			return nil, err
		}
		defer hold.close()
	}
	machine := machineBusy()
	f := &horizonFlow{since: make([]int64, maxJobs), start: time.Now()}
	var commitErr error
	var wg sync.WaitGroup
	if held {
		wg.Go(func() {
			timer := time.NewTimer(d - time.Since(f.start))
			defer timer.Stop()
			select {
			case <-timer.C:
			case <-ctx.Done():
			}
			f.commit, commitErr = hold.commit(ctx)
		})
	}
	n, err := paceEnqueues(ctx, s, f.start, total, f.since)
	f.end = time.Now()
	f.busy, f.iowait = machine()
	f.load = loadAverage()
	wg.Wait()
	f.since = f.since[:n]
	if err = errors.Join(err, commitErr); err != nil {
		return nil, err
	}
	return f, nil
}

// paceEnqueues enqueues jobs numbered warmupJobs+i, one every horizonEvery from start for d
// (the first at once), from horizonEnqueuers goroutines fed by pace. It records each enqueue
// call's start in since[i] and returns how many it enqueued. The first error stops them all.
func paceEnqueues(ctx context.Context, s system, start time.Time, d time.Duration, since []int64) (int, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan int, horizonRate) // a second's jobs: enqueuers late by more hold pace up
	var wg sync.WaitGroup
	for range horizonEnqueuers {
		wg.Go(func() {
			for i := range jobs {
				since[i] = time.Now().UnixNano()
				if err := s.Enqueue(ctx, payload{I: int64(warmupJobs + i), Since: since[i]}, 0); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	n := pace(ctx, start, horizonEvery, d, len(since), jobs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return 0, err
	}
	return n, nil
}

// pace sends 0, 1, … to out, one per every from start until d has passed (limit at most), then
// closes out and returns how many it sent. At each tick of a ticker of period every it sends
// every number due by then (dueCount), so that ticks the ticker drops, or that pace spends
// waiting for a full out, are made up at the next.
func pace(ctx context.Context, start time.Time, every, d time.Duration, limit int, out chan<- int) int {
	defer close(out)
	tick := time.NewTicker(every)
	defer tick.Stop()
	n := 0
	for {
		for due := dueCount(time.Since(start), every, d, limit); n < due; n++ {
			select {
			case out <- n:
			case <-ctx.Done():
				return n
			}
		}
		if time.Since(start) >= d || n >= limit {
			return n
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return n
		}
	}
}

// dueCount returns how many jobs of a flow of one job every every, the first at its start, are
// due elapsed after its start, counting none after d and never more than limit.
func dueCount(elapsed, every, d time.Duration, limit int) int {
	if elapsed < 0 {
		return 0
	}
	return min(limit, int(min(elapsed, d)/every)+1)
}

// horizonHold is the held step's transaction, on a connection of its own: REPEATABLE READ, with
// a snapshot (its backend_xmin) and an xid, which hold back the horizon of every table.
type horizonHold struct {
	conn *pgx.Conn
}

// openHold connects and opens the held transaction.
func openHold(ctx context.Context, dsn string) (*horizonHold, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("held transaction: parse dsn: %w", err)
	}
	cfg.RuntimeParams["application_name"] = horizonApp
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("held transaction: connect: %w", err)
	}
	h := &horizonHold{conn: conn}
	var xid int64
	if _, err := conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return nil, errors.Join(fmt.Errorf("held transaction: begin: %w", err), h.close())
	}
	if err := conn.QueryRow(ctx, "SELECT txid_current()").Scan(&xid); err != nil {
		return nil, errors.Join(fmt.Errorf("held transaction: take an xid: %w", err), h.close())
	}
	return h, nil
}

// commit commits the held transaction and returns when the commit returned.
func (h *horizonHold) commit(ctx context.Context) (time.Time, error) {
	if _, err := h.conn.Exec(ctx, "COMMIT"); err != nil {
		return time.Time{}, fmt.Errorf("held transaction: commit: %w", err)
	}
	return time.Now(), nil
}

// close closes the connection, which ends the transaction if it is still open.
func (h *horizonHold) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return h.conn.Close(ctx)
}

// horizonSample is one reading of the server during a step.
type horizonSample struct {
	at         time.Time
	xminAge    int64 // age of the oldest backend_xmin of any backend, in transactions
	dead       int64 // n_dead_tup of the jobs table
	indexBytes int64 // its indexes' size, together
}

// horizonSampler reads the server every horizonSampleEvery in a goroutine of its own, and
// reports progress every so often.
type horizonSampler struct {
	stop    chan struct{}
	done    chan struct{}
	samples []horizonSample
	err     error
}

// startSampler starts reading the server for s's jobs table, reporting progress every
// progressEvery under label.
func startSampler(ctx context.Context, e *env, s system, progressEvery time.Duration, label string) *horizonSampler {
	h := &horizonSampler{stop: make(chan struct{}), done: make(chan struct{})}
	table := pgx.Identifier{s.Schema(), s.Table()}.Sanitize()
	go func() {
		defer close(h.done)
		tick := time.NewTicker(horizonSampleEvery)
		defer tick.Stop()
		start, reported := time.Now(), time.Now()
		for {
			select {
			case <-h.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			smp, err := sampleServer(ctx, e, table)
			if err != nil {
				h.err = err
				return
			}
			h.samples = append(h.samples, smp)
			if smp.at.Sub(reported) >= progressEvery {
				reported = smp.at
				progress("%s: %s in, n_dead_tup %s, indexes %s, oldest backend_xmin %s transactions old",
					label, smp.at.Sub(start).Round(time.Second), groupInt(int(smp.dead)), formatBytes(smp.indexBytes), groupInt(int(smp.xminAge)))
			}
		}
	}()
	return h
}

// finish stops the sampler and returns its samples.
func (h *horizonSampler) finish() ([]horizonSample, error) {
	close(h.stop)
	<-h.done
	return h.samples, h.err
}

// sampleServer reads the oldest backend_xmin's age, and table's dead tuples and indexes' size.
func sampleServer(ctx context.Context, e *env, table string) (horizonSample, error) {
	smp := horizonSample{at: time.Now()}
	err := e.admin.QueryRow(ctx, `SELECT
		coalesce((SELECT max(age(backend_xmin)) FROM pg_stat_activity), 0),
		coalesce((SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = $1::text::regclass), 0),
		pg_indexes_size($1::text::regclass)`, table).Scan(&smp.xminAge, &smp.dead, &smp.indexBytes)
	if err != nil {
		return smp, fmt.Errorf("read the server during the flow: %w", err)
	}
	return smp, nil
}
