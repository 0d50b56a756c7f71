package pgqueue

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// The failover tests run pgqueue on a pg_auto_failover cluster (pgaf_test.go) under the fault
// suite's workload — worker processes, one of them killed and replaced at each round and the
// other frozen through the failover, the listeners' connections cut, a steady stream of
// enqueues — and take the primary down while it
// runs: the monitor promotes the secondary by itself, and the application, which knows only the
// multi-host URL with target_session_attrs=read-write, goes on. Jobs that record their run in
// the transaction that completes them (Job.CompleteTx) check fencing: each records one run,
// however often it was attempted.
//
// pg_auto_failover keeps a primary with one standby writing when that standby is gone or
// unhealthy: it stops waiting for it (wait_primary), and what it acknowledges then is on the
// primary alone. A watch of the nodes' roles (watchRoles) tells those jobs from the others: no
// job acknowledged while the primary replicated synchronously may be lost.
//
// In CI: one failover of a synchronous cluster (the primary's host killed: keeper, postmaster and
// backends at once) and one planned switchover. With PGQUEUE_HA=long, also failovers by
// pg_ctl stop -m immediate and a second round of each, and an asynchronous cluster, where
// acknowledged jobs can be lost: how many is measured, not asserted.

// haLong reports whether the long failover variants run (PGQUEUE_HA=long).
func haLong(t *testing.T) bool {
	switch v := os.Getenv("PGQUEUE_HA"); v {
	case "":
		return false
	case "long":
		return true
	default:
		t.Fatalf("PGQUEUE_HA=%q: want long, or leave it unset", v)
		return false
	}
}

// A synchronous cluster: no acknowledged job is lost through failovers and switchovers.
func TestFailover(t *testing.T) {
	t.Parallel()
	rounds := []string{"kill", "switchover"}
	if haLong(t) {
		rounds = []string{"kill", "switchover", "immediate", "kill", "switchover", "immediate"}
	}
	r := newFailoverRun(t, startHACluster(t))
	for _, round := range rounds {
		r.round(round)
	}
	r.finish(true)
}

// An asynchronous cluster (PGQUEUE_HA=long): the jobs acknowledged but not yet replicated when
// the primary died are lost; the test counts them and checks everything else.
func TestFailoverAsync(t *testing.T) {
	if !haLong(t) {
		t.Skip("the asynchronous failover runs with PGQUEUE_HA=long (docs/high-availability.md)")
	}
	t.Parallel()
	c := startHACluster(t)
	c.makeAsync()
	r := newFailoverRun(t, c)
	for _, round := range []string{"kill", "kill", "immediate"} {
		r.round(round)
	}
	r.finish(false)
}

// failoverRun is the workload of a failover test and what it saw.
type failoverRun struct {
	t        *testing.T
	c        *haCluster
	b        *bundle
	out      *chaosOutput
	procs    []*chaosProc
	set      chaosSettings
	producer *restartProducer[chaosJob]
	stop     func()
	probe    *Queue[int]
	probed   chan time.Time
	changes  <-chan Change
	faults   int // kills of worker processes and of primaries
	roles    *roleLog
	cli      string         // the pgqueue command
	ui       *dashboardProc // its dashboard, on the cluster's URL
}

// failoverProcs is how many worker processes work the queue, with failoverConcurrency slots each.
const (
	failoverProcs       = 2
	failoverConcurrency = 10
)

