package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Benchmarks of workflows (issue 32): what they cost the queues that use none, how soon a
// fan-in's child starts after its last parent, how fast a large workflow drains against plain
// jobs, and what the resolver's statement costs. Those that compare two variants run both in
// every iteration (or batch), the order alternating from one pair to the next, so that both
// see the same machine: compare the ratios. Each one's command, and its figures, are in
// bench/README.md, "Workflows"; for instance:
//
//	go test -run '^$' -bench 'BenchmarkWorkflowPlainPath' -benchtime 1x -count 12 .

// drainSlots is the concurrency of every drain here, as in BenchmarkDrain100k.
const drainSlots = 100

// dropFlowTriggers drops the triggers that record the ends of jobs taking part in
// dependencies: the schema as it would be without workflows, but for their columns.
const dropFlowTriggers = "DROP TRIGGER pgqueue_job_ended ON pgqueue_jobs; DROP TRIGGER pgqueue_job_deleted ON pgqueue_jobs"

// drainRun is one timed drain: a bundle whose queue "drain" holds jobs enqueued beforehand, and
// a worker of drainSlots no-op slots that reports when all of them completed.
type drainRun struct {
	bb      *bundle
	q       *Queue[int]
	jobs    int
	done    atomic.Int64
	drained chan struct{}
}

func newDrainRun(b *testing.B) *drainRun {
	bb := setup(b)
	return &drainRun{bb: bb, q: newQueue[int](b, bb.client, "drain"), drained: make(chan struct{})}
}

// run analyzes the tables, then serves the queue from worker start until every one of the
// run's jobs completed, and returns the jobs per second.
func (d *drainRun) run(b *testing.B) float64 {
	d.bb.exec("VACUUM ANALYZE pgqueue_jobs, pgqueue_deps, pgqueue_workflows, pgqueue_workflow_jobs, pgqueue_ended")
	w := must(d.q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{
		Concurrency: drainSlots,
		OnEvent: func(ev Event) {
			if ev.Kind == EventCompleted && d.done.Add(1) == int64(d.jobs) {
				close(d.drained)
			}
		},
	}))
	start := time.Now()
	stop := runWorkers(b, d.bb.client, w)
	select {
	case <-d.drained:
	case <-time.After(10 * time.Minute):
		b.Fatalf("drain: %d of %d jobs completed after 10 minutes", d.done.Load(), d.jobs)
	}
	elapsed := time.Since(start)
	stop()
	return float64(d.jobs) / elapsed.Seconds()
}

// plainDrain drains n plain jobs, enqueued beforehand as BenchmarkDrain100k's, in a schema
// with the workflow triggers or without them; it returns the jobs per second.
func plainDrain(b *testing.B, n int, triggers bool) float64 {
	d := newDrainRun(b)
	if !triggers {
		d.bb.exec(dropFlowTriggers)
	}
	fillDrain(b, d.q, 0, n)
	d.jobs = n
	return d.run(b)
}

// pairs counts the pairs alternate ran, across the calls of a benchmark function (-count).
var pairs atomic.Int64

// alternate runs f(0) and f(1), in that order for one pair and the other way for the next.
func alternate(f func(variant int)) {
	odd := int(pairs.Add(1) & 1)
	for k := range 2 {
		f(k ^ odd)
	}
}

// BenchmarkWorkflowPlainPath drains 10⁵ plain jobs (no workflow, no dependency) twice per
// iteration, as BenchmarkDrain100k does: in a schema with the workflow triggers and in one
// without them. A queue that uses no workflow pays their WHEN clauses on every claim and
// settle; the ratio "with/without" is what they cost its drain. (The columns workflows added
// are in both schemas: measure them against a build from before workflows.)
func BenchmarkWorkflowPlainPath(b *testing.B) {
	const jobs = 100_000
	var with, without, ratio []float64
	for b.Loop() {
		b.StopTimer()
		var rate [2]float64
		alternate(func(v int) { rate[v] = plainDrain(b, jobs, v == 0) })
		with, without = append(with, rate[0]), append(without, rate[1])
		b.Logf("with %.0f jobs/s, without %.0f jobs/s, ratio %.3f", rate[0], rate[1], rate[0]/rate[1])
		ratio = append(ratio, rate[0]/rate[1])
		b.StartTimer()
	}
	b.ReportMetric(mean(with), "with-jobs/s")
	b.ReportMetric(mean(without), "without-jobs/s")
	b.ReportMetric(mean(ratio), "with/without")
}

