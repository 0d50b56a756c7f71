package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"

	"github.com/pgqueue/pgqueue"
)

// enqueueEnv names the environment variable that makes the test binary, run again, a process
// of its own that enqueues one email and exits, printing the job's id: "<schema> <queue> <to>",
// the database being PGQUEUE_TEST_DATABASE_URL. Another service of the application, as far as
// the dashboard can tell.
const enqueueEnv = "PGQUEUE_E2E_ENQUEUE"

// enqueueMain is the test binary run as that process.
func enqueueMain(spec string) int {
	f := strings.Fields(spec)
	if len(f) != 3 {
		fmt.Fprintf(os.Stderr, "%s=%q: want <schema> <queue> <to>\n", enqueueEnv, spec)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := pgxpool.ParseConfig(os.Getenv("PGQUEUE_TEST_DATABASE_URL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = f[0]
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer pool.Close()
	client, err := pgqueue.NewClient(pool, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer client.Close()
	q, err := pgqueue.NewQueue[email](client, f[1])
	if err == nil {
		var j *pgqueue.Job[email]
		if j, err = q.Enqueue(ctx, email{To: f[2], Subject: "Welcome"}, nil); err == nil {
			fmt.Println(j.ID)
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// enqueueFromProcess enqueues an email to to on queue from another OS process (the test binary
// run again) and returns its job's id.
func (e *env) enqueueFromProcess(queue, to string) ulid.ULID {
	e.t.Helper()
	schema := e.pool.Config().ConnConfig.RuntimeParams["search_path"]
	ctx, cancel := context.WithTimeout(e.t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "PGQUEUE_TEST_DATABASE_URL="+testDSN, fmt.Sprintf("%s=%s %s %s", enqueueEnv, schema, queue, to))
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		e.t.Fatalf("the enqueuing process: %v: %s", err, stderr)
	}
	id, err := ulid.ParseStrict(strings.TrimSpace(string(out)))
	if err != nil {
		e.t.Fatalf("the enqueuing process printed %q: %v", out, err)
	}
	return id
}

// TestEnqueueFromProcess checks the helper itself: the job is in the test's schema.
func TestEnqueueFromProcess(t *testing.T) {
	t.Parallel()
	e := &env{t: t, pool: newPool(t, 2)}
	id := e.enqueueFromProcess("emails", "ada@example.com")
	var n int
	if err := e.pool.QueryRow(t.Context(), "SELECT count(*) FROM pgqueue_jobs WHERE id = $1", [16]byte(id)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("job %s: %d rows (%v), want 1", id, n, err)
	}
}
