package pgqueuetest

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestNewDB(t *testing.T) {
	t.Parallel()
	var schema string
	// A subtest of its own, so that its cleanup has run when it returns.
	t.Run("test", func(t *testing.T) {
		db := NewDB(t, databaseURL, nil)
		schema = db.Schema
		var n int
		err := db.Pool.QueryRow(t.Context(),
			"SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename IN ('pgqueue_jobs', 'pgqueue_queues')",
			db.Schema).Scan(&n)
		if err != nil || n != 2 {
			t.Fatalf("pgqueue's tables in the test's schema: %d, %v; want 2", n, err)
		}
		if _, err := db.Pool.Exec(t.Context(), "CREATE TABLE users (email text)"); err != nil {
			t.Fatal(err)
		}
		if err := db.Pool.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{db.Schema, "users"}.Sanitize()).Scan(&n); err != nil {
			t.Fatalf("the application's table is not in the test's schema: %v", err)
		}
	})
	conn, err := pgx.Connect(t.Context(), databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("schema %s outlived its test", schema)
	}
}

// TestNewDBWithMigrateError: DBOptions.Migrate runs in the test's schema, and its error fails
// the test, naming the step.
func TestNewDBWithMigrateError(t *testing.T) {
	t.Parallel()
	var schema string
	msg := failure(t, func(tb testing.TB) {
		NewDBWith(tb, databaseURL, &DBOptions{Migrate: func(ctx context.Context, db *sql.DB) error {
			if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
				return err
			}
			return errors.New("00002_users.sql: syntax error")
		}})
	})
	if !strings.Contains(msg, "pgqueuetest: migrate the test's schema: 00002_users.sql: syntax error") {
		t.Fatalf("NewDBWith with a failing Migrate reported %q", msg)
	}
	if !strings.HasPrefix(schema, "pgqueuetest_") {
		t.Fatalf("Migrate ran in schema %q, want the test's", schema)
	}
}