func newFailoverRun(t *testing.T, c *haCluster) *failoverRun {
	r := &failoverRun{t: t, c: c, out: &chaosOutput{}, probed: make(chan time.Time, 10)}
	dsn := c.dsn()
	schema := testenv.NewSchema(t, dsn)
	pool := testenv.Pool(t, dsn, schema, 20)
	migrate(t, pool)
	// Connection errors are expected by the hundred here: log warnings and up only.
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := NewClient(pool, &Config{Logger: log, Retention: Retention{Completed: KeepForever}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	r.b = &bundle{t: t, schema: schema, pool: pool, client: client}
	createChaosRuns(r.b)
	r.cli = buildCommand(t)
	r.ui = startDashboard(t, r.cli, dsn, schema)
	r.set = chaosSettings{concurrency: failoverConcurrency, lock: 5 * time.Second, poll: time.Second,
		work: 20 * time.Millisecond, keep: true, dsn: dsn}
	for range failoverProcs {
		r.procs = append(r.procs, startChaos(t, r.b, r.out, r.set))
	}
	// The probe: a worker that never polls, woken only by the listener, and a watch of its queue.
	r.probe = newQueue[int](t, client, "probe")
	stopProbe := startWorker(t, must(r.probe.NewWorker(func(ctx context.Context, job *Job[int]) error {
		r.probed <- time.Now()
		return nil
	}, &WorkerOptions{PollInterval: noPoll})))
	t.Cleanup(stopProbe)
	waitListening(t, client, 1)
	if r.changes, err = r.probe.Watch(t.Context()); err != nil {
		t.Fatal(err)
	}
	q := newQueue[chaosJob](t, client, "chaos")
	r.producer = newRestartProducer(func(seq int64) chaosJob { return chaosJob{Tx: seq%2 == 0} })
	ctx, cancel := context.WithCancel(context.Background())
	var producing sync.WaitGroup
	producing.Go(func() { r.producer.run(ctx, q, 2*time.Millisecond) })
	r.stop = func() { cancel(); producing.Wait() }
	t.Cleanup(r.stop)
	r.roles = watchRoles(t, c)
	return r
}

// roleLog is what watchRoles saw: the times during which some node was a primary that replicated
// asynchronously (pg_auto_failover's wait_primary: its standby gone or unhealthy).
type roleLog struct {
	mu    sync.Mutex
	async []timeSpan // ended spans, and the open one with a zero to
}

type timeSpan struct{ from, to time.Time }

// asyncDuring reports whether a primary replicated asynchronously at some moment from from to to,
// with the watch's resolution (a poll every 100 ms, each taking up to a second) as a margin.
func (l *roleLog) asyncDuring(from, to time.Time) bool {
	const margin = 1200 * time.Millisecond
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.async {
		end := s.to
		if end.IsZero() {
			end = time.Now()
		}
		if !from.After(end.Add(margin)) && !to.Before(s.from.Add(-margin)) {
			return true
		}
	}
	return false
}

// watchRoles logs, until the test ends, every change of what each node of c is: down, a
// standby, or a primary with its synchronous standbys; and keeps the spans during which a primary
// replicated asynchronously, to tell the jobs such a primary acknowledged.
func watchRoles(t *testing.T, c *haCluster) *roleLog {
	log := &roleLog{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		last := map[string]string{}
		for ctx.Err() == nil {
			for _, n := range c.nodes {
				role := nodeRole(n)
				if role == last[n.name] {
					continue
				}
				const async = "primary, asynchronous"
				now := time.Now()
				log.mu.Lock()
				if role == async {
					log.async = append(log.async, timeSpan{from: now})
				} else if last[n.name] == async {
					log.async[len(log.async)-1].to = now
				}
				log.mu.Unlock()
				last[n.name] = role
				t.Logf("ha role %s: %s", n.name, role)
			}
			sleepCtx(ctx, 100*time.Millisecond)
		}
	})
	return log
}

// nodeRole says what node n is: "down", "standby", or "primary" with its synchronous_standby_names.
func nodeRole(n *haNode) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, n.nodeDSN())
	if err != nil {
		return "down"
	}
	defer conn.Close(ctx)
	var recovery bool
	var ro, names string
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), current_setting('transaction_read_only'),
			current_setting('synchronous_standby_names')`).Scan(&recovery, &ro, &names); err != nil {
		return "down"
	}
	switch {
	case recovery:
		return "standby"
	case ro == "on":
		return "primary, read-only"
	case names == "":
		return "primary, asynchronous"
	}
	return "primary, synchronous: " + names
}

// ran returns how many distinct jobs have recorded a run, or -1 while no primary answers.
func (r *failoverRun) ran() int {
	var n int
	if err := r.b.pool.QueryRow(context.Background(), "SELECT count(DISTINCT job_id) FROM chaos_runs").Scan(&n); err != nil {
		return -1
	}
	return n
}

// round runs one round: work under way, a worker process killed and replaced, the listeners'
// connections cut, the other worker process frozen (SIGSTOP) until the listener is back on the new
// primary, then the primary taken down (kill: its host dies; immediate: pg_ctl stop
// -m immediate after its keeper is killed) or a switchover, and the old primary back as a
// secondary.
func (r *failoverRun) round(kind string) {
	t := r.t
	base := r.ran()
	waitFor(t, 60*time.Second, "jobs to run before the "+kind, func() bool { return r.ran() >= base+200 })
	r.killWorker()
	r.cutListeners()
	frozen := r.procs[0] // the process that has run the longest: it holds jobs
	frozen.signal(t, syscall.SIGSTOP)
	r.faults++

	old := r.c.primary(10 * time.Second)
	sessions := r.b.client.listener.sessions.Load()
	_, refusedBefore := r.producer.counts()
	start := time.Now()
	if kind == "switchover" {
		if out, err := r.c.autoctl("perform", "switchover", "--pgdata", r.c.monitor.data); err != nil {
			t.Fatalf("pg_autoctl perform switchover: %v\n%s\n%s", err, out, r.c.describe())
		}
	} else {
		r.c.kill(old, kind)
		start = time.Now() // the primary is gone (pg_ctl stop -m immediate takes a moment)
	}
	r.faults++ // a switchover too ends the sessions of jobs in flight
	next := r.c.primary(90 * time.Second)
	writableAfter := time.Since(start)
	if next == old {
		t.Fatalf("%s: %s takes writes still", kind, old.name)
	}
	waitFor(t, 60*time.Second, "the listener to reconnect", func() bool {
		return r.b.client.listener.sessions.Load() > sessions && r.b.client.listener.pid.Load() != 0
	})
	listenerAfter := time.Since(start)
	// Frozen through the failover, for longer than its jobs' leases when the outage is: the
	// others ran them, and whatever it settles now must change nothing.
	frozen.signal(t, syscall.SIGCONT)
	started := "—"
	if kind != "switchover" {
		started = r.firstStartAfter(start).Round(time.Millisecond).String()
	}
	wake := r.probeWake()
	uiLive := r.checkTools(start.Add(writableAfter))
	if kind != "switchover" {
		r.c.rejoin(old)
	}
	r.c.waitState(3*time.Minute, old, "secondary")
	r.c.waitState(time.Minute, next, "primary")
	_, refused := r.producer.counts()
	t.Logf("ha %s: %s → %s; writable after %s, first job started on the new primary after %s, "+
		"no run recorded for %s, listener back after %s, probe woken in %s; dashboard live %s after the "+
		"new primary took writes (%s), pgqueue queues answered; enqueues refused %d; "+
		"old primary a secondary again after %s",
		kind, old.name, next.name, writableAfter.Round(time.Millisecond), started, r.longestPause(start),
		listenerAfter.Round(time.Millisecond), wake.Round(time.Microsecond), uiLive.Round(time.Millisecond), r.ui,
		refused-refusedBefore, time.Since(start).Round(time.Second))
}

// longestPause returns the longest time around t (from 2 s before to a minute after) in which
// no worker recorded a run: how long work stood still, as the application saw it.
func (r *failoverRun) longestPause(t time.Time) time.Duration {
	var gap time.Duration
	if err := r.b.pool.QueryRow(context.Background(), `SELECT coalesce(max(at - before), '0')
		FROM (SELECT at, lag(at) OVER (ORDER BY at) AS before FROM chaos_runs
		      WHERE at BETWEEN $1::timestamptz - interval '2 seconds' AND $1::timestamptz + interval '1 minute') AS r`,
		t).Scan(&gap); err != nil {
		r.t.Fatal(err)
	}
	return gap.Round(time.Millisecond)
}

// killWorker kills one worker process with SIGKILL and starts another in its place.
func (r *failoverRun) killWorker() {
	r.procs[0].kill(r.t)
	r.faults++
	r.procs = append(r.procs[1:], startChaos(r.t, r.b, r.out, r.set))
}

// cutListeners ends every listening session on the primary, and waits until the in-process
// client's listener has reconnected: each runtime reconnects its own.
func (r *failoverRun) cutListeners() {
	sessions := r.b.client.listener.sessions.Load()
	var n int
	if err := r.b.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
		FROM pg_stat_activity WHERE query LIKE 'LISTEN %'`).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	if n == 0 {
		r.t.Fatal("no listening session to cut")
	}
	waitListening(r.t, r.b.client, sessions+1)
}

