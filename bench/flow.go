package main

// Flow control: what a queue's limits (pgqueue.Limits) cost a drain, and what the turns between
// keys give the jobs of small keys. pgqueue only: River's flow control is part of its paid
// product. Each scenario's steps are variants of one measurement, the baseline without limits
// and the limited one back to back in every run, which goes first rotating from run to run, each
// on a fresh schema.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgqueue/pgqueue"
)

// flowSystem is a contender with flow control: pgqueue.
type flowSystem interface {
	system
	// SetLimits sets queue's limits.
	SetLimits(ctx context.Context, queue string, l pgqueue.Limits) error
	// EnqueueKeyed inserts batch into queue in one call, by COPY, every job with the
	// flow-control key key.
	EnqueueKeyed(ctx context.Context, queue, key string, batch []payload) error
}

func (s *pgqueueSystem) SetLimits(ctx context.Context, queue string, l pgqueue.Limits) error {
	q, err := s.queueNamed(queue)
	if err != nil {
		return err
	}
	if err := q.SetLimits(ctx, l); err != nil {
		return fmt.Errorf("pgqueue: set limits: %w", err)
	}
	return nil
}

func (s *pgqueueSystem) EnqueueKeyed(ctx context.Context, queue, key string, batch []payload) error {
	return s.enqueueMany(ctx, queue, batch, &pgqueue.EnqueueOptions{Key: key})
}

// Sizes of the flow-control scenarios at -scale 1.
const (
	flowMaxRunning = 10_000  // drain-limited's global limit: never reached with drainSlots slots
	keyJobs        = 10      // jobs per key in drain-keys, and per small key in key-fairness
	fairSmallKeys  = 100     // key-fairness's small keys (not scaled)
	fairBigJobs    = 100_000 // key-fairness's big key's jobs
	keyFillers     = 8       // goroutines that enqueue keyed jobs, one EnqueueMany per key
	bigKey         = "big"   // key-fairness's big key: before every small key in the walk's order
)

func (e *env) fairBigJobs() int { return e.count(fairBigJobs, 1000) }

// keyedDrainJobs is drain-keys' job count: the drain's, in whole keys.
func (e *env) keyedDrainJobs() int { return e.drainJobs() / keyJobs * keyJobs }

// flowVariant is one step of a flow-control scenario: the limits its queue gets.
type flowVariant struct {
	name   string
	limits pgqueue.Limits
}

var (
	noLimits     = flowVariant{"no limits", pgqueue.Limits{}}
	maxRunning   = flowVariant{"MaxRunning " + groupInt(flowMaxRunning), pgqueue.Limits{MaxRunning: flowMaxRunning}}
	oneRunPerKey = flowVariant{"KeyMaxRunning 1", pgqueue.Limits{KeyMaxRunning: 1}}
)

// flowMetric names a metric of a variant.
func flowMetric(v flowVariant, m string) string { return v.name + ": " + m }

// flowMetrics are the metrics of every variant: each metric at every variant in turn.
func flowMetrics(variants []flowVariant, ms []metric) []metric {
	var out []metric
	for _, m := range ms {
		for _, v := range variants {
			out = append(out, metric{flowMetric(v, m.name), m.higherBetter})
		}
	}
	return out
}

// flowSteps makes a step per variant that runs run with the variant's limits and names the
// metrics after the variant.
func flowSteps(variants []flowVariant, run func(ctx context.Context, e *env, f flowSystem, l pgqueue.Limits) (result, error)) []step {
	var steps []step
	for _, v := range variants {
		steps = append(steps, step{
			name: v.name,
			run: func(ctx context.Context, e *env, s system) (result, error) {
				f, ok := s.(flowSystem)
				if !ok {
					return nil, fmt.Errorf("%T has no flow control", s)
				}
				res, err := run(ctx, e, f, v.limits)
				return renamed(res, func(m string) string { return flowMetric(v, m) }), err
			},
		})
	}
	return steps
}

// renamed returns res with every metric renamed by name (nil for nil).
func renamed(res result, name func(string) string) result {
	if res == nil {
		return nil
	}
	out := make(result, len(res))
	for m, v := range res {
		out[name(m)] = v
	}
	return out
}

// setLimits sets the limits of queueName; it leaves a queue without limits untouched.
func setLimits(ctx context.Context, f flowSystem, l pgqueue.Limits) error {
	if l == (pgqueue.Limits{}) {
		return nil
	}
	return f.SetLimits(ctx, queueName, l)
}

