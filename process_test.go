package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	ossignal "os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Some tests run a worker in a separate OS process, so that they can kill it for real: the test
// binary re-executes itself with helperEnv set, and TestMain runs helperMain instead of the
// tests.
const helperEnv = "PGQUEUE_TEST_HELPER"

// helperMain runs the helper mode that helperEnv names.
func helperMain() int {
	switch mode := os.Getenv(helperEnv); mode {
	case "worker":
		return helperWorker()
	case "chaos":
		return chaosMain()
	case "periodic":
		return periodicMain()
	case "limits":
		return limitsChaosMain()
	case "keyworker":
		return keyHelperMain()
	case "ahead":
		return aheadMain()
	case "flow":
		return flowMain()
	case "curve":
		return curveMain()
	default:
		fmt.Fprintf(os.Stderr, "unknown helper mode %q\n", mode)
		return 2
	}
}

// helperWorker runs a worker on queue PGQUEUE_TEST_QUEUE in schema PGQUEUE_TEST_SCHEMA whose
// handler prints "started <id>" and then blocks until the process is killed.
func helperWorker() int {
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := helperPool(ctx, 0, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	client, err := NewClient(pool, &Config{ID: "helper"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	q, err := NewQueue[int](client, os.Getenv("PGQUEUE_TEST_QUEUE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	w := must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		fmt.Printf("started %s\n", job.ID)
		<-ctx.Done()
		return ctx.Err()
	}, &WorkerOptions{LockDuration: 2 * time.Second, PollInterval: 50 * time.Millisecond}))
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// helperPool opens a helper process's pool on PGQUEUE_TEST_DSN: its connections use the schema
// PGQUEUE_TEST_SCHEMA (if set) and the application_name in the variable appEnv (if given and
// set); at most maxConns of them (0: pgxpool's default).
func helperPool(ctx context.Context, maxConns int32, appEnv string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(os.Getenv("PGQUEUE_TEST_DSN"))
	if err != nil {
		return nil, err
	}
	if schema := os.Getenv("PGQUEUE_TEST_SCHEMA"); schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = schema
	}
	if name := os.Getenv(appEnv); appEnv != "" && name != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = name
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// startHelper starts a worker process on the bundle's schema and queue.
func startHelper(t *testing.T, b *bundle, queue string) (*exec.Cmd, *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=worker", "PGQUEUE_TEST_DSN="+testDSN,
		"PGQUEUE_TEST_SCHEMA="+b.schema, "PGQUEUE_TEST_QUEUE="+queue)
	cmd.Stdout = w
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		r.Close()
	})
	return cmd, r
}

// chaosJob is the payload of the chaos tests' jobs.
type chaosJob struct {
	// Tx: record the run and complete the job in one transaction (Job.CompleteTx).
	Tx bool `json:"tx,omitempty"`
	// Wait: in a holding process, wait for the context to end instead of working late.
	Wait bool `json:"wait,omitempty"`
}

