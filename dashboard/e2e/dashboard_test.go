package e2e

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oklog/ulid/v2"
	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/dashboard"
)

// dbTimeout bounds one test's call to the database.
const dbTimeout = 30 * time.Second

// env is one test's dashboard: a fresh schema, a client on it, the dashboard served by a test
// server, and a browser tab.
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	client *pgqueue.Client
	page   *page
}

// envOptions change what newEnv sets up.
type envOptions struct {
	// prefix mounts the dashboard under this path (e.g. "/pgqueue") with http.StripPrefix, in a
	// mux of the test server's own, as an application does. Empty: at the root.
	prefix string
	// dashboard are the dashboard's options; its Logger is the test's. Nil: defaults.
	dashboard *dashboard.Options
	// maxConns is the size of the client's pool: the dashboard takes one to listen and one
	// to sample, each worker's runtime some, and each running job one. Defaults to 10.
	maxConns int32
}

// newEnv sets up an env for t: schema, client, dashboard, server and tab. Everything is closed
// when the test ends, the tab first and the schema last.
func newEnv(t *testing.T, opts envOptions) *env {
	t.Helper()
	pool := newPool(t, cmp.Or(opts.maxConns, 10))
	client := newClient(t, pool)
	var dopts dashboard.Options
	if opts.dashboard != nil {
		dopts = *opts.dashboard
	}
	dopts.Logger = testLogger(t)
	h, err := dashboard.New(client, &dopts)
	if err != nil {
		t.Fatalf("dashboard.New: %v", err)
	}
	t.Cleanup(h.Close)
	var root http.Handler = h
	if opts.prefix != "" {
		mux := http.NewServeMux()
		mux.Handle(opts.prefix+"/", http.StripPrefix(opts.prefix, h))
		root = mux
	}
	base := startServer(t, root) + opts.prefix
	return &env{t: t, pool: pool, client: client, page: newPage(t, base)}
}

// newClient returns a client on pool, closed when the test ends.
func newClient(t *testing.T, pool *pgxpool.Pool) *pgqueue.Client {
	t.Helper()
	client, err := pgqueue.NewClient(pool, &pgqueue.Config{
		Logger: testLogger(t),
		// The client's name shows on running jobs' pages (and in screenshots): not the host's.
		ID: "web-1",
		// Completed jobs stay, so that their pages and counts can show them.
		Retention: pgqueue.Retention{Completed: time.Hour},
	})
	if err != nil {
		t.Fatalf("pgqueue.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// otherClient returns a second client on the env's schema with a pool of its own: what another
// process of the application would have.
func (e *env) otherClient() *pgqueue.Client {
	e.t.Helper()
	cfg := e.pool.Config().Copy()
	pool, err := pgxpool.NewWithConfig(e.t.Context(), cfg)
	if err != nil {
		e.t.Fatalf("a second pool: %v", err)
	}
	e.t.Cleanup(pool.Close)
	return newClient(e.t, pool)
}

// testLogger returns a logger that writes warnings and errors to the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testWriter writes to a test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}

var _ io.Writer = testWriter{}

// email is the payload of the tests' jobs.
type email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// queue returns the queue of emails named name on client.
func queue(t *testing.T, client *pgqueue.Client, name string) *pgqueue.Queue[email] {
	t.Helper()
	q, err := pgqueue.NewQueue[email](client, name)
	if err != nil {
		t.Fatalf("pgqueue.NewQueue(%q): %v", name, err)
	}
	return q
}

// enqueue enqueues an email on q and returns its job's id.
func enqueue(t *testing.T, q *pgqueue.Queue[email], to string, opts *pgqueue.EnqueueOptions) ulid.ULID {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), dbTimeout)
	defer cancel()
	j, err := q.Enqueue(ctx, email{To: to, Subject: "Welcome"}, opts)
	if err != nil {
		t.Fatalf("enqueue on %s: %v", q.Name(), err)
	}
	return j.ID
}

// failJobs runs every runnable job of q once with a handler that fails it for good: the jobs
// end failed, each with the error err (a nil err makes the handler panic, so the attempt
// records a stack). It returns how many jobs it failed.
func failJobs(t *testing.T, q *pgqueue.Queue[email], err error) int {
	t.Helper()
	w, werr := q.NewWorker(func(ctx context.Context, j *pgqueue.Job[email]) error {
		if err == nil {
			panic(fmt.Sprintf("template %q not found", j.Payload.Subject))
		}
		return pgqueue.Permanent(err)
	}, nil)
	if werr != nil {
		t.Fatalf("NewWorker: %v", werr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), dbTimeout)
	defer cancel()
	results, werr := w.WorkUntilEmpty(ctx)
	if werr != nil {
		t.Fatalf("failing the jobs of %s: %v", q.Name(), werr)
	}
	for _, r := range results {
		if r.Status != pgqueue.StatusFailed {
			t.Fatalf("job %s of %s ended %s, want failed", r.JobID, q.Name(), r.Status)
		}
	}
	return len(results)
}

// runWorker runs a worker of q whose handler is h, until the test ends.
func runWorker(t *testing.T, client *pgqueue.Client, q *pgqueue.Queue[email], h pgqueue.Handler[email]) {
	t.Helper()
	w, err := q.NewWorker(h, &pgqueue.WorkerOptions{Concurrency: 2})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	run(t, client, w)
}

// jobStatus returns the status of the job id, or "" when it is gone from the table.
func (e *env) jobStatus(id ulid.ULID) pgqueue.Status {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), dbTimeout)
	defer cancel()
	j, err := e.client.Job(ctx, id)
	if errors.Is(err, pgqueue.ErrNotFound) {
		return ""
	}
	if err != nil {
		e.t.Fatalf("reading job %s: %v", id, err)
	}
	return j.Status
}
