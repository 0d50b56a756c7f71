package pgqueue

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks run against the test database (see TestMain), each in a schema of its own:
//
//	go test -run '^$' -bench . -benchtime 1x ./...
//
// They report jobs/s and latencies as custom metrics; compare ratios measured in one run.

func BenchmarkEnqueue(b *testing.B) {
	bb := setup(b)
	q := newQueue[int](b, bb.client, "bench")
	ctx := b.Context()
	start := time.Now()
	for b.Loop() {
		if _, err := q.Enqueue(ctx, 1, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

// BenchmarkEnqueueFromSQL is BenchmarkEnqueue through the SQL function pgqueue_add_job, called
// as an application's own statement would call it: compare the two's jobs/s.
func BenchmarkEnqueueFromSQL(b *testing.B) {
	bb := setup(b)
	ctx := b.Context()
	start := time.Now()
	for b.Loop() {
		if _, err := bb.pool.Exec(ctx, "SELECT pgqueue_add_job('bench', '1')"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

func BenchmarkEnqueueParallel16(b *testing.B) {
	bb := &bundle{t: b, schema: newSchema(b)}
	bb.pool = newPool(b, bb.schema, 20)
	migrate(b, bb.pool)
	bb.client = bb.newClient()
	q := newQueue[int](b, bb.client, "bench")
	ctx := b.Context()
	b.SetParallelism(max(1, 16/procs()))
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := q.Enqueue(ctx, 1, nil); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "jobs/s")
}

func BenchmarkEnqueueMany1000(b *testing.B) {
	bb := setup(b)
	q := newQueue[int](b, bb.client, "bench")
	batch := make([]int, 1000)
	ctx := b.Context()
	start := time.Now()
	for b.Loop() {
		if _, err := q.EnqueueMany(ctx, batch, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(batch))/time.Since(start).Seconds(), "jobs/s")
}

// BenchmarkDrain100k measures how fast one worker at concurrency 100 works off 100,000 no-op
// jobs inserted beforehand, from worker start until every job is settled.
func BenchmarkDrain100k(b *testing.B) { benchmarkDrain(b, 0, 1) }

// BenchmarkDrain100kBeside1MScheduled is BenchmarkDrain100k with a million jobs scheduled for
// tomorrow in the same queue: they must cost the claim nothing.
func BenchmarkDrain100kBeside1MScheduled(b *testing.B) { benchmarkDrain(b, 1_000_000, 1) }

// BenchmarkDrain100kOver20Queues is BenchmarkDrain100k with the jobs and the 100 slots spread
// evenly over 20 queues (5 slots each), all served by one Client.Run.
func BenchmarkDrain100kOver20Queues(b *testing.B) { benchmarkDrain(b, 0, 20) }

func benchmarkDrain(b *testing.B, scheduled, queues int) {
	const jobs, slots = 100_000, 100
	for b.Loop() {
		b.StopTimer()
		bb := setup(b)
		drained := make(chan struct{})
		var done atomic.Int64
		opts := &WorkerOptions{Concurrency: slots / queues, OnEvent: func(ev Event) {
			if ev.Kind == EventCompleted && done.Add(1) == jobs {
				close(drained)
			}
		}}
		var workers []AnyWorker
		for i := range queues {
			q := newQueue[int](b, bb.client, fmt.Sprintf("drain-%d", i))
			fillDrain(b, q, scheduled/queues, jobs/queues)
			workers = append(workers, must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, opts)))
		}
		bb.exec("VACUUM ANALYZE pgqueue_jobs")
		b.StartTimer()
		start := time.Now()
		stop := runWorkers(b, bb.client, workers...)
		<-drained
		elapsed := time.Since(start)
		b.StopTimer()
		stop()
		if n := bb.count("status <> 'scheduled'"); n != 0 {
			b.Fatalf("%d jobs left", n)
		}
		b.ReportMetric(jobs/elapsed.Seconds(), "jobs/s")
		b.StartTimer()
	}
}

// BenchmarkDrain100kThreeClients drains 10⁵ jobs of one queue with three clients of 34 slots
// each, as three processes would: without limits, and with a MaxRunning of 10,000 that is never
// reached, so that their claims of the queue take turns under its claim lock (docs/flow-control.md,
// "How it works"). Compare the two sub-benchmarks' jobs/s.
func BenchmarkDrain100kThreeClients(b *testing.B) {
	benchmarkDrainLimits(b, 3, limitsCase{"none", Limits{}}, limitsCase{"MaxRunning", Limits{MaxRunning: 10_000}})
}

// BenchmarkDrain100kAtLimit drains 10⁵ no-op jobs of one queue with one client of 101 slots:
// without limits, and with a MaxRunning of 100 and of 50, which the drain reaches all the time.
// A job holds its place from its claim to its settle, so at the limit the rate is MaxRunning
// divided by that time (docs/flow-control.md, "At the limit").
func BenchmarkDrain100kAtLimit(b *testing.B) {
	benchmarkDrainLimits(b, 1, limitsCase{"none", Limits{}}, limitsCase{"MaxRunning100", Limits{MaxRunning: 100}},
		limitsCase{"MaxRunning50", Limits{MaxRunning: 50}})
}

// limitsCase is a sub-benchmark of benchmarkDrainLimits: its name and the queue's limits.
type limitsCase struct {
	name   string
	limits Limits
}

// benchmarkDrainLimits runs benchmarkDrainClients with the limits of each case, in turn, as
// sub-benchmarks.
func benchmarkDrainLimits(b *testing.B, clients int, cases ...limitsCase) {
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) { benchmarkDrainClients(b, clients, c.limits) })
	}
}

