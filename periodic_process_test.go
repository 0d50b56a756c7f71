package pgqueue

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	ossignal "os/signal"
	"syscall"
	"testing"
	"time"
)

// processGrace is the Grace of processPeriodics: an occurrence found later than this is missed.
const processGrace = 3 * time.Second

// processPeriodics are the schedules of the periodic process test, one per missed-runs policy,
// all at second resolution.
func processPeriodics() []Periodic[tick] {
	return []Periodic[tick]{
		tickPeriodic(Periodic[tick]{Name: "all", Every: time.Second, Missed: MissedRunAll, MissedMax: 100, Grace: processGrace}),
		tickPeriodic(Periodic[tick]{Name: "latest", Cron: "* * * * * *", Missed: MissedRunLatest, Grace: processGrace}),
		tickPeriodic(Periodic[tick]{Name: "skip", Cron: "CRON_TZ=Asia/Kolkata */1 * * * * *", Missed: MissedSkip, Grace: processGrace}),
	}
}

// periodicMain runs, until SIGTERM, a worker of queue "periodic" of schema PGQUEUE_TEST_SCHEMA
// that declares processPeriodics and keeps its completed jobs. Its connections carry the
// application_name PGQUEUE_TEST_APP.
func periodicMain() int {
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := helperPool(ctx, 4, "PGQUEUE_TEST_APP")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	client, err := NewClient(pool, &Config{Retention: Retention{Completed: KeepForever}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer client.Close()
	w := must(must(NewQueue[tick](client, "periodic")).NewWorker(func(context.Context, *Job[tick]) error { return nil },
		&WorkerOptions{Concurrency: 2}))
	for _, p := range processPeriodics() {
		if err := w.AddPeriodic(p); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
	}
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// periodicProcesses starts and stops the periodic test's helper processes.
type periodicProcesses struct {
	t   *testing.T
	b   *bundle
	app string
}

// start starts a helper process.
func (pp *periodicProcesses) start() *exec.Cmd {
	pp.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=periodic", "PGQUEUE_TEST_DSN="+testDSN,
		"PGQUEUE_TEST_SCHEMA="+pp.b.schema, "PGQUEUE_TEST_APP="+pp.app)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		pp.t.Fatal(err)
	}
	pp.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// stop ends a helper process with sig and waits for it.
func (pp *periodicProcesses) stop(cmd *exec.Cmd, sig os.Signal) {
	pp.t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		pp.t.Fatal(err)
	}
	err := cmd.Wait()
	if sig == syscall.SIGTERM && err != nil {
		pp.t.Fatalf("helper %d after SIGTERM: %v", cmd.Process.Pid, err)
	}
}

// gone waits until the database has no session of the helpers left: a killed process's
// transaction has ended.
func (pp *periodicProcesses) gone() {
	pp.t.Helper()
	waitFor(pp.t, 30*time.Second, "the killed helpers' sessions to end", func() bool {
		var n int
		err := pp.b.pool.QueryRow(context.Background(),
			"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", pp.app).Scan(&n)
		if err != nil {
			pp.t.Fatal(err)
		}
		return n == 0
	})
}

// TestPeriodicProcesses runs processPeriodics in 5 OS processes at second resolution, restarts
// them one by one (a deploy), kills them all, leaves a gap longer than the grace, and starts 5
// again. Every occurrence while processes ran gets exactly one job; of those missed in the gap,
// MissedRunAll enqueues every one, MissedRunLatest at most the latest, MissedSkip none.
// PGQUEUE_PERIODIC_RUN=1m runs each phase for a minute.
func TestPeriodicProcesses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	pp := &periodicProcesses{t: t, b: b, app: randomName("pgqueue_periodic_")}
	const processes = 5
	run := periodicRunFor(t, 3*time.Second)

	var procs []*exec.Cmd
	for range processes {
		procs = append(procs, pp.start())
	}
	time.Sleep(run)
	for i, cmd := range procs { // a deploy: each process in turn replaced by a new one
		pp.stop(cmd, syscall.SIGTERM)
		procs[i] = pp.start()
	}
	time.Sleep(run)
	for _, cmd := range procs {
		pp.stop(cmd, syscall.SIGKILL)
	}
	pp.gone()
	handledAtKill := map[string]time.Time{}
	for _, p := range processPeriodics() {
		_, handledAtKill[p.Name] = b.scheduleRow("periodic", p.Name)
	}

	time.Sleep(2*processGrace + time.Second) // no process runs
	restart := b.dbNow()
	procs = procs[:0]
	for range processes {
		procs = append(procs, pp.start())
	}
	firstLook := map[string]time.Time{} // when the restarted processes first handled each
	for _, p := range processPeriodics() {
		waitFor(t, 30*time.Second, "the restarted processes to handle "+p.Name, func() bool {
			firstLook[p.Name] = b.scheduleUpdated("periodic", p.Name)
			return firstLook[p.Name].After(restart)
		})
	}
	time.Sleep(run)
	for _, cmd := range procs {
		pp.stop(cmd, syscall.SIGTERM)
	}

	for _, p := range processPeriodics() {
		checkProcessPolicy(t, b, p, handledAtKill[p.Name], restart, firstLook[p.Name])
	}
}

