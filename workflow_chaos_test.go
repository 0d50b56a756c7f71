package pgqueue

// Workflows under harm: worker processes killed (SIGKILL) and frozen (SIGSTOP) mid-run, their
// listener connections cut, and, on a private instance, Postgres restarted. Afterwards no step
// started before every parent had finished, none is lost, and none is stranded: every workflow
// finishes, every step completed.

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	ossignal "os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
)

// flowChaosQueue is the queue of the workflow chaos tests' steps.
const flowChaosQueue = "flow"

// createFlowRuns creates the table in which the steps record each run's start.
func createFlowRuns(ctx context.Context, t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	if _, err := pool.Exec(ctx, `CREATE TABLE flow_runs (job_id uuid NOT NULL, pid integer NOT NULL,
		at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
}

// flowStepHandler records the run's start in flow_runs, then works a random moment.
func flowStepHandler(pool *pgxpool.Pool) func(context.Context, *Job[int]) error {
	pid := os.Getpid()
	return func(ctx context.Context, j *Job[int]) error {
		if _, err := pool.Exec(ctx, `INSERT INTO flow_runs (job_id, pid) VALUES ($1, $2)`, [16]byte(j.ID), pid); err != nil {
			return err
		}
		time.Sleep(rand.N(5 * time.Millisecond))
		return nil
	}
}

// flowChaosOptions returns the workers' options: short leases, so that a killed process's steps
// come back within the test, and a poll as the safety net.
func flowChaosOptions() *WorkerOptions {
	return &WorkerOptions{Concurrency: 8, LockDuration: 2 * time.Second, PollInterval: 500 * time.Millisecond}
}

// flowMain runs a worker process of the workflow chaos tests on queue flow of schema
// PGQUEUE_TEST_SCHEMA (helper mode "flow"), until SIGTERM.
func flowMain() int {
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := helperPool(ctx, 20, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	client, err := NewClient(pool, &Config{ID: fmt.Sprintf("flow-%d", os.Getpid()),
		Retention: Retention{Completed: time.Hour}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer client.Close()
	q := must(NewQueue[int](client, flowChaosQueue))
	if err := must(q.NewWorker(flowStepHandler(pool), flowChaosOptions())).Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// enqueueChaosFlows enqueues the chaos tests' workflows: random DAGs of 100 steps (every
// dependency CancelDependent: no step fails, so every step must complete) and a fan-in of 500
// steps into one.
func enqueueChaosFlows(ctx context.Context, t *testing.T, c *Client, r *rand.Rand) (ids []ulid.ULID, parents map[ulid.ULID][]ulid.ULID) {
	t.Helper()
	q := must(NewQueue[int](c, flowChaosQueue))
	parents = map[ulid.ULID][]ulid.ULID{}
	for range 12 {
		wf := c.NewWorkflow("chaos")
		var steps []Step
		for i := range 100 {
			var after []Step
			if i > 0 {
				for _, p := range r.Perm(i)[:min(i, r.IntN(4))] {
					after = append(after, steps[p])
				}
			}
			s := q.AddStep(wf, i, &StepOptions{After: After(after...)})
			for _, p := range after {
				parents[s.ID] = append(parents[s.ID], p.ID)
			}
			steps = append(steps, s)
		}
		must(0, wf.Enqueue(ctx))
		ids = append(ids, wf.ID)
	}
	wf := c.NewWorkflow("fan-in")
	for i := range 500 {
		q.AddStep(wf, i, nil)
	}
	last := q.AddStep(wf, -1, &StepOptions{After: After(wf.Steps()...)})
	for _, s := range wf.Steps()[:500] {
		parents[last.ID] = append(parents[last.ID], s.ID)
	}
	must(0, wf.Enqueue(ctx))
	return append(ids, wf.ID), parents
}

// checkChaosFlows waits for every workflow to finish, then checks that every step completed and
// ran, each run after every parent had finished.
func checkChaosFlows(ctx context.Context, t *testing.T, c *Client, pool *pgxpool.Pool, ids []ulid.ULID, parents map[ulid.ULID][]ulid.ULID) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	finished := map[ulid.ULID]time.Time{}
	steps := 0
	for _, id := range ids {
		info, err := c.AwaitWorkflow(wctx, id)
		if err != nil {
			t.Fatalf("workflow %s: %v (stranded)", id, err)
		}
		if info.Status != WorkflowCompleted || info.Counts[StatusCompleted] != info.Jobs {
			t.Errorf("workflow %s ended %s with %v", id, info.Status, info.Counts)
		}
		for _, s := range info.Steps {
			finished[s.ID] = s.FinishedAt
		}
		steps += info.Jobs
	}
	rows, err := pool.Query(ctx, `SELECT job_id, min(at), count(*) FROM flow_runs GROUP BY job_id`)
	if err != nil {
		t.Fatal(err)
	}
	ran, reruns := 0, 0
	for rows.Next() {
		var id [16]byte
		var first time.Time
		var n int
		if err := rows.Scan(&id, &first, &n); err != nil {
			t.Fatal(err)
		}
		ran++
		reruns += n - 1
		for _, p := range parents[ulid.ULID(id)] {
			if !finished[p].Before(first) {
				t.Errorf("step %s first ran at %s, before its parent %s finished (%s)", ulid.ULID(id), first, p, finished[p])
			}
		}
	}
	if ran != steps {
		t.Errorf("%d of %d steps ran", ran, steps)
	}
	t.Logf("%d workflows, %d steps, all completed; %d runs again after harm", len(ids), steps, reruns)
}

// Worker processes are killed and frozen, and their listeners' connections cut, while workflows
// run.
func TestChaosWorkflows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	createFlowRuns(ctx, t, b.pool)
	ids, parents := enqueueChaosFlows(ctx, t, b.client, rand.New(rand.NewPCG(rand.Uint64(), 1)))
	out := &chaosOutput{}
	start := func() *chaosProc {
		return startHelperProc(t, out, "flow", helperEnv+"=flow", "PGQUEUE_TEST_DSN="+testDSN, "PGQUEUE_TEST_SCHEMA="+b.schema)
	}
	procs := []*chaosProc{start(), start(), start()}
	for round := range 8 {
		time.Sleep(300 * time.Millisecond)
		i := rand.IntN(len(procs))
		switch round % 4 {
		case 0, 2:
			procs[i].kill(t)
			procs[i] = start()
		case 1:
			procs[i].signal(t, syscall.SIGSTOP)
			time.Sleep(3 * time.Second) // past the lease: its steps are taken back
			procs[i].signal(t, syscall.SIGCONT)
		case 3:
			if _, err := b.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE query = 'LISTEN ' || quote_ident(left('pgqueue.' || $1, 63))`, b.schema); err != nil {
				t.Fatal(err)
			}
		}
	}
	checkChaosFlows(ctx, t, b.client, b.pool, ids, parents)
	for _, p := range procs {
		p.stop(t)
	}
}

// Postgres restarts, twice, while workflows run on a private instance.
func TestChaosWorkflowsPostgresRestart(t *testing.T) {
	pg := startPostgres(t)
	pool := pg.newPool(30)
	migrate(t, pool)
	ctx := t.Context()
	createFlowRuns(ctx, t, pool)
	// Connection errors are expected by the hundred here: log warnings and up only.
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	client, err := NewClient(pool, &Config{Logger: log, Retention: Retention{Completed: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	ids, parents := enqueueChaosFlows(ctx, t, client, rand.New(rand.NewPCG(rand.Uint64(), 2)))
	q := must(NewQueue[int](client, flowChaosQueue))
	opts := flowChaosOptions()
	opts.LockDuration = 10 * time.Second // longer than an outage
	runWorkers(t, client, must(q.NewWorker(flowStepHandler(pool), opts)))
	for _, mode := range []string{"fast", "immediate"} {
		time.Sleep(500 * time.Millisecond)
		t.Logf("restart (%s) took %s", mode, pg.restart(mode))
	}
	checkChaosFlows(ctx, t, client, pool, ids, parents)
}
