package pgqueue

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	ossignal "os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// BenchmarkProcesses is the curve of one Postgres as worker processes are added: 1, 2, 4 and 8
// worker processes (real OS processes of 100 slots each, spread over four worker hosts: network
// namespaces, so it needs root) drain 200,000 no-op jobs of one queue on a private server at
// Postgres's defaults (autovacuum on, synchronous commit) with pg_stat_statements loaded. Each
// process works one queue that they all work (queues=one) or a queue of its own (queues=own: how
// much of what more processes cost is their claims meeting at the head of one queue). Each
// sub-benchmark reports
//
//   - jobs/s: the drain, from the queue's resume (every process listening) until no job of it is
//     left;
//   - claim-p50-ms, claim-p99-ms: what a claim costs at that load: a probe in the benchmark's
//     process claims 10 jobs of another queue every 10 ms while the processes drain;
//   - busy-cores, pg-cores, worker-cores: the machine's CPU in use over the drain, in cores, and
//     the part of it Postgres's processes and the worker processes took;
//
// and logs where the server's time went: the statements that took most of it (pg_stat_statements)
// and what its busy backends were doing, sampled every 10 ms (pg_stat_activity's wait events; on
// CPU when none). Compare the sub-benchmarks with each other; bench/README.md has a run.
//
//	go test -run '^$' -bench BenchmarkProcesses -benchtime 1x -count 3 -timeout 30m .
func BenchmarkProcesses(b *testing.B) {
	pg := startPostgres(b)
	pg.configure("shared_preload_libraries = 'pg_stat_statements'", "max_connections = 200")
	hosts := make([]*workerHost, 4)
	for i := range hosts {
		hosts[i] = newWorkerHost(b, i)
	}
	pg.listenFor(hosts...)
	pool := pg.newPool(20)
	migrate(b, pool)
	mustExec(b, pool, "CREATE EXTENSION pg_stat_statements")
	client, err := NewClient(pool, &Config{Logger: testLogger(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = client.Close() })
	// A first drain of a fresh server ran at 0.7 of the next ones: one drain first, not reported.
	runCurve(b, pg, hosts, client, 1, false)
	for _, procs := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) {
			for _, queues := range []string{"one", "own"} {
				if procs == 1 && queues == "own" {
					continue // the same as one
				}
				b.Run("queues="+queues, func(b *testing.B) {
					benchmarkCurve(b, pg, hosts, client, procs, queues == "own")
				})
			}
		})
	}
}

// benchmarkCurve runs one sub-benchmark of BenchmarkProcesses.
func benchmarkCurve(b *testing.B, pg *pgInstance, hosts []*workerHost, client *Client, procs int, own bool) {
	for b.Loop() {
		b.StopTimer()
		r := runCurve(b, pg, hosts, client, procs, own)
		b.StartTimer()
		b.ReportMetric(r.rate, "jobs/s")
		b.ReportMetric(r.claims[len(r.claims)/2], "claim-p50-ms")
		b.ReportMetric(r.claims[len(r.claims)*99/100], "claim-p99-ms")
		b.ReportMetric(r.busy, "busy-cores")
		b.ReportMetric(r.pg, "pg-cores")
		b.ReportMetric(r.workers, "worker-cores")
		b.Log(r.where)
	}
}

const (
	curveJobs  = 200_000
	curveSlots = 100
)

// curveRun is what one drain of BenchmarkProcesses measured.
type curveRun struct {
	rate              float64   // jobs/s
	claims            []float64 // the probe's claims, ms, sorted
	busy, pg, workers float64   // cores
	where             string    // the server's time: statements and wait events
}

