package pgqueue_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/pgqueue/pgqueue"
)

// An application that runs goose itself writes pgqueue's migrations into its own goose
// directory, numbered after its own. With a later pgqueue release it calls WriteGooseMigrations
// again, with a first version above its newest file: only pgqueue's new migrations are written.
func ExampleWriteGooseMigrations() {
	dir, err := os.MkdirTemp("", "migrations")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	users := "-- +goose Up\nCREATE TABLE users (id bigint PRIMARY KEY);\n-- +goose Down\nDROP TABLE users;\n"
	if err := os.WriteFile(filepath.Join(dir, "00001_users.sql"), []byte(users), 0o644); err != nil {
		log.Fatal(err)
	}

	files, err := pgqueue.WriteGooseMigrations(dir, 2)
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range files {
		fmt.Println(f.Name)
	}
	// Output:
	// 00002_pgqueue_20261129120000_init.sql
	// 00003_pgqueue_20261129140000_operations.sql
	// 00004_pgqueue_20261201120000_notify.sql
	// 00005_pgqueue_20261201140000_schema_version.sql
	// 00006_pgqueue_20261201160000_repeat_fixed_rate.sql
	// 00007_pgqueue_20261201180000_schedules.sql
	// 00008_pgqueue_20261202120000_observability.sql
	// 00009_pgqueue_20261203120000_flow_control.sql
	// 00010_pgqueue_20261204120000_job_weights.sql
	// 00011_pgqueue_20261205120000_count_moves.sql
	// 00012_pgqueue_20261206120000_claims_held.sql
	// 00013_pgqueue_20261207120000_held_claims.sql
	// 00014_pgqueue_20261208120000_running_by_queue.sql
	// 00015_pgqueue_20261209120000_claimed_ahead.sql
	// 00016_pgqueue_20261210120000_rate_starts.sql
	// 00017_pgqueue_20261211120000_add_job.sql
	// 00018_pgqueue_20261212120000_workflows.sql
	// 00019_pgqueue_20261212130000_workflows_validate.sql
	// 00020_pgqueue_20261212140000_add_job_after.sql
	// 00021_pgqueue_20261213120000_line_places.sql
	// 00022_pgqueue_20261214120000_history.sql
}

// A schema that pgqueue.Migrate has kept moves to the application's goose: the files go into the
// goose directory, and MarkGooseApplied records in goose's version table those the schema
// already has, once, before the next goose up.
func ExampleMarkGooseApplied() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()

	files, err := pgqueue.GooseMigrations(0, 2) // the files written into the directory
	if err != nil {
		log.Fatal(err)
	}
	marked, err := pgqueue.MarkGooseApplied(ctx, db, "goose_db_version", files)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(marked), "of pgqueue's migrations recorded as applied")
}

// A deploy tool lists pgqueue's migrations and which the schema has, and moves the schema to a
// chosen version, up or down.
func ExampleMigrateStatus() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()

	status, err := pgqueue.MigrateStatus(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range status {
		fmt.Println(s.Name, s.Applied, s.AppliedAt.Format(time.RFC3339))
	}
	ran, err := pgqueue.MigrateTo(ctx, db, status[1].Version) // up to the second
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("applied", len(ran))
	ran, err = pgqueue.MigrateDownOne(ctx, db) // and the latest one down again
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("migrated down", ran)
}

// Before serving, a program can check that the schema is at the version its pgqueue needs; Run
// does this too.
func ExampleClient_CheckSchema() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	client, _ := pgqueue.NewClient(pool, nil)
	if err := client.CheckSchema(ctx); err != nil {
		// errors.Is(err, pgqueue.ErrSchemaVersion): the message says which version is there,
		// which is needed, and what to run.
		log.Fatal(err)
	}
}