// targetLimitedDrain is the target for a drain under a global limit it never reaches, as
// a fraction of the same drain without limits.
const targetLimitedDrain = 0.90

func drainLimitedScenario() *scenario {
	variants := []flowVariant{noLimits, maxRunning}
	return &scenario{
		name: "drain-limited",
		title: func(e *env) string {
			return fmt.Sprintf("7. Flow control, a global limit never reached: the drain of 3 (%s pre-inserted no-op jobs without keys, %d slots), without limits and with %s, alternating; pgqueue only",
				groupInt(e.drainJobs()), drainSlots, maxRunning.name)
		},
		metrics:   flowMetrics(variants, drainMetrics),
		noRiver:   true,
		pairSteps: true,
		steps: flowSteps(variants, func(ctx context.Context, e *env, f flowSystem, l pgqueue.Limits) (result, error) {
			if err := setLimits(ctx, f, l); err != nil {
				return nil, err
			}
			return runDrain(ctx, e, f, oneQueue(drainSlots), 0)
		}),
		derived: flowRatio("drain-limited", maxRunning, fmt.Sprintf("the issue's target: ≥ %.2f×", targetLimitedDrain)),
	}
}

func drainKeysScenario() *scenario {
	variants := []flowVariant{noLimits, oneRunPerKey}
	return &scenario{
		name: "drain-keys",
		title: func(e *env) string {
			n := e.keyedDrainJobs()
			return fmt.Sprintf("7b. Flow control, one running job per key: the drain of 3 with its %s jobs spread over %s keys (%d each, enqueued key by key), %d slots, without limits and with %s, alternating; pgqueue only",
				groupInt(n), groupInt(n/keyJobs), keyJobs, drainSlots, oneRunPerKey.name)
		},
		metrics:   flowMetrics(variants, drainMetrics),
		noRiver:   true,
		pairSteps: true,
		steps:     flowSteps(variants, runKeyedDrain),
		derived:   flowRatio("drain-keys", oneRunPerKey, ""),
	}
}

// runKeyedDrain pre-inserts drain-keys' jobs, keyJobs per key, sets the limits l and times the
// drain.
func runKeyedDrain(ctx context.Context, e *env, f flowSystem, l pgqueue.Limits) (result, error) {
	n := e.keyedDrainJobs()
	if err := enqueueKeys(ctx, f, n/keyJobs, false); err != nil {
		return nil, fmt.Errorf("pre-insert: %w", err)
	}
	if err := setLimits(ctx, f, l); err != nil {
		return nil, err
	}
	return timeDrain(ctx, e, f, oneQueue(drainSlots), n, 0)
}