// runCurve drains curveJobs jobs with procs worker processes, spread over hosts: of one queue
// that they all work, or (own) of a queue per process.
func runCurve(b *testing.B, pg *pgInstance, hosts []*workerHost, c *Client, procs int, own bool) curveRun {
	ctx := b.Context()
	queues, names := fillCurve(b, c, procs, own)
	probe := newQueue[int](b, c, "probe")
	for range 5 {
		must(probe.EnqueueMany(ctx, make([]int, 10_000), nil))
	}
	mustExec(b, c.pool, "VACUUM ANALYZE pgqueue_jobs")
	out := &chaosOutput{}
	workers := startCurveWorkers(b, pg, hosts, out, procs, names)
	mustExec(b, c.pool, "SELECT pg_stat_statements_reset()")
	var pids []int
	for _, w := range workers {
		pids = append(pids, w.pid)
	}
	cpu := startCPUWatch(b, pg, pids)
	sctx, stopSampling := context.WithCancel(ctx)
	var sampled sync.WaitGroup
	var claims []float64
	waits := map[string]int{}
	var samples int
	sampled.Go(func() { claims = probeClaims(sctx, b, c, probe) })
	sampled.Go(func() { samples = sampleWaits(sctx, b, c.pool, waits) })

	start := time.Now()
	for _, q := range queues {
		if err := q.Resume(ctx); err != nil {
			b.Fatal(err)
		}
	}
	waitDrained(b, c, names)
	elapsed := time.Since(start)
	stopSampling()
	sampled.Wait()
	r := curveRun{rate: curveJobs / elapsed.Seconds(), claims: claims}
	r.busy, r.pg, r.workers = cpu.cores()
	ran := 0
	for _, w := range workers {
		w.stop(b)
		ran += out.completedBy(w.pid)
	}
	if ran != curveJobs {
		b.Fatalf("the worker processes ran their handler %d times, want %d: once a job", ran, curveJobs)
	}
	mustExec(b, c.pool, "DELETE FROM pgqueue_jobs WHERE queue = 'probe'")
	slices.Sort(r.claims)
	// A benchmark's log keeps its first 10 lines.
	r.where = fmt.Sprintf("%d processes: %.0f jobs/s\n%s%s", procs, r.rate,
		waitShares(waits, samples), topStatements(b, c.pool, elapsed))
	return r
}

// fillCurve enqueues curveJobs jobs, paused: in one queue, or (own) spread over one queue per
// process. It returns the queues and their names.
func fillCurve(b *testing.B, c *Client, procs int, own bool) (queues []*Queue[int], names []string) {
	for i := range procs {
		if i == 0 || own {
			names = append(names, fmt.Sprintf("curve-%d", i))
			queues = append(queues, newQueue[int](b, c, names[i]))
		}
	}
	for _, q := range queues {
		if err := q.Pause(b.Context()); err != nil {
			b.Fatal(err)
		}
		for left := curveJobs / len(queues); left > 0; left -= 10_000 {
			must(q.EnqueueMany(b.Context(), make([]int, min(left, 10_000)), nil))
		}
	}
	return queues, names
}

// startCurveWorkers starts procs worker processes, process i on host i modulo the hosts and on
// queue i modulo the names, and waits until each listens.
func startCurveWorkers(b *testing.B, pg *pgInstance, hosts []*workerHost, out *chaosOutput, procs int, names []string) []*chaosProc {
	var workers []*chaosProc
	for i := range procs {
		h := hosts[i%len(hosts)]
		dsn := fmt.Sprintf("postgres://postgres@%s:%d/postgres?sslmode=disable", h.rootIP, pg.port)
		workers = append(workers, startHelperProcIn(b, out, "curve", []string{"ip", "netns", "exec", h.ns},
			helperEnv+"=curve", "PGQUEUE_TEST_DSN="+dsn, "PGQUEUE_TEST_SCHEMA=public",
			"PGQUEUE_TEST_QUEUE="+names[i%len(names)]))
	}
	waitFor(b, time.Minute, "every worker process to listen", func() bool { return out.count("ready") == procs })
	return workers
}

