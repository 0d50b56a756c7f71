package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// schemaPrefix starts the name of every schema the harness creates, so that a leftover one is
// easy to recognise (and to drop by hand after a crash).
const schemaPrefix = "pgqbench_"

// poolMaxConns is the size of every contender's pool: room for 16 enqueuing goroutines, a
// worker's own connections and the listener, the same for every contender.
const poolMaxConns = 32

// env is what all scenarios share: the database, the flags, a logger and the schemas created so
// far (so that they can all be dropped at exit, whatever happened).
type env struct {
	dsn   string
	admin *pgxpool.Pool // default search_path; creates and drops schemas, watches tables
	log   *slog.Logger  // the contenders' logger: warnings and errors only
	scale float64
	// server is the private server the env is on (openScenarioEnv), nil for the shared one.
	server *privateServer

	mu      sync.Mutex
	schemas map[string]bool
}

// newEnv connects the admin pool.
func newEnv(ctx context.Context, dsn string, scale float64) (*env, error) {
	admin, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", redact(dsn), err)
	}
	if err := admin.Ping(ctx); err != nil {
		admin.Close()
		return nil, fmt.Errorf("connect to %s: %w", redact(dsn), err)
	}
	return &env{
		dsn:     dsn,
		admin:   admin,
		log:     slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		scale:   scale,
		schemas: make(map[string]bool),
	}, nil
}

// close drops every schema still alive and closes the admin pool.
func (e *env) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e.mu.Lock()
	var left []string
	for s := range e.schemas {
		left = append(left, s)
	}
	e.mu.Unlock()
	var errs []error
	for _, s := range left {
		errs = append(errs, e.dropSchema(ctx, s))
	}
	e.admin.Close()
	return errors.Join(errs...)
}

// createSchema creates a fresh schema named schemaPrefix+kind+"_"+random and returns its name.
func (e *env) createSchema(ctx context.Context, kind string) (string, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := schemaPrefix + kind + "_" + hex.EncodeToString(b[:])
	if _, err := e.admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create schema %s: %w", name, err)
	}
	e.mu.Lock()
	e.schemas[name] = true
	e.mu.Unlock()
	return name, nil
}

// dropSchema drops a schema made by createSchema with everything in it. It runs even when ctx
// has ended, so that an interrupted run still cleans up.
func (e *env) dropSchema(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	if _, err := e.admin.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", name, err)
	}
	e.mu.Lock()
	delete(e.schemas, name)
	e.mu.Unlock()
	return nil
}

// newPool returns a pool of poolMaxConns connections whose search_path is schema and whose
// application_name is app (which lets backendTimes find its server processes).
func (e *env) newPool(ctx context.Context, schema, app string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(e.dsn)
	if err != nil {
		return nil, fmt.Errorf("parse dsn: %w", err)
	}
	cfg.MaxConns = poolMaxConns
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pool for schema %s: %w", schema, err)
	}
	return pool, nil
}

// vacuumAnalyze runs VACUUM ANALYZE on a table, as a real deployment's autovacuum would have
// after a bulk load, so that no contender starts a drain with a cold visibility map or stale
// statistics.
func (e *env) vacuumAnalyze(ctx context.Context, schema, table string) error {
	if _, err := e.admin.Exec(ctx, "VACUUM ANALYZE "+pgx.Identifier{schema, table}.Sanitize()); err != nil {
		return fmt.Errorf("vacuum %s.%s: %w", schema, table, err)
	}
	return nil
}

// clockTicks is the kernel's USER_HZ, the unit of the CPU times in /proc/<pid>/stat. It is 100
// on every Linux platform Go supports.
const clockTicks = 100

// backendTimes returns the CPU time (user + system) used so far by each server process whose
// application_name is app. It reads /proc, so it works only with a server on this host.
func (e *env) backendTimes(ctx context.Context, app string) (map[int]time.Duration, error) {
	rows, err := e.admin.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)
	if err != nil {
		return nil, fmt.Errorf("backends of %s: %w", app, err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("backends of %s: %w", app, err)
	}
	times := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/stat")
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // the backend exited meanwhile, or the server is on another host
			}
			return nil, fmt.Errorf("backend %d: %w", pid, err)
		}
		// The command name may hold spaces; the fields that follow it are plain.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 13 {
			return nil, fmt.Errorf("backend %d: short /proc stat line", pid)
		}
		utime, err1 := strconv.ParseInt(fields[11], 10, 64)
		stime, err2 := strconv.ParseInt(fields[12], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("backend %d: %w", pid, err)
		}
		times[int(pid)] = time.Duration(utime+stime) * time.Second / clockTicks
	}
	return times, nil
}

// redact hides the password of a connection string in messages.
func redact(dsn string) string {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil || cfg.Password == "" {
		return dsn
	}
	return strings.ReplaceAll(dsn, cfg.Password, "xxxxx")
}