// enqueueKeys enqueues keyJobs jobs into queueName for each of keys keys (k00000, k00001, …),
// key k's jobs numbered from k·keyJobs, one EnqueueMany per key, from keyFillers goroutines. With
// stamp, each job's Since is the time just before its EnqueueMany.
func enqueueKeys(ctx context.Context, f flowSystem, keys int, stamp bool) error {
	var next atomic.Int64
	errs := make([]error, keyFillers)
	var wg sync.WaitGroup
	for g := range keyFillers {
		wg.Go(func() {
			batch := make([]payload, keyJobs)
			for k := int(next.Add(1) - 1); k < keys && errs[g] == nil; k = int(next.Add(1) - 1) {
				var since int64
				if stamp {
					since = time.Now().UnixNano()
				}
				for j := range batch {
					batch[j] = payload{I: int64(k*keyJobs + j), Since: since}
				}
				errs[g] = f.EnqueueKeyed(ctx, queueName, fmt.Sprintf("k%05d", k), batch)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// fairnessMetrics are key-fairness's metrics.
var fairnessMetrics = []metric{
	{"small keys p50 ms", false}, {"small keys p99 ms", false},
	{"small keys' first jobs p99 ms", false}, {"big key's jobs run meanwhile", true},
}

func keyFairnessScenario() *scenario {
	variants := []flowVariant{noLimits, oneRunPerKey}
	return &scenario{
		name: "key-fairness",
		title: func(e *env) string {
			return fmt.Sprintf("7c. Fairness between keys: one key with %s pre-inserted jobs; once the worker (%d slots) has started, %d keys with %d jobs each; wait of the small keys' jobs from their enqueue call (so including the insert) to handler start, without limits and with %s, alternating; pgqueue only",
				groupInt(e.fairBigJobs()), drainSlots, fairSmallKeys, keyJobs, oneRunPerKey.name)
		},
		metrics:   flowMetrics(variants, fairnessMetrics),
		noRiver:   true,
		pairSteps: true,
		steps:     flowSteps(variants, runKeyFairness),
	}
}

// runKeyFairness pre-inserts the big key's jobs, sets the limits l, starts a worker, enqueues the
// small keys' jobs and measures how long they wait, until every one of them has started. The
// small keys' jobs are numbered from 0, the big key's after them; the big key's left over stay
// available.
func runKeyFairness(ctx context.Context, e *env, f flowSystem, l pgqueue.Limits) (result, error) {
	small, big := fairSmallKeys*keyJobs, e.fairBigJobs()
	err := prefillWith(small, big, func(batch []payload) error { return f.EnqueueKeyed(ctx, queueName, bigKey, batch) })
	if err != nil {
		return nil, err
	}
	if err := e.vacuumAnalyze(ctx, f.Schema(), f.Table()); err != nil {
		return nil, err
	}
	if err := setLimits(ctx, f, l); err != nil {
		return nil, err
	}
	t := newTracker(small + big)
	if err := f.Start(ctx, oneQueue(drainSlots), t.handle); err != nil {
		return nil, err
	}
	err = enqueueKeys(ctx, f, fairSmallKeys, true)
	if err == nil {
		// Without limits the small keys wait for the whole big key: as long as a drain of it.
		err = t.waitStarted(ctx, small, time.Minute+time.Duration(big)*5*time.Millisecond)
	}
	if err := errors.Join(err, f.Stop(ctx)); err != nil {
		return nil, err
	}
	bigRan, err := t.checkFirst(small)
	if err != nil {
		return nil, err
	}
	want := map[string]int64{}
	if left := big - bigRan; left > 0 {
		want["available"] = int64(left)
	}
	if err := expectStates(ctx, f, want); err != nil {
		return nil, err
	}
	lat := t.latencies()[:small]
	firsts := make([]time.Duration, 0, fairSmallKeys)
	for i := 0; i < small; i += keyJobs {
		firsts = append(firsts, lat[i])
	}
	res := result(latencyMetrics("small keys ", lat, 0.50, 0.99))
	maps.Copy(res, latencyMetrics("small keys' first jobs ", firsts, 0.99))
	res["big key's jobs run meanwhile"] = float64(bigRan)
	return res, nil
}

// waitStarted waits until jobs 0 to n-1 have all started, polling every pollTableEvery.
func (t *tracker) waitStarted(ctx context.Context, n int, timeout time.Duration) error {
	tick := time.NewTicker(pollTableEvery)
	defer tick.Stop()
	deadline := time.Now().Add(timeout)
	for i := 0; i < n; {
		if t.runs[i].Load() > 0 {
			i++
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("job %d of the first %d has not started within %s", i, n, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// checkFirst fails unless jobs 0 to n-1 each ran exactly once, and the others at most once,
// and returns how many of the others ran.
func (t *tracker) checkFirst(n int) (others int, err error) {
	if err := t.check(n); err != nil {
		return 0, err
	}
	dups := 0
	for i := n; i < len(t.runs); i++ {
		switch c := t.runs[i].Load(); {
		case c == 1:
			others++
		case c > 1:
			dups++
		}
	}
	if dups > 0 {
		return 0, fmt.Errorf("%d jobs beyond the first %d ran more than once", dups, n)
	}
	return others, nil
}

// flowRatio returns the derived lines of a drain's flow-control scenario: the variant's jobs/s
// divided by the baseline's (no limits), as medians and run by run (the two alternate within
// each run), with target, if any, in parentheses.
func flowRatio(scenario string, v flowVariant, target string) func(all *results) []string {
	return func(all *results) []string {
		runs := all.values[scenario][pgqueueContender.name]
		with, without := runs[flowMetric(v, "jobs/s")], runs[flowMetric(noLimits, "jobs/s")]
		if len(with) == 0 || len(with) != len(without) {
			return nil
		}
		var perRun []string
		for i := range with {
			perRun = append(perRun, formatRatio(with[i]/without[i]))
		}
		line := fmt.Sprintf("pgqueue: jobs/s with %s ÷ without limits = %s (medians); run by run: %s",
			v.name, formatRatio(summarize(with).median/summarize(without).median), strings.Join(perRun, ", "))
		if target != "" {
			line += " (" + target + ")"
		}
		return []string{line}
	}
}
