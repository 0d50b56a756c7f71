package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pgqueue/pgqueue"
)

// testDSN is the database the tests make their schemas in.
var testDSN string

// testDatabase returns the DSN that PGQUEUE_TEST_DATABASE_URL or DATABASE_URL gives.
func testDatabase() (string, func(), error) {
	for _, name := range []string{"PGQUEUE_TEST_DATABASE_URL", "DATABASE_URL"} {
		if dsn := os.Getenv(name); dsn != "" {
			return dsn, func() {}, nil
		}
	}
	return "", nil, errors.New("PGQUEUE_TEST_DATABASE_URL and DATABASE_URL are unset")
}

// noDatabaseMessage says that the tests found no database, why, and how to provide one.
func noDatabaseMessage(err error) string {
	return fmt.Sprintf(`the dashboard's browser tests need PostgreSQL and found none: %v

Provide one of:
  PGQUEUE_TEST_DATABASE_URL=postgres://user@host:5432/db?sslmode=disable  (tests create and drop schemas in it)
  DATABASE_URL=...                                                         (used when the first is unset)
`, err)
}

// newPool creates a schema of the test's own with pgqueue migrated into it, and returns a pool
// whose search_path is that schema. The pool is closed and the schema dropped when the test ends.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "e2e_" + hex.EncodeToString(b[:])
	admin, err := pgx.Connect(ctx, testDSN)
	if err != nil {
		t.Fatalf("connecting to the test database: %v", err)
	}
	defer admin.Close(ctx)
	quoted := pgx.Identifier{schema}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+quoted); err != nil {
		t.Fatalf("creating schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, testDSN)
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+quoted+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	cfg, err := pgxpool.ParseConfig(testDSN)
	if err != nil {
		t.Fatalf("parsing the test database URL: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connecting to the test database: %v", err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := pgqueue.Migrate(ctx, db); err != nil {
		t.Fatalf("migrating schema %s: %v", schema, err)
	}
	return pool
}
