package pgqueue

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// testDSN is the database every test makes its own schema in.
var testDSN string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(testenv.RunTests(m, func(dsn string) (func(), error) {
		testDSN = dsn
		return nil, nil
	}, testenv.CheckLeaks))
}

// randomName returns prefix followed by 12 random hex digits.
func randomName(prefix string) string { return testenv.RandomName(prefix) }

// newSchema creates an empty schema for the test and drops it when the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	return testenv.NewSchema(t, testDSN)
}

// newPool returns a pool whose connections use schema; it is closed when the test ends.
func newPool(t testing.TB, schema string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	return testenv.Pool(t, testDSN, schema, maxConns)
}

// migrate applies the migrations in the pool's schema.
func migrate(t testing.TB, pool *pgxpool.Pool) {
	t.Helper()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := Migrate(t.Context(), db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}

// testLogger writes to the test's output, which is shown for failed or verbose tests: everything
// for a test, warnings and errors for a benchmark, which measures what a service would run (the
// per-job lines are at Debug).
func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelDebug
	if _, ok := t.(*testing.B); ok {
		level = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: level}))
}

// bundle is what most tests start from: a migrated schema of their own, a pool on it and a
// client.
type bundle struct {
	t      testing.TB
	schema string
	pool   *pgxpool.Pool
	client *Client
}

func setup(t testing.TB) *bundle {
	t.Helper()
	b := &bundle{t: t, schema: newSchema(t)}
	b.pool = newPool(t, b.schema, 10)
	migrate(t, b.pool)
	b.client = b.newClient()
	return b
}

// newClient returns another client on the bundle's pool, closed when the test ends.
func (b *bundle) newClient() *Client {
	b.t.Helper()
	c, err := NewClient(b.pool, &Config{Logger: testLogger(b.t)})
	if err != nil {
		b.t.Fatalf("NewClient: %v", err)
	}
	b.t.Cleanup(func() { _ = c.Close() })
	return c
}

// newClientWith returns another client on the bundle's pool with cfg (and the test's logger),
// closed when the test ends.
func (b *bundle) newClientWith(cfg Config) *Client {
	b.t.Helper()
	cfg.Logger = testLogger(b.t)
	c, err := NewClient(b.pool, &cfg)
	if err != nil {
		b.t.Fatalf("NewClient: %v", err)
	}
	b.t.Cleanup(func() { _ = c.Close() })
	return c
}

// exec runs a statement on the bundle's schema.
func (b *bundle) exec(sql string, args ...any) {
	b.t.Helper()
	if _, err := b.pool.Exec(context.Background(), sql, args...); err != nil {
		b.t.Fatalf("%s: %v", sql, err)
	}
}

// count returns the number of jobs matching a condition, in pgqueue_jobs and in the history
// (pgqueue_all_jobs).
func (b *bundle) count(where string, args ...any) int {
	b.t.Helper()
	return b.countIn("pgqueue_all_jobs", where, args...)
}

// countIn counts the rows of table that where keeps.
func (b *bundle) countIn(table, where string, args ...any) int {
	b.t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE "+where, args...).Scan(&n); err != nil {
		b.t.Fatalf("count %s in %s: %v", where, table, err)
	}
	return n
}

func newQueue[T any](t testing.TB, c *Client, name string) *Queue[T] {
	t.Helper()
	q, err := NewQueue[T](c, name)
	if err != nil {
		t.Fatalf("NewQueue: %v", err)
	}
	return q
}

// must returns v, or panics with err: for calls whose failure is a bug of the test itself, such
// as NewWorker with valid options.
func must[V any](v V, err error) V {
	if err != nil {
		panic(err)
	}
	return v
}

// startWorker runs w until the test ends (or the returned stop is called) and checks that Run
// returned nil.
func startWorker[T any](t testing.TB, w *Worker[T]) (stop func()) {
	t.Helper()
	return runWorkers(t, w.spec.c, w)
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// receive waits for a value on ch, failing the test after timeout.
func receive[T any](t testing.TB, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
		panic("unreachable")
	}
}

// events collects a worker's events on a channel.
type events struct{ ch chan Event }

func newEvents() *events { return &events{ch: make(chan Event, 10000)} }

func (e *events) on(ev Event) { e.ch <- ev }

// next waits for the next event of kind, skipping others.
func (e *events) next(t testing.TB, kind EventKind) Event {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev := <-e.ch:
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			t.Fatalf("timed out waiting for event %s", kind)
		}
	}
}

// runWorkers serves workers with one Client.Run until the test ends (or the returned stop is
// called) and checks that Run returned nil.
func runWorkers(t testing.TB, c *Client, workers ...AnyWorker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, workers...) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(time.Minute):
				t.Errorf("Run did not return within a minute of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}
