package main

// Scenario 4d, beside: a busy queue must not slow the other queues' wake-ups. One process (one
// pgqueue Client.Run, one River client) serves a queue draining a backlog and, beside it, quiet
// queues that get one job every besideEvery, enqueued one at a time from another goroutine (and
// so another connection of the pool); or a second process of the harness drains, with a client
// and pool of its own, and this one serves the quiet queue alone. Measured: how long the quiet
// jobs enqueued during the drain wait for their handlers, against the same with no drain.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Sizes of scenario 4d at -scale 1. The drain is scenario 3's (drainJobs, drainSlots).
const (
	besideEvery     = 10 * time.Millisecond // one quiet job every 10 ms: 100/s
	besideIdleFor   = 5 * time.Second       // how long the idle steps enqueue quiet jobs
	quietQueueName  = "quiet"               // the one quiet queue
	quietSlots      = 10                    // its slots
	quietQueueCount = 49                    // the quiet queues of the variant with many
	quietQueueSlots = 2                     // the slots of each of them
)

func (e *env) besideIdleFor() time.Duration { return e.duration(besideIdleFor, 50*besideEvery) }

// besideDrain is where a step of scenario 4d drains.
type besideDrain int

const (
	noDrain        besideDrain = iota // nowhere: the busy queue is empty (the idle baseline)
	drainHere                         // in the client that serves the quiet queues
	drainElsewhere                    // in a second process of the harness (drainChild)
)

// besideStep is one step of scenario 4d: the quiet queues, and where the drain runs.
type besideStep struct {
	label string
	quiet []queueSlots
	drain besideDrain
}

// quietQueues are the quiet queues of the variant with many: quiet-00 to quiet-48, 2 slots each.
func quietQueues() []queueSlots {
	qs := make([]queueSlots, quietQueueCount)
	for i := range qs {
		qs[i] = queueSlots{fmt.Sprintf("%s-%02d", quietQueueName, i), quietQueueSlots}
	}
	return qs
}

// Labels of scenario 4d's steps, which its metrics are named after.
const (
	besideIdleOne  = "idle, 1 quiet queue"
	besideDrainOne = "drain, 1 quiet queue"
	besideIdleMany = "idle, 49 quiet queues"
	besideDrainMny = "drain, 49 quiet queues"
	besideOtherOne = "drain in a 2nd process, 1 quiet queue"
)

// besideSteps are scenario 4d's steps, in the order they run in each run.
func besideSteps() []besideStep {
	one := []queueSlots{{quietQueueName, quietSlots}}
	return []besideStep{
		{besideIdleOne, one, noDrain},
		{besideDrainOne, one, drainHere},
		{besideIdleMany, quietQueues(), noDrain},
		{besideDrainMny, quietQueues(), drainHere},
		{besideOtherOne, one, drainElsewhere},
	}
}

// besideMetric names a metric of one of scenario 4d's steps.
func besideMetric(label, m string) string { return label + ": " + m }

// besideMetrics are scenario 4d's metrics: the quiet jobs' wait (p50, then p99) at every step,
// the drain's rate at the steps with one, the wait counted from the enqueue's return, and the
// floor of that wait (floor.go).
func besideMetrics() []metric {
	var ms []metric
	for _, m := range []string{"p50 ms", "p99 ms", "drain jobs/s", "from return p50 ms", "from return p99 ms", "floor p50 ms", "floor p99 ms"} {
		for _, st := range besideSteps() {
			if m == "drain jobs/s" && st.drain == noDrain {
				continue
			}
			ms = append(ms, metric{besideMetric(st.label, m), m == "drain jobs/s"})
		}
	}
	return ms
}

func besideScenario() *scenario {
	var steps []step
	for _, st := range besideSteps() {
		steps = append(steps, step{
			name: st.label,
			run: func(ctx context.Context, e *env, s system) (result, error) {
				res, err := runBeside(ctx, e, s, st)
				return renamed(res, func(m string) string { return besideMetric(st.label, m) }), err
			},
		})
	}
	return &scenario{
		name: "beside",
		title: func(e *env) string {
			return fmt.Sprintf("4d. Beside a drain: one process serves a queue of %s pre-inserted no-op jobs (%d slots; paused until the process has settled, then resumed) and quiet queues that get one job every %s, enqueued one at a time from another goroutine: one queue of %d slots, or %d queues of %d slots each in turn; or a 2nd process of the harness drains and this one serves the quiet queue alone; against the same without a drain (idle, for %s). Wait of the quiet jobs enqueued while the drain runs, from the enqueue call (so including the insert, as in 4) and from its return, to handler start; the drain's jobs/s, timed as 3 from the resume; the floor: in the same seconds, a notification every %s on connections of the harness's own, from its send's return until it was heard and one round trip (SELECT 1) after it ran, the least a LISTEN-woken claim can take",
				groupInt(e.drainJobs()), drainSlots, besideEvery, quietSlots, quietQueueCount, quietQueueSlots, e.besideIdleFor(), besideEvery)
		},
		metrics: besideMetrics(),
		steps:   steps,
		derived: besideLines,
	}
}