// chaosMain runs a worker process for the chaos tests on queue "chaos" of schema
// PGQUEUE_TEST_SCHEMA, configured by environment variables:
//
//	PGQUEUE_CHAOS_CONCURRENCY  WorkerOptions.Concurrency
//	PGQUEUE_CHAOS_LOCK         WorkerOptions.LockDuration
//	PGQUEUE_CHAOS_POLL         WorkerOptions.PollInterval
//	PGQUEUE_CHAOS_WORK         each handler first sleeps a random time below this
//	PGQUEUE_CHAOS_KEEP         "1": keep completed jobs (Retention.Completed KeepForever)
//	PGQUEUE_CHAOS_HOLD         "1": hold every job until the process is stopped and continued
//
// Every run of a job is recorded as a row (job_id, pid, attempt, tx) of chaos_runs, inserted
// on its own (the job completes afterwards) or, for chaosJob.Tx, in the transaction that
// completes the job. The process prints, one line each:
//
//	event <kind> <id>        for lock_lost, cancelled, failed and error events
//	started <id>             when a held job starts
//	cancelled <id> <cause>   when a held Wait job's context ends ("lock-lost" for ErrLockLost)
//	finished <id> <result>   when a held job has done its late work ("ok", "not-held" or the error)
//
// A holding process keeps each job it claims: Wait jobs until their context ends, the others
// until the process receives SIGCONT, after which they record their run and complete late.
func chaosMain() int {
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	set, err := readChaosSettings()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	thawed := make(chan struct{})
	if set.hold {
		cont := make(chan os.Signal, 1)
		ossignal.Notify(cont, syscall.SIGCONT)
		go func() {
			<-cont
			close(thawed)
		}()
	}

	pool, client, q, err := openChaosQueue(ctx, set)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	defer client.Close()

	onEvent := func(ev Event) {
		switch ev.Kind {
		case EventLockLost, EventCancelled, EventFailed, EventError:
			fmt.Printf("event %s %s\n", ev.Kind, ev.JobID)
		}
	}
	w := must(q.NewWorker(chaosHandler(pool, set, thawed), &WorkerOptions{Concurrency: set.concurrency,
		LockDuration: set.lock, PollInterval: set.poll, OnEvent: onEvent}))
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// readChaosSettings reads the settings startChaos passed in the PGQUEUE_CHAOS_* variables; its
// error names the variable.
func readChaosSettings() (chaosSettings, error) {
	var set chaosSettings
	var err error
	if set.concurrency, err = strconv.Atoi(os.Getenv("PGQUEUE_CHAOS_CONCURRENCY")); err != nil {
		return set, fmt.Errorf("PGQUEUE_CHAOS_CONCURRENCY: %w", err)
	}
	for _, d := range []struct {
		name string
		dst  *time.Duration
	}{{"PGQUEUE_CHAOS_LOCK", &set.lock}, {"PGQUEUE_CHAOS_POLL", &set.poll}, {"PGQUEUE_CHAOS_WORK", &set.work}} {
		if *d.dst, err = time.ParseDuration(os.Getenv(d.name)); err != nil {
			return set, fmt.Errorf("%s: %w", d.name, err)
		}
	}
	set.hold = os.Getenv("PGQUEUE_CHAOS_HOLD") == "1"
	set.keep = os.Getenv("PGQUEUE_CHAOS_KEEP") == "1"
	return set, nil
}

// chaosHandlerConns bounds the connections a chaos process's pool has for its handlers (those of
// Job.CompleteTx each hold one while they run): three processes of 40 slots with one for each
// handler took the test server past its 100 connections beside other tests. Beyond it, handlers
// wait for a connection, as they do in an application whose pool is smaller than Concurrency.
// Processes of 10 slots have one for each.
const chaosHandlerConns = 10

// openChaosQueue opens a pool on PGQUEUE_TEST_DSN whose connections use PGQUEUE_TEST_SCHEMA,
// with a connection for every handler, up to chaosHandlerConns, and some for the worker's own
// statements, a client of it named after the process, and its queue "chaos".
func openChaosQueue(ctx context.Context, set chaosSettings) (*pgxpool.Pool, *Client, *Queue[chaosJob], error) {
	pool, err := helperPool(ctx, int32(min(set.concurrency, chaosHandlerConns)+4), "")
	if err != nil {
		return nil, nil, nil, err
	}
	ccfg := &Config{
		ID:     fmt.Sprintf("chaos-%d", os.Getpid()),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	}
	if set.keep {
		ccfg.Retention.Completed = KeepForever
	}
	client, err := NewClient(pool, ccfg)
	if err != nil {
		pool.Close()
		return nil, nil, nil, err
	}
	q, err := NewQueue[chaosJob](client, "chaos")
	if err != nil {
		_ = client.Close()
		pool.Close()
		return nil, nil, nil, err
	}
	return pool, client, q, nil
}

// chaosHandler is the handler of a chaos worker process: it sleeps a random time below
// set.work and records the run, or, in a holding process, holds the job (holdChaosJob).
func chaosHandler(pool *pgxpool.Pool, set chaosSettings, thawed <-chan struct{}) func(context.Context, *Job[chaosJob]) error {
	pid := os.Getpid()
	return func(ctx context.Context, job *Job[chaosJob]) error {
		if !set.hold {
			if set.work > 0 && !sleepCtx(ctx, rand.N(set.work)) {
				return context.Cause(ctx)
			}
			return recordChaosRun(ctx, pool, job, pid)
		}
		return holdChaosJob(ctx, pool, job, pid, thawed)
	}
}

// holdChaosJob holds job as chaosMain describes, printing what happens: a Wait job until its
// context ends; any other until thawed is closed (or a minute has passed), after which it
// records its run late, with no regard for its context.
func holdChaosJob(ctx context.Context, pool *pgxpool.Pool, job *Job[chaosJob], pid int, thawed <-chan struct{}) error {
	fmt.Printf("started %s\n", job.ID)
	if job.Payload.Wait {
		<-ctx.Done()
		cause := context.Cause(ctx)
		if errors.Is(cause, ErrLockLost) {
			fmt.Printf("cancelled %s lock-lost\n", job.ID)
		} else {
			fmt.Printf("cancelled %s %v\n", job.ID, cause)
		}
		return cause
	}
	select {
	case <-thawed:
	case <-time.After(time.Minute): // never frozen: the test has failed already
	}
	// Late work, as a frozen process does it on waking: with no regard for its context.
	err := recordChaosRun(context.WithoutCancel(ctx), pool, job, pid)
	switch {
	case err == nil:
		fmt.Printf("finished %s ok\n", job.ID)
	case errors.Is(err, ErrNotHeld):
		fmt.Printf("finished %s not-held\n", job.ID)
	default:
		fmt.Printf("finished %s %v\n", job.ID, err)
	}
	return err
}

// recordChaosRun inserts the run of job into chaos_runs: on its own, or for a chaosJob.Tx job
// in one transaction with the job's completion.
func recordChaosRun(ctx context.Context, pool *pgxpool.Pool, job *Job[chaosJob], pid int) error {
	const insert = "INSERT INTO chaos_runs (job_id, pid, attempt, tx) VALUES ($1, $2, $3, $4)"
	if !job.Payload.Tx {
		_, err := pool.Exec(ctx, insert, [16]byte(job.ID), pid, job.Attempt, false)
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, insert, [16]byte(job.ID), pid, job.Attempt, true); err != nil {
		return err
	}
	if err := job.CompleteTx(ctx, tx); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
