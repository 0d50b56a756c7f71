package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"go.uber.org/goleak"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testenv"
)

// The tests run the command as a real process, built once, against a real PostgreSQL: each test
// in a schema of its own, given with --schema.

var (
	update = flag.Bool("update", false, "rewrite the golden files in testdata with the output seen")

	// binary is the pgqueue command built for the tests; testDSN the database they run against.
	binary  string
	testDSN string
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(testenv.RunTests(m, setUp, func() error { return goleak.Find() }))
}

// setUp records the test database and builds the command, once, for every test to run.
func setUp(dsn string) (tearDown func(), err error) {
	testDSN = dsn
	dir, err := os.MkdirTemp("", "pgqueue-cli-test-")
	if err != nil {
		return nil, err
	}
	binary = filepath.Join(dir, "pgqueue")
	if err := buildCommand(binary); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return func() { _ = os.RemoveAll(dir) }, nil
}

// buildCommand builds the command into path; with the race detector if PGQUEUE_CLI_RACE is set.
// Not by default under go test -race: a race-instrumented process starts ten times slower, and
// the tests start about a hundred.
func buildCommand(path string) error {
	args := []string{"build", "-o", path}
	if os.Getenv("PGQUEUE_CLI_RACE") != "" {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("go build the command: %v\n%s", err, out)
	}
	return nil
}

// env is one test's schema, with a pool and a client on it for setting up and checking state
// through the API.
type env struct {
	t      *testing.T
	schema string
	pool   *pgxpool.Pool
	client *pgqueue.Client
}

// newEnv makes a fresh schema for the test, migrated unless bare.
func newEnv(t *testing.T, migrated bool) *env {
	t.Helper()
	e := &env{t: t, schema: testenv.NewSchema(t, testDSN)}
	e.pool = testenv.Pool(t, testDSN, e.schema, 8)
	if migrated {
		db := stdlib.OpenDBFromPool(e.pool)
		defer db.Close()
		if err := pgqueue.Migrate(t.Context(), db); err != nil {
			t.Fatal(err)
		}
	}
	client, err := pgqueue.NewClient(e.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	e.client = client
	return e
}

// result is what a run of the command gave.
type result struct {
	stdout, stderr string
	code           int
}

// run runs the command with args on the test's schema, stdin as its standard input, and the
// database in DATABASE_URL, and waits for it to exit.
func (e *env) run(stdin string, args ...string) result {
	e.t.Helper()
	cmd := e.command(args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		exitErr, ok := err.(*exec.ExitError)
		if !ok {
			e.t.Fatalf("run pgqueue %v: %v", args, err)
		}
		code = exitErr.ExitCode()
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// command returns the command with args on the test's schema, not started.
func (e *env) command(args ...string) *exec.Cmd {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	e.t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, binary, append([]string{"--schema", e.schema}, args...)...)
	cmd.Env = append(cleanEnv(), "DATABASE_URL="+testDSN)
	return cmd
}

// cleanEnv is the environment without the variables that choose a database, so that each test
// says which it means.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			out = append(out, kv)
		}
	}
	return out
}

// ok runs the command and fails the test unless it exits 0.
func (e *env) ok(stdin string, args ...string) string {
	e.t.Helper()
	r := e.run(stdin, args...)
	if r.code != 0 {
		e.t.Fatalf("pgqueue %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// exits runs the command and fails the test unless it exits with code.
func (e *env) exits(code int, args ...string) result {
	e.t.Helper()
	r := e.run("", args...)
	if r.code != code {
		e.t.Fatalf("pgqueue %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	return r
}

// okJSON runs the command with --json and decodes its output into v.
func (e *env) okJSON(v any, args ...string) {
	e.t.Helper()
	out := e.ok("", append(args, "--json")...)
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		e.t.Fatalf("pgqueue %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// golden compares got with testdata/name.golden, or rewrites that with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// mask replaces what changes from run to run with fixed words, for golden files.
func mask(s string) string {
	s = regexp.MustCompile(`jobs table: ~[\d,]+ live rows, ~[\d,]+ dead rows \(estimates\), last vacuum .*`).
		ReplaceAllString(s, "jobs table: ~N live rows, ~N dead rows (estimates), last vacuum T")
	// Any session of the server may hold vacuum back meanwhile (TestQueuesHorizonWarning's does).
	s = regexp.MustCompile(`\nWARNING: vacuum held back [^\n]*\n`).ReplaceAllString(s, "")
	return s
}

// waitFor calls check until it returns true, failing the test after a timeout.
func waitFor(t *testing.T, what string, check func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !check() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-tick.C:
		}
	}
}
