package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testenv"
)

// testDSN is the database the tests make their schemas in.
var testDSN string

// newPool creates a schema of the test's own with pgqueue migrated into it, and returns a pool of
// at most maxConns connections whose search_path is that schema. The pool is closed and the
// schema dropped when the test ends.
func newPool(t *testing.T, maxConns int32) *pgxpool.Pool {
	t.Helper()
	pool := testenv.Pool(t, testDSN, testenv.NewSchema(t, testDSN), maxConns)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := pgqueue.Migrate(ctx, db); err != nil {
		t.Fatalf("migrating the test schema: %v", err)
	}
	return pool
}