// scheduleUpdated returns when a periodic job's row last changed.
func (b *bundle) scheduleUpdated(queue, name string) time.Time {
	b.t.Helper()
	var at time.Time
	err := b.pool.QueryRow(context.Background(),
		"SELECT updated_at FROM pgqueue_schedules WHERE queue = $1 AND name = $2", queue, name).Scan(&at)
	if err != nil {
		b.t.Fatal(err)
	}
	return at
}

// checkProcessPolicy checks the jobs of p: exactly one for each occurrence up to killed and
// after the restarted processes' first look, and for those missed (Grace before the restart
// and earlier) as p's policy says.
func checkProcessPolicy(t *testing.T, b *bundle, p Periodic[tick], killed, restart, firstLook time.Time) {
	t.Helper()
	created, handled := b.scheduleRow("periodic", p.Name)
	got := b.enqueuedTicks("periodic", p.Name)
	next := mustNext(t, p)
	before := checkEachOnce(t, p.Name+" before the kill", got, next, created, killed)
	after := checkEachOnce(t, p.Name+" after the restart", got, next, firstLook, handled)
	missed := occurrences(next, killed, restart.Add(-p.Grace), 1<<20)
	enqueued := 0
	for _, at := range missed {
		enqueued += got[at]
	}
	t.Logf("%s: %d occurrences before the kill and %d after the restart, one job each; %d missed, %d of them enqueued",
		p.Name, before, after, len(missed), enqueued)
	if before < 4 || after < 2 || len(missed) < 3 {
		t.Fatalf("%s: %d occurrences before the kill, %d after the restart, %d missed: too few to test", p.Name, before, after, len(missed))
	}
	switch p.Missed {
	case MissedRunAll:
		checkEachOnce(t, p.Name+" overall", got, next, created, handled)
	case MissedRunLatest:
		// The latest missed occurrence is the last at least Grace before the restarted
		// processes' first look, which may come after restart-Grace.
		if enqueued > 1 {
			t.Errorf("%s: %d missed occurrences enqueued, want at most the latest", p.Name, enqueued)
		}
		if countIn(got, killed, firstLook) == 0 {
			t.Errorf("%s: no occurrence between the kill and the first look after the restart was enqueued, want the latest", p.Name)
		}
	case MissedSkip:
		if enqueued != 0 {
			t.Errorf("%s: %d missed occurrences enqueued, want none", p.Name, enqueued)
		}
	}
}

// countIn returns how many jobs got holds of occurrences after from and up to to.
func countIn(got map[time.Time]int, from, to time.Time) int {
	n := 0
	for at, c := range got {
		if at.After(from) && !at.After(to) {
			n += c
		}
	}
	return n
}
