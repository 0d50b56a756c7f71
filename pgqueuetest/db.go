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

// DB is a schema of one test's own, with pgqueue migrated into it (or what DBOptions.Migrate
// put there), and a pool, a database/sql handle and a client on it. Tests that each have a DB can run in parallel against one database.
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
// may create schemas), migrates pgqueue into it (pgqueue.Migrate), and returns it with a pool, a
// database/sql handle and a client made with cfg (nil: defaults, with the client's logs in the
// test's output). When the test ends, the client, the handle and the pool are closed and the
// schema is dropped with everything in it. NewDB fails the test if any step fails. It is
// NewDBWith with only DBOptions.Config set.
func NewDB(t testing.TB, url string, cfg *pgqueue.Config) *DB {
	t.Helper()
	return NewDBWith(t, url, &DBOptions{Config: cfg})
}

// DBOptions are the choices of NewDBWith. A nil *DBOptions means defaults.
type DBOptions struct {
	// Config is the client's configuration. Defaults to the client's defaults, with its logs in
	// the test's output.
	Config *pgqueue.Config

	// Migrate fills the test's new, empty schema: with the application's own migrations, when
	// pgqueue's live among them in the application's goose directory (pgqueue.WriteGooseMigrations)
	// and pgqueue.Migrate would apply them a second time, or with NoMigration, to leave the schema
	// empty. It runs before the client is made, with DB.SQL, whose connections use the schema
	// (search_path); it must not close it. An error fails the test. Defaults to pgqueue.Migrate.
	Migrate func(ctx context.Context, db *sql.DB) error
}

// NoMigration, as DBOptions.Migrate, leaves the test's schema empty: no table of pgqueue's or
// the application's, for a test that creates them itself, on DB.Pool or DB.SQL, after NewDBWith
// returns. The client works once pgqueue's tables exist.
func NoMigration(context.Context, *sql.DB) error { return nil }

// NewDBWith is NewDB with options: it creates a schema for the test in the database at url, fills
// it with opts.Migrate (pgqueue.Migrate unless set), and returns it with a pool, a database/sql
// handle and a client on it. When the test ends, the client, the handle and the pool are closed
// and the schema is dropped with everything in it. It fails the test if any step fails.
func NewDBWith(t testing.TB, url string, opts *DBOptions) *DB {
	t.Helper()
	var o DBOptions
	if opts != nil {
		o = *opts
	}
	if o.Migrate == nil {
		o.Migrate = pgqueue.Migrate
	}
	if o.Config == nil {
		o.Config = &pgqueue.Config{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}
	}
	db := &DB{Schema: schemaName()}
	createSchema(t, url, db.Schema)
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
	if err := o.Migrate(t.Context(), db.SQL); err != nil {
		t.Fatalf("pgqueuetest: migrate the test's schema: %v", err)
	}
	if db.Client, err = pgqueue.NewClient(db.Pool, o.Config); err != nil {
		t.Fatalf("pgqueuetest: %v", err)
	}
	t.Cleanup(func() { _ = db.Client.Close() })
	return db
}

// createSchema creates schema in the database at url, and drops it, with everything in it, when
// the test ends.
func createSchema(t testing.TB, url, schema string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("pgqueuetest: connect to the test database: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("pgqueuetest: create the test's schema: %v", err)
	}
	t.Cleanup(func() { dropSchema(t, url, schema) })
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