func benchmarkDrainClients(b *testing.B, clients int, limits Limits) {
	const jobs, slots = 100_000, 100
	for b.Loop() {
		b.StopTimer()
		bb := setup(b)
		q := newQueue[int](b, bb.client, "drain")
		if err := q.SetLimits(b.Context(), limits); err != nil {
			b.Fatal(err)
		}
		fillDrain(b, q, 0, jobs)
		bb.exec("VACUUM ANALYZE pgqueue_jobs")
		drained := make(chan struct{})
		var done atomic.Int64
		opts := &WorkerOptions{Concurrency: slots/clients + 1, OnEvent: func(ev Event) {
			if ev.Kind == EventCompleted && done.Add(1) == jobs {
				close(drained)
			}
		}}
		var stops []func()
		b.StartTimer()
		start := time.Now()
		for range clients {
			c := bb.newClient()
			qc := newQueue[int](b, c, "drain")
			stops = append(stops, runWorkers(b, c, must(qc.NewWorker(func(context.Context, *Job[int]) error { return nil }, opts))))
		}
		<-drained
		elapsed := time.Since(start)
		b.StopTimer()
		for _, stop := range stops {
			stop()
		}
		b.ReportMetric(jobs/elapsed.Seconds(), "jobs/s")
		b.StartTimer()
	}
}

// fillDrain enqueues scheduled jobs due tomorrow, then available ones, in batches of 10,000.
func fillDrain(b *testing.B, q *Queue[int], scheduled, available int) {
	for _, part := range []struct {
		n    int
		opts *EnqueueOptions
	}{{scheduled, &EnqueueOptions{Delay: 24 * time.Hour}}, {available, nil}} {
		for left := part.n; left > 0; left -= 10_000 {
			if _, err := q.EnqueueMany(b.Context(), make([]int, min(left, 10_000)), part.opts); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkWakeLatency enqueues one job at a time, at about 200 a second, to an idle worker
// that never polls, and reports the time from the enqueue call to the handler's start.
func BenchmarkWakeLatency(b *testing.B) {
	bb := setup(b)
	q := newQueue[int64](b, bb.client, "wake")
	started := make(chan time.Duration, 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int64]) error {
		started <- time.Duration(time.Now().UnixNano() - job.Payload)
		return nil
	}, &WorkerOptions{PollInterval: time.Hour}))
	startWorker(b, w)
	waitFor(b, 30*time.Second, "the listener", func() bool { return bb.client.listener.pid.Load() != 0 })
	time.Sleep(50 * time.Millisecond)

	var lat []time.Duration
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for b.Loop() {
		<-tick.C
		if _, err := q.Enqueue(b.Context(), time.Now().UnixNano(), nil); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, receive(b, started, 10*time.Second, "the job"))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

func procs() int { return goruntime.GOMAXPROCS(0) }

// BenchmarkDueLatency enqueues jobs delayed by 50 ms, one every 5 ms, to a worker that never
// polls, and reports how long after its run_at each job's handler started (by the database
// clock for run_at, read back per job).
func BenchmarkDueLatency(b *testing.B) {
	bb := setup(b)
	q := newQueue[int](b, bb.client, "due")
	started := make(chan time.Time, 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		started <- time.Now()
		return nil
	}, &WorkerOptions{PollInterval: time.Hour}))
	startWorker(b, w)
	waitFor(b, 30*time.Second, "the listener", func() bool { return bb.client.listener.pid.Load() != 0 })

	const delay = 50 * time.Millisecond
	var lat []time.Duration
	for b.Loop() {
		before := time.Now()
		if _, err := q.Enqueue(b.Context(), 1, &EnqueueOptions{Delay: delay}); err != nil {
			b.Fatal(err)
		}
		// run_at is now()+delay at the statement; the statement began after before.
		at := receive(b, started, 10*time.Second, "the job")
		lat = append(lat, at.Sub(before.Add(delay)))
	}
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// fillOperate1M enqueues the jobs of BenchmarkOperate1M into q: 900,000 available at three
// priorities, then 100,000 scheduled an hour ahead.
func fillOperate1M(b testing.TB, q *Queue[int]) {
	b.Helper()
	batch := make([]int, 10_000)
	for i := range 90 {
		if _, err := q.EnqueueMany(b.Context(), batch, &EnqueueOptions{Priority: i % 3}); err != nil {
			b.Fatal(err)
		}
	}
	for range 10 {
		if _, err := q.EnqueueMany(b.Context(), batch, &EnqueueOptions{Delay: time.Hour}); err != nil {
			b.Fatal(err)
		}
	}
}