// BenchmarkWorkflowHotStatements claims and completes batches of 100 plain jobs
// (claim.sql, then complete.sql), in a schema with the workflow triggers and in one without,
// the two alternating batch by batch: the statements that pay the triggers' WHEN clauses,
// without the rest of a drain.
func BenchmarkWorkflowHotStatements(b *testing.B) {
	rts := [2]*runtime{benchRuntime(b, b.N*100), benchRuntime(b, b.N*100)}
	if _, err := rts[1].c.pool.Exec(b.Context(), dropFlowTriggers); err != nil {
		b.Fatal(err)
	}
	var spent [2]time.Duration
	b.ResetTimer()
	for range b.N {
		alternate(func(v int) {
			start := time.Now()
			var batch []outcome
			for _, a := range benchClaim(b, rts[v]) {
				batch = append(batch, outcome{a: a, kind: outcomeDone})
			}
			if skipped, err := rts[v].completer.settle(b.Context(), batch, starts{}, false); err != nil || len(skipped) > 0 {
				b.Fatalf("settle: %d outcomes skipped, %v", len(skipped), err)
			}
			spent[v] += time.Since(start)
		})
	}
	b.ReportMetric(float64(b.N*100)/spent[0].Seconds(), "with-jobs/s")
	b.ReportMetric(float64(b.N*100)/spent[1].Seconds(), "without-jobs/s")
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "with/without")
}

// BenchmarkWorkflowFanIn10k enqueues one workflow of 10,000 parents (queue "parent", 100 slots)
// and a child that depends on all of them (queue "child"), runs both workers, and measures the
// time from the last parent's completion to the child's handler entry: from the parent's
// EventCompleted (reported once its settle committed) and from its row's finished_at (the
// settle transaction's start, by the server's clock, on the same host). Median and maximum
// over the iterations; run with -benchtime 5x or more.
func BenchmarkWorkflowFanIn10k(b *testing.B) {
	const parents = 10_000
	var fromEvent, fromRow, enqueue []float64
	for b.Loop() {
		b.StopTimer()
		ev, row, enq := fanIn(b, parents)
		b.Logf("child started %.1f ms after the last parent's event, %.1f ms after its finished_at; enqueue %.0f ms", ev, row, enq)
		fromEvent, fromRow, enqueue = append(fromEvent, ev), append(fromRow, row), append(enqueue, enq)
		b.StartTimer()
	}
	b.ReportMetric(median(fromEvent), "p50-ms-from-event")
	b.ReportMetric(slices.Max(fromEvent), "max-ms-from-event")
	b.ReportMetric(median(fromRow), "p50-ms-from-row")
	b.ReportMetric(slices.Max(fromRow), "max-ms-from-row")
	b.ReportMetric(median(enqueue), "enqueue-ms")
}