// firstStartAfter waits for the first job started after t (attempted_at, on the new primary: the
// old one is gone) and returns how long after t it was.
func (r *failoverRun) firstStartAfter(t time.Time) time.Duration {
	var first time.Time
	waitFor(r.t, 60*time.Second, "a job to start on the new primary", func() bool {
		err := r.b.pool.QueryRow(context.Background(), `SELECT min(attempted_at) FROM pgqueue_all_jobs
			WHERE queue = 'chaos' AND attempted_at > $1`, t).Scan(&first)
		return err == nil && !first.IsZero()
	})
	return first.Sub(t)
}

// probeWake enqueues a probe job until one is accepted and returns how long its worker, which
// never polls, took to start it; then checks that the watch of its queue reports probe jobs.
func (r *failoverRun) probeWake() time.Duration {
	t := r.t
	var wake time.Duration
	// The first probe may race the wake-up every worker gets on reconnect; the second cannot.
	for range 2 {
		var enqueued time.Time
		waitFor(t, 30*time.Second, "a probe job to be accepted", func() bool {
			enqueued = time.Now()
			_, err := r.probe.Enqueue(t.Context(), 1, nil)
			return err == nil
		})
		wake = receive(t, r.probed, 10*time.Second, "the probe job to wake its worker").Sub(enqueued)
	}
	r.watchSees()
	return wake
}

