package pgqueue_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgqueue/pgqueue"
)

// examplePool returns a pool on a schema of its own in the test database, with pgqueue's
// migrations applied, and a function that closes the pool and drops the schema. The examples
// that print their output run against it. A program opens its pool on its own database
// (pgxpool.New(ctx, os.Getenv("DATABASE_URL"))) and runs pgqueue.Migrate at deploy or start-up
// (ExampleMigrate). Setup failures panic: an example has no *testing.T to fail.
func examplePool(ctx context.Context) (*pgxpool.Pool, func()) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "pgqueue_example_" + hex.EncodeToString(b[:])
	ident := pgx.Identifier{schema}.Sanitize()
	admin, err := pgx.Connect(ctx, pgqueue.DatabaseURL())
	if err != nil {
		panic(err)
	}
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
		panic(err)
	}
	cfg, err := pgxpool.ParseConfig(pgqueue.DatabaseURL())
	if err != nil {
		panic(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		panic(err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := pgqueue.Migrate(ctx, db); err != nil {
		panic(err)
	}
	return pool, func() {
		pool.Close()
		defer admin.Close(context.Background())
		if _, err := admin.Exec(context.Background(), "DROP SCHEMA "+ident+" CASCADE"); err != nil {
			panic(err)
		}
	}
}