// runBeside runs one step of scenario 4d on s. With a drain, it pre-inserts the drain's jobs
// (numbered 0 to n-1) into queueName, runs VACUUM ANALYZE as scenario 3 does, and pauses the
// queue. It starts one worker serving the quiet queues and (unless the drain runs elsewhere)
// queueName, lets it settle and warms it up with a job per quiet queue (at least warmupJobs).
// Then it resumes queueName and enqueues quiet jobs (numbered from n) one every besideEvery,
// until every job of the drain has started (or, without a drain, for besideIdleFor), and times
// the drain from the resume until the table shows no job available or running.
func runBeside(ctx context.Context, e *env, s system, st besideStep) (res result, err error) {
	n := 0
	if st.drain != noDrain {
		n = e.drainJobs()
		if err := prefill(ctx, s, queueName, 0, n, 0); err != nil {
			return nil, err
		}
		if err := e.vacuumAnalyze(ctx, s.Schema(), s.Table()); err != nil {
			return nil, err
		}
		if err := s.Pause(ctx, queueName); err != nil {
			return nil, err
		}
	}
	timeout := time.Minute + time.Duration(n)*5*time.Millisecond // as timeDrain's
	streamFor := e.besideIdleFor()
	if st.drain != noDrain {
		streamFor = timeout
	}
	warm := max(warmupJobs, len(st.quiet))
	maxQuiet := int(streamFor/besideEvery) + 1
	drain, quiet := newTracker(n), newTracker(warm+maxQuiet)
	h := func(p payload) {
		if p.I < int64(n) {
			drain.handle(p)
			return
		}
		p.I -= int64(n)
		quiet.handle(p)
	}
	queues := slices.Clone(st.quiet)
	if st.drain != drainElsewhere {
		queues = append(queues, queueSlots{queueName, drainSlots}) // empty when idle
	}
	if err := s.Start(ctx, queues, h); err != nil {
		return nil, err
	}
	stopped := false
	defer func() {
		if !stopped {
			err = errors.Join(err, s.Stop(ctx))
		}
	}()
	var child *drainChild
	if st.drain == drainElsewhere {
		if child, err = startDrainChild(ctx, e, s, n, timeout); err != nil {
			return nil, err
		}
		defer func() {
			if child != nil {
				err = errors.Join(err, child.kill())
			}
		}()
	}

	time.Sleep(e.duration(settleTime, 200*time.Millisecond))
	for i := range warm {
		p := payload{I: int64(n + i), Since: time.Now().UnixNano()}
		if err := s.EnqueueTo(ctx, st.quiet[i%len(st.quiet)].name, p); err != nil {
			return nil, err
		}
	}
	if err := quiet.wait(ctx, warm, 30*time.Second); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}

	var start time.Time
	if st.drain != noDrain {
		start = time.Now()
		if err := s.Resume(ctx, queueName); err != nil {
			return nil, err
		}
	}
	probe, err := startFloorProbe(ctx, e.dsn)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, probe.close()) }()
	stop := make(chan struct{})
	var stream quietStream
	var floor []time.Duration
	var floorErr error
	var wg sync.WaitGroup
	wg.Go(func() { stream = enqueueQuiet(ctx, s, st.quiet, int64(n+warm), maxQuiet, stop) })
	wg.Go(func() { floor, floorErr = probe.run(ctx, stop) })
	switch st.drain {
	case noDrain:
		select {
		case <-time.After(streamFor):
		case <-ctx.Done():
			err = ctx.Err()
		}
	case drainHere:
		err = drain.wait(ctx, n, timeout)
	case drainElsewhere:
		err = child.expect(ctx, "started", timeout)
	}
	close(stop)
	wg.Wait()
	if err = errors.Join(err, stream.err, floorErr); err != nil {
		return nil, err
	}
	count := len(stream.since)
	if err := quiet.wait(ctx, count, 30*time.Second); err != nil {
		return nil, err
	}
	var elapsed time.Duration
	if st.drain != noDrain {
		if elapsed, err = waitIdle(ctx, s, start, timeout); err != nil {
			return nil, err
		}
	}
	stopped = true
	if err := s.Stop(ctx); err != nil {
		return nil, err
	}
	if child != nil {
		err, child = child.finish(ctx), nil
		if err != nil {
			return nil, err
		}
	}
	if st.drain == drainHere {
		err = drain.check(n) // the 2nd process checks its own
	}
	if err := errors.Join(err, quiet.check(warm+count)); err != nil {
		return nil, err
	}
	want := map[string]int64{}
	if d := s.DoneState(); d != "" {
		want[d] = int64(n + warm + count)
	}
	if err := expectStates(ctx, s, want); err != nil {
		return nil, err
	}

	lat := quiet.latencies()[warm : warm+count]
	fromReturn := make([]time.Duration, count)
	calls := make([]time.Duration, count)
	for i, l := range lat {
		fromReturn[i] = stream.since[i].Add(l).Sub(stream.returned[i])
		calls[i] = stream.returned[i].Sub(stream.since[i])
	}
	res = result(latencyMetrics("", lat, 0.50, 0.99))
	maps.Copy(res, latencyMetrics("from return ", fromReturn, 0.50, 0.99))
	maps.Copy(res, latencyMetrics("floor ", floor, 0.50, 0.99))
	if st.drain != noDrain {
		res["drain jobs/s"] = float64(n) / elapsed.Seconds()
	}
	call := latencyMetrics("", calls, 0.50, 0.99)
	progress("beside (%s) %s: %d quiet jobs measured; the enqueue call itself took p50 %s ms, p99 %s ms",
		st.label, s.Contender(), count, formatValue(call["p50 ms"]), formatValue(call["p99 ms"]))
	return res, nil
}