// watchSees enqueues probe jobs until the watch of the probe queue reports one started or
// completed. Right after the listener's reconnect (the watch's ChangeResync) a worker may not have
// read yet that the queue is watched, and run a job unannounced; the watch goes on after that.
func (r *failoverRun) watchSees() {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		job, err := r.probe.Enqueue(r.t.Context(), 1, nil)
		if err != nil {
			r.t.Fatalf("enqueue a probe job: %v", err)
		}
		receive(r.t, r.probed, 10*time.Second, "the probe job to wake its worker")
		for wait := time.After(time.Second); ; {
			select {
			case ch, ok := <-r.changes:
				if !ok {
					r.t.Fatal("the watch of the probe queue closed")
				}
				if slices.Contains(ch.JobIDs, job.ID) {
					return
				}
				continue
			case <-wait:
			}
			break
		}
	}
	r.t.Fatal("the watch of the probe queue reported none of its jobs for 15 s")
}

// finish stops the stream, waits for every job to be settled and checks the accounting: with
// synchronous replication (sync), no job acknowledged while the primary waited for its standby is
// lost; always, every job in the table
// completed, a job ran more than once only within the at-least-once bound, and each job that
// completes in its handler's transaction recorded exactly one run.
func (r *failoverRun) finish(sync bool) {
	t := r.t
	r.stop()
	waitFor(t, 2*time.Minute, "every job to be settled", func() bool {
		var left int
		err := r.b.pool.QueryRow(context.Background(), `SELECT count(*) FROM pgqueue_all_jobs
			WHERE queue = 'chaos' AND status <> 'completed'`).Scan(&left)
		return err == nil && left == 0
	})
	for _, p := range r.procs {
		p.stop(t)
	}
	runs := chaosRuns(r.b)
	var inTable int
	if err := r.b.pool.QueryRow(context.Background(), `SELECT count(*) FROM pgqueue_all_jobs WHERE queue = 'chaos'`).Scan(&inTable); err != nil {
		t.Fatal(err)
	}
	n := r.tally(runs)
	// Each fault may re-run what was in flight: every slot's job and the jobs claimed ahead of a
	// free slot (up to 2×Concurrency a process), of every process.
	bound := r.faults * failoverProcs * 2 * failoverConcurrency
	kinds := map[string]int{}
	for _, err := range r.producer.refused {
		kinds[enqueueErrorKind(err)]++
	}
	t.Logf("ha accounting: sync=%v accepted=%d refused=%d (connect=%d shutdown=%d other=%d) in_table=%d ran=%d "+
		"lost=%d lost_while_a_primary_replicated_asynchronously=%d duplicates=%d (bound %d) tx_jobs_run_twice=%d",
		sync, len(r.producer.accepted), len(r.producer.refused), kinds["connect"], kinds["shutdown"], kinds["other"],
		inTable, len(runs), n.lost, n.lostAsync, n.duplicates, bound, n.txTwice)
	for _, err := range r.producer.refused {
		if enqueueErrorKind(err) == "other" {
			t.Logf("an enqueue error of another kind: %v", err)
			break
		}
	}
	if sync && n.lost > 0 {
		t.Errorf("%d jobs acknowledged while the primary replicated synchronously never ran, enqueued from %s to %s, e.g. %s",
			n.lost, n.lostFrom.Format("15:04:05.000"), n.lostTo.Format("15:04:05.000"), strings.Join(n.lostIDs, ", "))
	}
	if n.txTwice > 0 {
		t.Errorf("%d jobs completed in their handler's transaction recorded more than one run: a stale attempt settled", n.txTwice)
	}
	if n.duplicates > bound {
		t.Errorf("%d runs beyond the first, more than the %d that the faults had in flight", n.duplicates, bound)
	}
	if len(runs) > inTable {
		t.Errorf("%d jobs ran but only %d are in the table", len(runs), inTable)
	}
}

