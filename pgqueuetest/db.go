package pgqueuetest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgqueue/pgqueue"
)

// DB is a schema of one test's own, with pgqueue migrated into it, and a pool, a database/sql
// handle and a client on it. Tests that each have a DB can run in parallel against one database.
type DB struct {
	// Schema is the name of the test's schema: "pgqueuetest_" and 12 random hex digits.
	Schema string
	// Pool is a pool whose connections use Schema (their search_path). Create the application's
	// own tables through it, and they are in the test's schema too.
	Pool *pgxpool.Pool
	// SQL is a database/sql handle on Pool (pgx's stdlib.OpenDBFromPool), for an application
	// built on database/sql: its transactions enqueue with EnqueueSQLTx, and the assertions read
	// through them.
	SQL *sql.DB
	// Client is a pgqueue client on Pool.
	Client *pgqueue.Client
}

// NewDB creates a schema for the test in the database at url (Server.URL, or any URL whose role
// may create schemas), migrates pgqueue into it, and returns it with a pool and a client made
// with cfg (nil: defaults, with the client's logs in the test's output). When the test ends, the
// client and the pool are closed and the schema is dropped with everything in it. NewDB fails the
// test if any step fails.
func NewDB(t testing.TB, url string, cfg *pgqueue.Config) *DB {
	t.Helper()
	db := &DB{Schema: schemaName()}
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("pgqueuetest: connect to the test database: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{db.Schema}.Sanitize()); err != nil {
		t.Fatalf("pgqueuetest: create the test's schema: %v", err)
	}
	t.Cleanup(func() { dropSchema(t, url, db.Schema) })

	poolCfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("pgqueuetest: parse the database URL: %v", err)
	}
	poolCfg.ConnConfig.RuntimeParams["search_path"] = db.Schema
	if db.Pool, err = pgxpool.NewWithConfig(t.Context(), poolCfg); err != nil {
		t.Fatalf("pgqueuetest: pool: %v", err)
	}
	t.Cleanup(db.Pool.Close)
	db.SQL = stdlib.OpenDBFromPool(db.Pool)
	t.Cleanup(func() { _ = db.SQL.Close() })
	if err := pgqueue.Migrate(t.Context(), db.SQL); err != nil {
		t.Fatalf("pgqueuetest: %v", err)
	}

	if cfg == nil {
		cfg = &pgqueue.Config{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	}
	if db.Client, err = pgqueue.NewClient(db.Pool, cfg); err != nil {
		t.Fatalf("pgqueuetest: %v", err)
	}
	t.Cleanup(func() { _ = db.Client.Close() })
	return db
}

// schemaName returns "pgqueuetest_" followed by 12 random hex digits.
func schemaName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "pgqueuetest_" + hex.EncodeToString(b[:])
}

// dropSchema drops a test's schema with everything in it.
func dropSchema(t testing.TB, url, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Errorf("pgqueuetest: connect to drop the test's schema: %v", err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgqueuetest: drop the test's schema: %v", err)
	}
}