// fanIn runs one fan-in of parents to one child and returns, in milliseconds, the child's
// start after the last parent's completion event and after its finished_at, and how long the
// workflow's Enqueue took.
func fanIn(b *testing.B, parents int) (fromEvent, fromRow, enqueue float64) {
	bb := setup(b)
	// Completed jobs kept, so that the last parent's row is there to read: by default the upkeep
	// prunes completed steps even while their workflow runs (bench/README.md, "Workflows").
	c := bb.newClientWith(Config{Retention: Retention{Completed: KeepForever}})
	qp, qc := newQueue[int](b, c, "parent"), newQueue[int](b, c, "child")
	wf := c.NewWorkflow("fan-in")
	after := make([]Dependency, parents)
	for i := range parents {
		after[i] = Dependency{Job: qp.AddStep(wf, i, nil).ID}
	}
	qc.AddStep(wf, 0, &StepOptions{After: after})
	start := time.Now()
	if err := wf.Enqueue(b.Context()); err != nil {
		b.Fatal(err)
	}
	enqueue = ms(time.Since(start))
	bb.exec("VACUUM ANALYZE pgqueue_jobs, pgqueue_deps, pgqueue_workflows, pgqueue_workflow_jobs, pgqueue_ended")

	var mu sync.Mutex
	var last time.Time // the latest parent completion event
	wp := must(qp.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{
		Concurrency: drainSlots,
		OnEvent: func(ev Event) {
			if ev.Kind == EventCompleted {
				now := time.Now()
				mu.Lock()
				if now.After(last) {
					last = now
				}
				mu.Unlock()
			}
		},
	}))
	started := make(chan time.Time, 1)
	wc := must(qc.NewWorker(func(context.Context, *Job[int]) error {
		started <- time.Now()
		return nil
	}, nil))
	stop := runWorkers(b, c, wp, wc)
	childStart := receive(b, started, 5*time.Minute, "the child")
	stop()
	var lastRow time.Time
	if err := bb.pool.QueryRow(b.Context(), "SELECT max(finished_at) FROM pgqueue_jobs WHERE queue = 'parent'").
		Scan(&lastRow); err != nil {
		b.Fatal(err)
	}
	if n := bb.countIn("pgqueue_deps", "state = 'met'"); n != parents {
		b.Fatalf("%d edges met, want %d", n, parents)
	}
	if n := bb.count("queue = 'parent' AND status = 'completed'"); n != parents {
		b.Fatalf("%d parents completed, want %d", n, parents)
	}
	mu.Lock()
	defer mu.Unlock()
	return ms(childStart.Sub(last)), ms(childStart.Sub(lastRow)), enqueue
}

// flowShape builds a workflow of about 10⁵ steps, all of queue q.
type flowShape func(wf *Workflow, q *Queue[int]) (steps int)

// chains is 1,000 independent chains of 100 steps: every step has one dependent, so every
// completion releases one job: the most work for the resolver per job.
func chains(wf *Workflow, q *Queue[int]) int {
	const n, length = 1_000, 100
	for range n {
		var prev []Dependency
		for range length {
			prev = []Dependency{{Job: q.AddStep(wf, 0, &StepOptions{Name: "step", After: prev}).ID}}
		}
	}
	return n * length
}

// batch is one large batch job as an application would split it: a step that plans the work,
// 100 shards that each list 333 items, each item going through three steps (say fetch,
// transform, store), a step per shard that reports once its items are stored, and a last step
// once every shard has reported: fan-outs of 100 and 333, chains of three, fan-ins of 333 and
// 100. Sharding keeps every fan-out bounded, as one would also to keep the steps' payloads
// small; 100,102 steps.
func batch(wf *Workflow, q *Queue[int]) int {
	const shards, items = 100, 333
	plan := q.AddStep(wf, 0, &StepOptions{Name: "plan"})
	reports := make([]Dependency, 0, shards)
	for range shards {
		list := q.AddStep(wf, 0, &StepOptions{Name: "list", After: After(plan)})
		stored := make([]Dependency, 0, items)
		for range items {
			fetch := q.AddStep(wf, 0, &StepOptions{Name: "fetch", After: After(list)})
			transform := q.AddStep(wf, 0, &StepOptions{Name: "transform", After: After(fetch)})
			stored = append(stored, Dependency{Job: q.AddStep(wf, 0, &StepOptions{Name: "store", After: After(transform)}).ID})
		}
		reports = append(reports, Dependency{Job: q.AddStep(wf, 0, &StepOptions{Name: "report", After: stored}).ID})
	}
	q.AddStep(wf, 0, &StepOptions{Name: "done", After: reports})
	return 2 + shards*(2+3*items)
}

