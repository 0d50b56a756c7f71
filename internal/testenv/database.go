package testenv

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Database returns the DSN of the test database and a function that releases it: the one
// PGQUEUE_TEST_DATABASE_URL or DATABASE_URL names, or else a PostgreSQL container started with
// testcontainers-go (which needs a Docker engine). Starting a container blocks for up to
// ContainerStartTimeout.
func Database() (dsn string, release func(), err error) {
	for _, name := range []string{"PGQUEUE_TEST_DATABASE_URL", "DATABASE_URL"} {
		if dsn := os.Getenv(name); dsn != "" {
			return dsn, func() {}, nil
		}
	}
	dsn, stop, err := StartContainer(nil)
	if err != nil {
		return "", nil, fmt.Errorf("PGQUEUE_TEST_DATABASE_URL and DATABASE_URL are unset, and no container could be started: %w", err)
	}
	return dsn, stop, nil
}

// NoDatabaseMessage says that the tests found no database, why, and how to provide one.
func NoDatabaseMessage(err error) string {
	return fmt.Sprintf(`pgqueue tests need PostgreSQL and found none: %v

Provide one of:
  PGQUEUE_TEST_DATABASE_URL=postgres://user@host:5432/db?sslmode=disable  (tests create and drop schemas in it)
  DATABASE_URL=...                                                         (used when the first is unset)
  a Docker engine, which testcontainers-go uses to start postgres:16-alpine
`, err)
}

// ContainerStartTimeout bounds building the container command and starting the container.
const ContainerStartTimeout = 5 * time.Minute

// containerModule returns the directory of the module (pgqueuetest/container) whose command
// ./cmd/testdb starts a PostgreSQL container with testcontainers-go, prints its URL, and stops it
// when its standard input closes. Tests run that command rather than import testcontainers-go: the
// requirements of the root module and of pgqueuetest are part of the module graph of every
// application that imports them, and testcontainers-go would bring Docker's client and dozens of
// modules into it.
func containerModule() string {
	_, file, _, _ := goruntime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "pgqueuetest", "container")
}

// StartContainer runs the container command with env added to the environment, and returns the
// URL it prints and a function that stops it (closing its standard input).
func StartContainer(env []string) (string, func(), error) {
	dir := containerModule()
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
	case <-time.After(ContainerStartTimeout):
		_ = cmd.Process.Kill()
	}
	stop()
	return "", nil, fmt.Errorf("go run ./cmd/testdb in %s printed no URL: %s", dir, strings.TrimSpace(stderr.String()))
}

// RandomName returns prefix followed by 12 random hex digits.
func RandomName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// NewSchema creates an empty schema in the database of dsn for the test and drops it, with all
// it holds, when the test ends.
func NewSchema(t testing.TB, dsn string) string {
	t.Helper()
	schema := RandomName("pgqueue_test_")
	conn, err := pgx.Connect(t.Context(), dsn)
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
		conn, err := pgx.Connect(ctx, dsn)
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

// Pool returns a pool of at most maxConns connections to the database of dsn whose search_path
// is schema; it is closed when the test ends.
func Pool(t testing.TB, dsn, schema string, maxConns int32) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
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