// halfWayPage walks q's listing 500,000 jobs down and returns list options of 100 jobs whose
// cursor points there, with the page they list.
func halfWayPage(b testing.TB, q *Queue[int]) (*ListOptions, *JobPage[int]) {
	b.Helper()
	deep := &ListOptions{Limit: 10_000}
	for range 50 {
		page, err := q.Jobs(b.Context(), deep)
		if err != nil {
			b.Fatal(err)
		}
		deep.Cursor = page.Next
	}
	deep.Limit = 100
	mid, err := q.Jobs(b.Context(), deep)
	if err != nil || len(mid.Jobs) == 0 {
		b.Fatal(err)
	}
	return deep, mid
}

// BenchmarkOperate1M measures what operators call on a queue of 10⁶ jobs (900,000 available at
// three priorities, 100,000 scheduled): Stats, Client.Stats, a first listing page, a page deep
// in the queue, and Job with its place.
func BenchmarkOperate1M(b *testing.B) {
	bb := setup(b)
	q := newQueue[int](b, bb.client, "big")
	fillOperate1M(b, q)
	bb.exec("VACUUM ANALYZE pgqueue_jobs")
	deep, mid := halfWayPage(b, q)
	benchmarkStats(b, q, bb.client)
	b.Run("FirstPage100", func(b *testing.B) {
		for b.Loop() {
			if _, err := q.Jobs(b.Context(), &ListOptions{Limit: 100}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PageAt500k", func(b *testing.B) {
		for b.Loop() {
			if _, err := q.Jobs(b.Context(), deep); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("JobWithPlace", func(b *testing.B) {
		id := mid.Jobs[0].ID
		for b.Loop() {
			if _, err := q.Job(b.Context(), id); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkStats measures Queue.Stats and Client.Stats on a queue of 10³, 10⁶ and 10⁷ jobs (90 %
// available at three priorities, 10 % scheduled; up to 1,000 of the available ones running)
// beside four small queues, with 1,000 count deltas not yet folded in (what a busy second
// leaves). The rows are written by SQL, 10⁶ per
// statement; 10⁷ take a few minutes to write and about 3 GB of disk.
func BenchmarkStats(b *testing.B) {
	for _, size := range []int{1_000, 1_000_000, 10_000_000} {
		b.Run(fmt.Sprintf("jobs=%d", size), func(b *testing.B) {
			bb := setup(b)
			q := newQueue[int](b, bb.client, "big")
			for done := 0; done < size; done += 1_000_000 {
				bb.exec(`INSERT INTO pgqueue_jobs (id, queue, status, priority, payload, run_at)
					SELECT gen_random_uuid(), 'big', CASE WHEN g % 10 = 0 THEN 'scheduled' ELSE 'available' END,
					       g % 3, '0', CASE WHEN g % 10 = 0 THEN now() + interval '1 hour' ELSE now() END
					FROM generate_series(1, $1::int) AS g`, min(size-done, 1_000_000))
			}
			for i := range 4 {
				small := newQueue[int](b, bb.client, fmt.Sprint("small-", i))
				if _, err := small.EnqueueMany(b.Context(), make([]int, 100), nil); err != nil {
					b.Fatal(err)
				}
			}
			// Up to 1,000 of them running, which Stats counts one by one (stats.sql).
			bb.exec(`UPDATE pgqueue_jobs SET status = 'running', lock_token = gen_random_uuid(),
				lock_until = now() + interval '1 hour', attempt = 1
				WHERE ctid IN (SELECT ctid FROM pgqueue_jobs WHERE queue = 'big' AND status = 'available' LIMIT 1000)`)
			for { // the rows written by hand were counted one by one: fold them all
				folded, err := foldCounts(b.Context(), bb.client)
				if err != nil {
					b.Fatal(err)
				}
				if folded < countsFoldBatch {
					break
				}
			}
			bb.exec("VACUUM ANALYZE")
			for i := range 1_000 {
				if _, err := newQueue[int](b, bb.client, fmt.Sprint("small-", i%4)).Enqueue(b.Context(), i, nil); err != nil {
					b.Fatal(err)
				}
			}
			benchmarkStats(b, q, bb.client)
		})
	}
}

// benchmarkStats runs Queue.Stats of q and Client.Stats of c as sub-benchmarks.
func benchmarkStats(b *testing.B, q *Queue[int], c *Client) {
	b.Run("QueueStats", func(b *testing.B) {
		for b.Loop() {
			if _, err := q.Stats(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ClientStats", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Stats(b.Context()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