// BenchmarkWorkflowDrain100k drains a workflow of about 10⁵ steps, of one of two shapes, and
// 10⁵ plain jobs, the two alternating, one queue and 100 slots each, and reports both rates, the
// ratio, and how long building (AddStep) and enqueueing the workflow took, beside enqueueing
// the plain jobs (EnqueueMany, COPY, batches of 10,000). A drain fails after 10 minutes: as of
// this writing "batch" does (bench/README.md, "Workflows"); run "chains" alone with
// -bench 'BenchmarkWorkflowDrain100k/chains'.
func BenchmarkWorkflowDrain100k(b *testing.B) {
	for _, s := range []struct {
		name  string
		shape flowShape
	}{{"chains", chains}, {"batch", batch}} {
		b.Run(s.name, func(b *testing.B) { benchmarkFlowDrain(b, s.shape) })
	}
}

func benchmarkFlowDrain(b *testing.B, shape flowShape) {
	const jobs = 100_000
	var flow, plain, ratio, build, enqueue, fill []float64
	for b.Loop() {
		b.StopTimer()
		var rate [2]float64
		alternate(func(v int) {
			if v == 1 {
				d := newDrainRun(b)
				start := time.Now()
				fillDrain(b, d.q, 0, jobs)
				fill = append(fill, ms(time.Since(start)))
				d.jobs = jobs
				rate[1] = d.run(b)
				return
			}
			d, bms, ems := flowDrainRun(b, shape)
			build, enqueue = append(build, bms), append(enqueue, ems)
			rate[0] = d.run(b)
			if n := d.bb.countIn("pgqueue_jobs", "status <> 'completed'"); n != 0 {
				b.Fatalf("%d jobs of the workflow not completed", n)
			}
		})
		flow, plain = append(flow, rate[0]), append(plain, rate[1])
		b.Logf("workflow %.0f jobs/s, plain %.0f jobs/s, ratio %.3f; workflow built in %.0f ms, enqueued in %.0f ms; plain enqueued in %.0f ms",
			rate[0], rate[1], rate[0]/rate[1], build[len(build)-1], enqueue[len(enqueue)-1], fill[len(fill)-1])
		ratio = append(ratio, rate[0]/rate[1])
		b.StartTimer()
	}
	b.ReportMetric(mean(flow), "flow-jobs/s")
	b.ReportMetric(mean(plain), "plain-jobs/s")
	b.ReportMetric(mean(ratio), "flow/plain")
	b.ReportMetric(mean(build), "build-ms")
	b.ReportMetric(mean(enqueue), "enqueue-ms")
	b.ReportMetric(mean(fill), "plain-enqueue-ms")
}

