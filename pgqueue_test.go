package pgqueue

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// testDSN is the database every test makes its own schema in.
var testDSN string

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain())
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dsn, stop, err := testDatabase()
	if err != nil {
		fmt.Fprint(os.Stderr, noDatabaseMessage(err))
		return 1
	}
	testDSN = dsn
	code := m.Run()
	stop()
	if code == 0 && !checkLeaks(func(format string, args ...any) { fmt.Fprintf(os.Stderr, format, args...) }) {
		return 1
	}
	return code
}

// noDatabaseMessage says that the tests found no database, why, and how to provide one.
func noDatabaseMessage(err error) string {
	return fmt.Sprintf(`pgqueue tests need PostgreSQL and found none: %v

Provide one of:
  PGQUEUE_TEST_DATABASE_URL=postgres://user@host:5432/db?sslmode=disable  (tests create and drop schemas in it)
  DATABASE_URL=...                                                         (used when the first is unset)
  a Docker engine, which testcontainers-go uses to start postgres:16-alpine
`, err)
}

// testDatabase returns the DSN of the test database, and a function that releases it: the one
// PGQUEUE_TEST_DATABASE_URL or DATABASE_URL names, or else a container.
func testDatabase() (string, func(), error) {
	for _, name := range []string{"PGQUEUE_TEST_DATABASE_URL", "DATABASE_URL"} {
		if dsn := os.Getenv(name); dsn != "" {
			return dsn, func() {}, nil
		}
	}
	dsn, stop, err := startContainer(containerModule, nil)
	if err != nil {
		return "", nil, fmt.Errorf("PGQUEUE_TEST_DATABASE_URL and DATABASE_URL are unset, and no container could be started: %w", err)
	}
	return dsn, stop, nil
}

// containerModule is the directory of the module whose command ./cmd/testdb starts a PostgreSQL
// container with testcontainers-go, prints its URL, and stops it when its standard input closes.
// The tests run that command rather than import testcontainers-go: this module's requirements
// are part of the module graph of every application that imports pgqueue, and testcontainers-go
// would bring Docker's client and dozens of modules into it.
const containerModule = "pgqueuetest"

// containerStartTimeout bounds building the command and starting the container.
const containerStartTimeout = 5 * time.Minute

// startContainer runs ./cmd/testdb of the module in dir, with env added to the environment, and
// returns the URL it prints and a function that stops it (closing its standard input).
func startContainer(dir string, env []string) (string, func(), error) {
	cmd := exec.Command("go", "run", "./cmd/testdb")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return "", nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("go run ./cmd/testdb in %s: %w", dir, err)
	}
	stop := func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case dsn := <-line:
		if dsn != "" {
			return dsn, stop, nil
		}
	case <-time.After(containerStartTimeout):
		_ = cmd.Process.Kill()
	}
	stop()
	return "", nil, fmt.Errorf("go run ./cmd/testdb in %s printed no URL: %s", dir, strings.TrimSpace(stderr.String()))
}

// randomName returns prefix followed by 12 random hex digits.
func randomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// newSchema creates an empty schema for the test and drops it when the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	schema := randomName("pgqueue_test_")
	conn, err := pgx.Connect(t.Context(), testDSN)
	if err != nil {
		t.Fatalf("connect to the test database: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, testDSN)
		if err != nil {
			t.Errorf("connect to drop schema: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	return schema
}

// newPool returns a pool whose connections use schema; it is closed when the test ends.
func newPool(t testing.TB, schema string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN)
	if err != nil {
		t.Fatalf("parse test DSN: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
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

// exec runs a statement on the bundle's schema.
func (b *bundle) exec(sql string, args ...any) {
	b.t.Helper()
	if _, err := b.pool.Exec(context.Background(), sql, args...); err != nil {
		b.t.Fatalf("%s: %v", sql, err)
	}
}

// count returns the number of jobs matching a condition on pgqueue_jobs.
func (b *bundle) count(where string, args ...any) int {
	b.t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), "SELECT count(*) FROM pgqueue_jobs WHERE "+where, args...).Scan(&n); err != nil {
		b.t.Fatalf("count %s: %v", where, err)
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

// TestNoDatabaseMessage starts the tests' container fallback where no Docker engine can be
// reached, and checks that the failure says why and how to provide a database.
func TestNoDatabaseMessage(t *testing.T) {
	t.Parallel()
	_, stop, err := startContainer(containerModule, []string{
		"DOCKER_HOST=unix:///nonexistent/docker.sock", "TESTCONTAINERS_RYUK_DISABLED=true"})
	if err == nil {
		stop()
		t.Fatal("a container started without a Docker engine")
	}
	msg := noDatabaseMessage(err)
	for _, want := range []string{"printed no URL", "testdb:", "PGQUEUE_TEST_DATABASE_URL=postgres://", "DATABASE_URL=", "Docker engine"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q:\n%s", want, msg)
		}
	}
}