// waitDrained waits until no job of the queues named is left, polling every 10 ms.
func waitDrained(b *testing.B, c *Client, names []string) {
	start := time.Now()
	for {
		var left bool
		err := c.pool.QueryRow(b.Context(), "SELECT EXISTS (SELECT 1 FROM pgqueue_jobs WHERE queue = ANY ($1))", names).Scan(&left)
		if err == nil && !left {
			return
		}
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("the drain did not end in 5 minutes (last look: %v)", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// probeClaims claims 10 jobs of q every 10 ms until ctx ends and returns how long each claim
// took, in milliseconds. The jobs it claims stay running; the caller deletes them.
func probeClaims(ctx context.Context, b *testing.B, c *Client, q *Queue[int]) []float64 {
	w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &WorkerOptions{Concurrency: 10}))
	rt := newRuntime(c, []*workerSpec{&w.spec})
	wants := []claimWant{{q: rt.queues[0], limit: 10}}
	var out []float64
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return out
		case <-tick.C:
		}
		start := time.Now()
		claimed, _, _, err := claimOnce(ctx, c, wants)
		if ctx.Err() != nil {
			return out
		}
		if err != nil {
			b.Errorf("probe claim: %v", err)
			return out
		}
		if len(claimed[0]) != 10 {
			b.Errorf("probe claim: %d jobs, want 10", len(claimed[0]))
			return out
		}
		out = append(out, ms(time.Since(start)))
	}
}

// sampleWaits counts, every 10 ms until ctx ends, what the server's busy client backends (but
// its own) are doing: their wait event, or "CPU" when they wait for none. It returns how many
// samples it took.
func sampleWaits(ctx context.Context, b *testing.B, pool *pgxpool.Pool, waits map[string]int) int {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		b.Error(err)
		return 0
	}
	defer conn.Release()
	samples := 0
	for ctx.Err() == nil {
		rows, err := conn.Query(ctx, `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), query
			FROM pg_stat_activity WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid()`)
		if err != nil {
			break
		}
		for rows.Next() {
			var w, query string
			if rows.Scan(&w, &query) == nil {
				waits[statementName(nil, query)+" "+w]++
			}
		}
		rows.Close()
		samples++
		time.Sleep(10 * time.Millisecond)
	}
	return samples
}

// waitShares says how many backends were busy on average and on what, the most frequent first.
func waitShares(waits map[string]int, samples int) string {
	if samples == 0 {
		return "no wait sample\n"
	}
	keys := make([]string, 0, len(waits))
	total := 0
	for k, n := range waits {
		keys = append(keys, k)
		total += n
	}
	slices.SortFunc(keys, func(a, b string) int { return waits[b] - waits[a] })
	var s strings.Builder
	fmt.Fprintf(&s, "busy backends, on average over %d samples: %.2f", samples, float64(total)/float64(samples))
	for _, k := range keys[:min(len(keys), 12)] {
		fmt.Fprintf(&s, "; %s %.2f", k, float64(waits[k])/float64(samples))
	}
	return s.String() + "\n"
}