// quietStream is what enqueueQuiet did: when each job's enqueue call began (its payload's Since)
// and returned, by job, and the error that stopped it.
type quietStream struct {
	since, returned []time.Time
	err             error
}

// enqueueQuiet enqueues one job every besideEvery, one at a time, into the queues in turn, the
// first at once, numbered from first, until stop is closed; more than max jobs is an error.
func enqueueQuiet(ctx context.Context, s system, queues []queueSlots, first int64, max int, stop <-chan struct{}) quietStream {
	var r quietStream
	tick := time.NewTicker(besideEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		if i > 0 { // at least one, however short the step (a smoke run's drain in a 2nd process)
			select {
			case <-stop:
				return r
			default:
			}
		}
		if i == max {
			r.err = fmt.Errorf("%d quiet jobs enqueued, and the step still runs", max)
			return r
		}
		since := time.Now()
		if err := s.EnqueueTo(ctx, queues[i%len(queues)].name, payload{I: first + int64(i), Since: since.UnixNano()}); err != nil {
			r.err = err
			return r
		}
		r.since, r.returned = append(r.since, since), append(r.returned, time.Now())
		select {
		case <-stop:
			return r
		case <-ctx.Done():
			r.err = ctx.Err()
			return r
		case <-tick.C:
		}
	}
}

// The target for a quiet queue's wait while another queue of the same process drains.
const (
	targetBesideP50 = 1.5 // ms
	targetBesideP99 = 5.0 // ms
)

// besideLines prints, per contender, the quiet jobs' p50 and p99 beside each drain as multiples
// of the same without one, and pgqueue's against the target.
func besideLines(all *results) []string {
	med := func(c, label, m string) (float64, bool) { return all.median("beside", c, besideMetric(label, m)) }
	var lines []string
	for _, c := range all.contenders {
		var parts []string
		for _, pair := range [][2]string{{besideDrainOne, besideIdleOne}, {besideDrainMny, besideIdleMany}, {besideOtherOne, besideIdleOne}} {
			var ps []string
			for _, m := range []string{"p50 ms", "p99 ms"} {
				with, ok1 := med(c, pair[0], m)
				without, ok2 := med(c, pair[1], m)
				if ok1 && ok2 && without > 0 {
					ps = append(ps, fmt.Sprintf("%s %s", strings.TrimSuffix(m, " ms"), formatRatio(with/without)))
				}
			}
			if len(ps) > 0 {
				parts = append(parts, pair[0]+" ÷ "+pair[1]+": "+strings.Join(ps, ", "))
			}
		}
		if len(parts) > 0 {
			lines = append(lines, c+": "+strings.Join(parts, "; "))
		}
	}
	p50, ok1 := med(pgqueueContender.name, besideDrainOne, "p50 ms")
	p99, ok2 := med(pgqueueContender.name, besideDrainOne, "p99 ms")
	if ok1 && ok2 {
		lines = append(lines, fmt.Sprintf("pgqueue, %s: p50 %s ms, p99 %s ms (the issue's target: p50 ≤ %g ms, p99 ≤ %g ms)",
			besideDrainOne, formatValue(p50), formatValue(p99), targetBesideP50, targetBesideP99))
	}
	return lines
}