// flowDrainRun builds and enqueues a workflow of the shape; it returns the drain to run and how
// long building and enqueueing took, in milliseconds.
func flowDrainRun(b *testing.B, shape flowShape) (d *drainRun, build, enqueue float64) {
	d = newDrainRun(b)
	start := time.Now()
	wf := d.bb.client.NewWorkflow("drain")
	d.jobs = shape(wf, d.q)
	built := time.Now()
	if err := wf.Enqueue(b.Context()); err != nil {
		b.Fatal(err)
	}
	return d, ms(built.Sub(start)), ms(time.Since(built))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// BenchmarkWorkflowFanOut enqueues one workflow of a parent (queue "parent") and N children
// that depend on it alone (queue "child", 100 slots), and measures the time from the parent's
// completion event to the first child's handler entry, when the resolver's batch that took the
// parent's end has released them all, and to the last child's.
func BenchmarkWorkflowFanOut(b *testing.B) {
	for _, n := range []int{1_000, 3_000, 10_000} {
		b.Run(fmt.Sprintf("children=%d", n), func(b *testing.B) {
			var first, last []float64
			for b.Loop() {
				b.StopTimer()
				f, l := fanOut(b, n)
				first, last = append(first, f), append(last, l)
				b.StartTimer()
			}
			b.ReportMetric(median(first), "ms-to-first-child")
			b.ReportMetric(median(last), "ms-to-last-child")
		})
	}
}

// fanOut runs one fan-out of a parent to n children and returns, in milliseconds, the first
// and the last child's start after the parent's completion event.
func fanOut(b *testing.B, n int) (first, last float64) {
	bb := setup(b)
	qp, qc := newQueue[int](b, bb.client, "parent"), newQueue[int](b, bb.client, "child")
	wf := bb.client.NewWorkflow("fan-out")
	parent := After(qp.AddStep(wf, 0, nil))
	for range n {
		qc.AddStep(wf, 0, &StepOptions{After: parent})
	}
	if err := wf.Enqueue(b.Context()); err != nil {
		b.Fatal(err)
	}
	bb.exec("VACUUM ANALYZE pgqueue_jobs, pgqueue_deps, pgqueue_workflows, pgqueue_workflow_jobs, pgqueue_ended")

	ended := make(chan time.Time, 1)
	wp := must(qp.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{
		OnEvent: func(ev Event) {
			if ev.Kind == EventCompleted {
				ended <- time.Now()
			}
		},
	}))
	var mu sync.Mutex
	var starts []time.Time
	all := make(chan struct{})
	wc := must(qc.NewWorker(func(context.Context, *Job[int]) error {
		mu.Lock()
		defer mu.Unlock()
		if starts = append(starts, time.Now()); len(starts) == n {
			close(all)
		}
		return nil
	}, &WorkerOptions{Concurrency: drainSlots}))
	stop := runWorkers(b, bb.client, wp, wc)
	end := receive(b, ended, time.Minute, "the parent")
	receive(b, all, 30*time.Minute, "every child")
	stop()
	mu.Lock()
	defer mu.Unlock()
	return ms(slices.MinFunc(starts, time.Time.Compare).Sub(end)), ms(slices.MaxFunc(starts, time.Time.Compare).Sub(end))
}

// BenchmarkWorkflowResolve times resolve.sql alone on a batch of N recorded ends, each of a job
// with one dependent: the ends of the current steps of N chains (the shape "chains" of
// BenchmarkWorkflowDrain100k), recorded by completing those jobs with a plain UPDATE, untimed,
// before each timed statement. Tables are analyzed after the enqueue, as a server whose
// autovacuum ran would have them. Run with -benchtime 10x: each iteration takes the chains a
// step further, and the enqueue grows with b.N.
//
// It ran resolve.sql beside a copy without its "j.id = ANY (ARRAY(…))" conditions, which then
// became resolve.sql (bench/README.md, "Workflows").
func BenchmarkWorkflowResolve(b *testing.B) {
	for _, n := range []int{100, 300, 1_000} {
		b.Run(fmt.Sprintf("ends=%d", n), func(b *testing.B) { benchmarkResolve(b, n) })
	}
}