// failoverTally is what finish counts: acknowledged jobs that never ran (those acknowledged while
// a primary replicated asynchronously apart; the first few ids and when the others were
// enqueued), runs beyond the first, and CompleteTx jobs with more than one run.
type failoverTally struct {
	lost, lostAsync, duplicates, txTwice int
	lostIDs                              []string
	lostFrom, lostTo                     time.Time
}

func (r *failoverRun) tally(runs map[ulid.ULID][]chaosRun) failoverTally {
	var n failoverTally
	for seq, id := range r.producer.accepted {
		switch at := ulid.Time(id.Time()); {
		case len(runs[id]) > 0:
		case r.roles.asyncDuring(at, r.producer.ackedAt[seq]):
			n.lostAsync++ // acknowledged by a primary that did not wait for its standby
		default:
			n.lost++
			if n.lostFrom.IsZero() || at.Before(n.lostFrom) {
				n.lostFrom = at
			}
			if at.After(n.lostTo) {
				n.lostTo = at
			}
			if len(n.lostIDs) < 10 {
				n.lostIDs = append(n.lostIDs, id.String())
			}
		}
	}
	for _, rs := range runs {
		n.duplicates += len(rs) - 1
		tx := 0
		for _, run := range rs {
			if run.tx {
				tx++
			}
		}
		if tx > 1 {
			n.txTwice++
		}
	}
	return n
}