// childEnv names the environment variable that makes the harness the second process of
// scenario 4d (runChild): it holds a childSpec, as JSON.
const childEnv = "PGQBENCH_DRAIN_CHILD"

// childSpec is what the second process of scenario 4d drains: the contender's jobs in schema,
// queueName's jobs numbered 0 to Jobs-1, with drainSlots slots, within Timeout.
type childSpec struct {
	DSN       string        `json:"dsn"`
	Contender string        `json:"contender"`
	Schema    string        `json:"schema"`
	Jobs      int           `json:"jobs"`
	Timeout   time.Duration `json:"timeout"`
}

// drainChild is the second process of scenario 4d, as its parent sees it. It says "ready" on
// its stdout once its worker has started, "started" once every job of the drain has, and, after
// its stdin is closed, stops its worker, checks that every job ran exactly once, says "ok" and
// exits. Its stderr is the parent's.
type drainChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its stdout, line by line; closed at its end
}

// startDrainChild starts this program again as the second process of scenario 4d, to drain s's
// n jobs of queueName with a client of its own (the contender's attach), and waits until its
// worker has started.
func startDrainChild(ctx context.Context, e *env, s system, n int, timeout time.Duration) (*drainChild, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("2nd process: %w", err)
	}
	spec, err := json.Marshal(childSpec{DSN: e.dsn, Contender: s.Contender(), Schema: s.Schema(), Jobs: n, Timeout: timeout})
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("2nd process: %w", err)
	}
	c := &drainChild{cmd: cmd, stdin: stdin, lines: make(chan string, 4)}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	if err := c.expect(ctx, "ready", time.Minute); err != nil {
		return nil, errors.Join(err, c.kill())
	}
	return c, nil
}

// expect waits up to timeout for the child's next line, which must be want.
func (c *drainChild) expect(ctx context.Context, want string, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case l, ok := <-c.lines:
		switch {
		case !ok:
			return fmt.Errorf("2nd process: ended before it said %q", want)
		case l != want:
			return fmt.Errorf("2nd process: said %q, want %q", l, want)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("2nd process: did not say %q within %s", want, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish has the child stop its worker and check its jobs, and waits for it to exit.
func (c *drainChild) finish(ctx context.Context) error {
	c.stdin.Close()
	if err := c.expect(ctx, "ok", 2*time.Minute); err != nil {
		return errors.Join(err, c.kill())
	}
	for range c.lines { // read to its end before Wait closes the pipe
	}
	if err := c.cmd.Wait(); err != nil {
		return fmt.Errorf("2nd process: %w", err)
	}
	return nil
}

// kill ends the child at once (its leases run out in a schema about to be dropped).
func (c *drainChild) kill() error {
	_ = c.cmd.Process.Kill()
	for range c.lines {
	}
	_ = c.cmd.Wait() // killed: its status says so
	return nil
}

// runChild is the second process of scenario 4d: it drains the jobs spec says, with one worker
// of queueName (drainSlots slots) in a client of its own, and talks to its parent as drainChild
// says.
func runChild(specJSON string) error {
	var spec childSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("2nd process: %s: %w", childEnv, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var c *contender
	for _, k := range []contender{pgqueueContender, riverDefault, riverFast} {
		if k.name == spec.Contender {
			c = &k
		}
	}
	if c == nil {
		return fmt.Errorf("2nd process: no contender %q", spec.Contender)
	}
	e, err := newEnv(ctx, spec.DSN, 1)
	if err != nil {
		return err
	}
	s, err := c.attach(ctx, e, spec.Schema)
	if err != nil {
		return errors.Join(err, e.close())
	}
	err = drainForParent(ctx, s, spec)
	return errors.Join(err, s.Close(ctx), e.close())
}

// drainForParent runs the child's worker, tells the parent how far it got, and stops once the
// parent closes stdin.
func drainForParent(ctx context.Context, s system, spec childSpec) error {
	t := newTracker(spec.Jobs)
	if err := s.Start(ctx, oneQueue(drainSlots), t.handle); err != nil {
		return err
	}
	fmt.Println("ready")
	if err := t.wait(ctx, spec.Jobs, spec.Timeout); err != nil {
		return errors.Join(err, s.Stop(ctx))
	}
	fmt.Println("started")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it: the drain is settled
	if err := s.Stop(ctx); err != nil {
		return err
	}
	if err := t.check(spec.Jobs); err != nil {
		return err
	}
	fmt.Println("ok")
	return nil
}