func benchmarkResolve(b *testing.B, n int) {
	bb := setup(b)
	q := newQueue[int](b, bb.client, "resolve")
	wf := bb.client.NewWorkflow("resolve")
	for range n {
		var prev []Dependency
		for range b.N + 1 {
			prev = After(q.AddStep(wf, 0, &StepOptions{After: prev}))
		}
	}
	if err := wf.Enqueue(b.Context()); err != nil {
		b.Fatal(err)
	}
	bb.exec("VACUUM ANALYZE pgqueue_jobs, pgqueue_deps, pgqueue_workflows, pgqueue_workflow_jobs, pgqueue_ended")
	var spent time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		bb.exec(`UPDATE pgqueue_jobs SET status = 'completed', finished_at = now()
		         WHERE ctid = ANY (ARRAY(SELECT ctid FROM pgqueue_jobs WHERE status = 'available'))`)
		b.StartTimer()
		start := time.Now()
		var ended, moved, finished, notified int64
		var counted *int64
		if err := bb.pool.QueryRow(b.Context(), resolveSQL, resolveBatch, maxErrorsKept).
			Scan(&ended, &moved, &finished, &notified, &counted); err != nil {
			b.Fatal(err)
		}
		spent += time.Since(start)
		if ended != int64(n) || moved != int64(n) {
			b.Fatalf("resolve took %d ends and moved %d jobs, want %d and %d", ended, moved, n, n)
		}
	}
	b.ReportMetric(ms(spent)/float64(b.N), "ms/batch")
	b.ReportMetric(float64(b.N*n)/spent.Seconds(), "ends/s")
}

// BenchmarkWorkflowCompleteSetting runs complete.sql on batches of 100 claimed jobs, as the
// completer does, and the same statement without the line that sets pgqueue.completing (for
// the trigger that records ends), the two alternating batch by batch on one schema: what that
// setting, now one call per statement, costs the hot path's settle.
func BenchmarkWorkflowCompleteSetting(b *testing.B) {
	const setting = "          WHERE (SELECT set_config('pgqueue.completing', 'on', true)) = 'on'\n"
	if !strings.Contains(completeSQL, setting) {
		b.Fatal("complete.sql sets pgqueue.completing no longer as this benchmark expects")
	}
	statements := [2]string{completeSQL, strings.Replace(completeSQL, setting, "", 1)}
	rt := benchRuntime(b, 2*b.N*100)
	var spent [2]time.Duration
	b.ResetTimer()
	for range b.N {
		alternate(func(v int) {
			b.StopTimer()
			var ids, tokens [][16]byte
			for _, a := range benchClaim(b, rt) {
				ids, tokens = append(ids, [16]byte(a.id)), append(tokens, a.token)
			}
			b.StartTimer()
			start := time.Now()
			rows, err := rt.c.pool.Query(b.Context(), statements[v], ids, tokens)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for rows.Next() {
				n++
			}
			if rows.Close(); rows.Err() != nil || n != len(ids) {
				b.Fatalf("complete: %d of %d jobs, %v", n, len(ids), rows.Err())
			}
			spent[v] += time.Since(start)
		})
	}
	b.ReportMetric(float64(b.N*100)/spent[0].Seconds(), "with-jobs/s")
	b.ReportMetric(float64(b.N*100)/spent[1].Seconds(), "without-jobs/s")
	b.ReportMetric(spent[1].Seconds()/spent[0].Seconds(), "with/without")
}

// BenchmarkWorkflowStepStatements runs, 250 times, what the database does for 100 jobs of a
// drain, statement by statement and without the rest of a running client: a claim of 100
// (claim.sql), their settle (the completer's batch: complete.sql for plain jobs, complete_keep.sql
// and the end trigger's inserts for steps), and for steps the resolver's batch that releases
// their children (resolve.sql). "plain" holds 30,000 plain jobs, "chains" a workflow of 1,000
// chains of 30 steps (the shape of BenchmarkWorkflowDrain100k's "chains", shorter). It reports
// each statement's time per job: what a step costs the database beside a plain job. (The
// claims take the lowest ids, so 100 chains at a time run to their ends; one resolve in 30 finds
// last steps, which release nothing.)
func BenchmarkWorkflowStepStatements(b *testing.B) {
	for _, flow := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "chains"}[flow], func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				claim, settle, resolve := stepStatements(b, flow)
				b.ReportMetric(claim, "claim-µs/job")
				b.ReportMetric(settle, "settle-µs/job")
				b.ReportMetric(resolve, "resolve-µs/job")
				b.StartTimer()
			}
		})
	}
}