// topStatements lists the statements that took most of the server's time since the last reset,
// named by their file in sql/, with the share of the drain's time each kept one backend busy.
func topStatements(b *testing.B, pool *pgxpool.Pool, elapsed time.Duration) string {
	names := map[string]string{}
	files, _ := fs.Glob(queryFiles, "sql/*.sql")
	for _, f := range files {
		text, _ := fs.ReadFile(queryFiles, f)
		names[strings.TrimSpace(string(text))] = strings.TrimSuffix(filepath.Base(f), ".sql")
	}
	rows, err := pool.Query(b.Context(), `SELECT query, calls, rows, total_exec_time FROM pg_stat_statements
		ORDER BY total_exec_time DESC LIMIT 6`)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var s strings.Builder
	s.WriteString("statements by time (backend-seconds per second of drain, calls, rows):\n")
	for rows.Next() {
		var query string
		var calls, nrows int64
		var total float64
		if err := rows.Scan(&query, &calls, &nrows, &total); err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(&s, "  %-20s %.3f  %d calls  %d rows\n", statementName(names, query), total/1e3/elapsed.Seconds(), calls, nrows)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return s.String()
}

// statementName names a statement by its file in sql/, found in names (its text: file name), or
// else by its first comment ("-- claim: ..."), as the files begin and statements put together from
// parts (complete.go) too; else by its first 70 characters.
func statementName(names map[string]string, query string) string {
	if name, ok := names[strings.TrimSpace(query)]; ok {
		return name
	}
	if rest, ok := strings.CutPrefix(query, "-- "); ok {
		if name, _, ok := strings.Cut(rest, ":"); ok && !strings.Contains(name, " ") {
			return name
		}
	}
	name := strings.Join(strings.Fields(query), " ")
	return name[:min(len(name), 70)]
}

// cpuWatch measures the machine's CPU in use from its start, and the share of it that the
// server's processes and the worker processes took.
type cpuWatch struct {
	b        *testing.B
	pg       *pgInstance
	workers  []int
	start    time.Time
	machine0 uint64
	procs0   map[int]uint64
}

func startCPUWatch(b *testing.B, pg *pgInstance, workers []int) *cpuWatch {
	return &cpuWatch{b: b, pg: pg, workers: workers, start: time.Now(), machine0: machineBusy(b), procs0: procTicks(b)}
}

// procTicks reads every process's CPU time, in clock ticks.
func procTicks(b *testing.B) map[int]uint64 {
	out := map[int]uint64{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, ticks, ok := procStat(pid); ok {
			out[pid] = ticks
		}
	}
	return out
}

// cores returns the machine's busy cores since the start, and those of the server and the
// worker processes.
func (w *cpuWatch) cores() (busy, pg, workers float64) {
	secs := time.Since(w.start).Seconds() * 100 // clock ticks: USER_HZ is 100 on Linux
	now := procTicks(w.b)
	postmaster := w.pg.postmasterPID()
	var pgTicks, workerTicks uint64
	for pid, ticks := range now {
		d := ticks - w.procs0[pid]
		if ppid, _, _ := procStat(pid); pid == postmaster || ppid == postmaster {
			pgTicks += d
		}
		if slices.Contains(w.workers, pid) {
			workerTicks += d
		}
	}
	return float64(machineBusy(w.b)-w.machine0) / secs, float64(pgTicks) / secs, float64(workerTicks) / secs
}

// procStat reads a process's parent and its CPU time (user and system), in clock ticks.
func procStat(pid int) (ppid int, ticks uint64, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// After "pid (comm) ": state, ppid, ... utime is the 14th field of the line, stime the 15th.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	utime, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	return ppid, utime + stime, true
}

// machineBusy reads the machine's busy CPU time from /proc/stat's first line (user, nice, system,
// irq, softirq, steal), in clock ticks.
func machineBusy(b *testing.B) uint64 {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := bytes.Cut(stat, []byte("\n"))
	f := strings.Fields(string(line))
	var busy uint64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		if i < len(f) {
			n, _ := strconv.ParseUint(f[i], 10, 64)
			busy += n
		}
	}
	return busy
}

// curveMain runs a worker process of BenchmarkProcesses: 100 slots on queue PGQUEUE_TEST_QUEUE of
// schema PGQUEUE_TEST_SCHEMA, a no-op handler. It prints "ready" once its client listens, and
// "completed <n>" when stopped, n being how many times its handler ran.
func curveMain() int {
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := helperPool(ctx, RuntimeConns+2, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	client, err := NewClient(pool, &Config{ID: fmt.Sprintf("curve-%d", os.Getpid())})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer client.Close()
	var ran atomic.Int64
	q := must(NewQueue[int](client, os.Getenv("PGQUEUE_TEST_QUEUE")))
	w := must(q.NewWorker(func(context.Context, *Job[int]) error {
		ran.Add(1)
		return nil
	}, &WorkerOptions{Concurrency: curveSlots}))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for client.listener.pid.Load() == 0 {
		select {
		case err := <-done:
			fmt.Fprintln(os.Stderr, "run:", err)
			return 1
		case <-time.After(5 * time.Millisecond):
		}
	}
	fmt.Println("ready")
	if err := <-done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("completed %d\n", ran.Load())
	return 0
}
