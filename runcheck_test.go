package pgqueue

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Run fails at once, with the server's error wrapped once, when the pool is configured for a
// database that does not exist, a role that does not exist, or a role that may not connect: it
// logs nothing and serves nothing. A server it cannot reach at start is an outage, not a
// configuration error: Run serves, retrying, until its context ends, as before.
func TestRunFailsFastOnConfigurationErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	locked := newLockedDatabase(t, b)
	for _, c := range []struct {
		name string
		set  func(*pgconn.Config)
		code string // "": an outage, Run serves until its context ends
	}{
		{"unknown database", func(c *pgconn.Config) { c.Database = randomName("pgqueue_nodb_") }, "3D000"},
		{"unknown role", func(c *pgconn.Config) { c.User = randomName("pgqueue_norole_") }, "28000"},
		{"role without CONNECT", func(c *pgconn.Config) { c.Database = locked.database; c.User = locked.role }, "42501"},
		{"server unreachable", func(c *pgconn.Config) { c.Host, c.Port = "127.0.0.1", 1 }, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, err := pgxpool.ParseConfig(testDSN)
			if err != nil {
				t.Fatal(err)
			}
			c.set(&cfg.ConnConfig.Config)
			wait := 20 * time.Second
			if c.code == "" {
				wait = 2 * time.Second
			}
			took, logs, err := runOnPool(t, cfg, wait)
			if c.code == "" {
				if err != nil || took < wait {
					t.Fatalf("Run returned %v after %s, want nil once its context ended (%s)", err, took, wait)
				}
				return
			}
			var pgErr *pgconn.PgError
			if err == nil || !errors.As(err, &pgErr) || pgErr.Code != c.code {
				t.Fatalf("Run returned %v after %s, want the server's error %s", err, took, c.code)
			}
			if took > wait/2 {
				t.Errorf("Run returned after %s, not at once", took)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "pgqueue: run: connect: ") || strings.Count(msg, "pgqueue: ") != 1 {
				t.Errorf("error %q: want it wrapped once, as pgqueue: run: connect: …", msg)
			}
			if strings.Contains(logs, "level=ERROR") {
				t.Errorf("Run logged errors before it returned:\n%s", logs)
			}
		})
	}
}

// runOnPool runs a worker on a client of a pool made with cfg, for at most wait, and returns
// how long Run took, what the client logged, and what Run returned.
func runOnPool(t *testing.T, cfg *pgxpool.Config, wait time.Duration) (time.Duration, string, error) {
	t.Helper()
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var logs syncBuffer
	client, err := NewClient(pool, &Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	w := must(newQueue[int](t, client, "q").NewWorker(func(context.Context, *Job[int]) error { return nil }, nil))
	start := time.Now() // before the context's timer starts, so that took is at least wait when it ended Run
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	err = client.Run(ctx, w)
	return time.Since(start), logs.String(), err
}

// lockedDatabase is a database that a role may not connect to.
type lockedDatabase struct{ database, role string }

// newLockedDatabase creates an empty database without the CONNECT privilege for PUBLIC and a role,
// both dropped when the test ends.
func newLockedDatabase(t *testing.T, b *bundle) lockedDatabase {
	t.Helper()
	l := lockedDatabase{database: randomName("pgqueue_locked_"), role: newRole(t, b)}
	db := pgx.Identifier{l.database}.Sanitize()
	b.exec("CREATE DATABASE " + db)
	t.Cleanup(func() {
		if _, err := b.pool.Exec(context.Background(), "DROP DATABASE "+db+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	b.exec("REVOKE CONNECT ON DATABASE " + db + " FROM PUBLIC")
	return l
}