// stepStatements is one run of BenchmarkWorkflowStepStatements; it returns the µs per job of
// the claims, the settles and the resolver's batches.
func stepStatements(b *testing.B, flow bool) (claim, settle, resolve float64) {
	const rounds = 250
	bb := setup(b)
	q := newQueue[int](b, bb.client, "hot")
	if flow {
		wf := bb.client.NewWorkflow("chains")
		for range 1_000 {
			var prev []Dependency
			for range 30 {
				prev = After(q.AddStep(wf, 0, &StepOptions{After: prev}))
			}
		}
		if err := wf.Enqueue(b.Context()); err != nil {
			b.Fatal(err)
		}
	} else if _, err := q.EnqueueMany(b.Context(), make([]int, 30_000), nil); err != nil {
		b.Fatal(err)
	}
	bb.exec("VACUUM ANALYZE pgqueue_jobs, pgqueue_deps, pgqueue_workflows, pgqueue_workflow_jobs, pgqueue_ended")
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 100}))
	rt := newRuntime(bb.client, []*workerSpec{&w.spec})
	var spent [3]time.Duration
	for range rounds {
		t0 := time.Now()
		var batch []outcome
		for _, a := range benchClaim(b, rt) {
			batch = append(batch, outcome{a: a, kind: outcomeDone})
		}
		t1 := time.Now()
		if skipped, err := rt.completer.settle(b.Context(), batch, starts{}, false); err != nil || len(skipped) > 0 {
			b.Fatalf("settle: %d outcomes skipped, %v", len(skipped), err)
		}
		t2 := time.Now()
		if flow {
			var ended, moved, finished, notified int64
			var counted *int64
			if err := rt.c.pool.QueryRow(b.Context(), resolveSQL, resolveBatch, maxErrorsKept).
				Scan(&ended, &moved, &finished, &notified, &counted); err != nil || ended != 100 {
				b.Fatalf("resolve took %d ends, want 100: %v", ended, err)
			}
		}
		spent[0], spent[1], spent[2] = spent[0]+t1.Sub(t0), spent[1]+t2.Sub(t1), spent[2]+time.Since(t2)
	}
	perJob := func(d time.Duration) float64 { return float64(d.Microseconds()) / (rounds * 100) }
	return perJob(spent[0]), perJob(spent[1]), perJob(spent[2])
}

// BenchmarkWorkflowPruneKeptSteps times prune.sql on a queue whose only finished jobs are N
// completed steps of a workflow that has not finished: it deletes none of them, but reads each
// one's index entry and row, and its workflow's, at every poll of the queue (every 2 s by
// default) for as long as the workflow runs.
func BenchmarkWorkflowPruneKeptSteps(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("steps=%d", n), func(b *testing.B) {
			bb := setup(b)
			q := newQueue[int](b, bb.client, "kept")
			wf := bb.client.NewWorkflow("kept")
			for range n {
				q.AddStep(wf, 0, nil)
			}
			if err := wf.Enqueue(b.Context()); err != nil {
				b.Fatal(err)
			}
			bb.exec("UPDATE pgqueue_jobs SET status = 'completed', finished_at = now() - interval '1 minute'")
			bb.exec("VACUUM ANALYZE pgqueue_jobs, pgqueue_workflows")
			zero := int64(0)
			b.ResetTimer()
			for range b.N {
				var queue string
				var moved, deleted int
				err := bb.pool.QueryRow(b.Context(), historyMoveSQL, []string{"kept"}, []*int64{&zero}, []*int64{&zero},
					[]*int64{&zero}, historyBatch, int64(0), nil).Scan(&queue, &moved, &deleted)
				if !errors.Is(err, pgx.ErrNoRows) {
					b.Fatalf("the move took %d jobs and deleted %d, want none: %v", moved, deleted, err)
				}
			}
			b.ReportMetric(ms(b.Elapsed())/float64(b.N), "ms/prune")
		})
	}
}
