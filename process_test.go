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

	"github.com/jackc/pgx/v5/pgxpool"
)

// Some tests run a worker in a separate OS process, so that they can kill it for real: the test
// binary re-executes itself with helperEnv set, and TestMain runs helperMain instead of the
// tests.
const helperEnv = "PGQUEUE_TEST_HELPER"

// helperMain runs a worker on queue PGQUEUE_TEST_QUEUE in schema PGQUEUE_TEST_SCHEMA whose
// handler prints "started <id>" and then blocks until the process is killed.
func helperMain() int {
	ctx, stop := ossignal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := pgxpool.ParseConfig(os.Getenv("PGQUEUE_TEST_DSN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = os.Getenv("PGQUEUE_TEST_SCHEMA")
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
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
	w := q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		fmt.Printf("started %s\n", job.ID)
		<-ctx.Done()
		return ctx.Err()
	}, &WorkerOptions{LockDuration: 500 * time.Millisecond, PollInterval: 50 * time.Millisecond})
	if err := w.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
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
