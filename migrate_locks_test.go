package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// testMigration is a migration after SchemaVersion, made by a test: its Up and Down statements,
// each section followed by the statement that states its schema version, as pgqueue's own do.
func testMigration(version int64, noTx bool, up, down []string) migration {
	states := func(v int64) string {
		return fmt.Sprintf("CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint "+
			"LANGUAGE sql STABLE PARALLEL SAFE AS 'SELECT %d::bigint'", v)
	}
	return migration{
		migrationFile:   migrationFile{version: version, what: "test.sql", name: fmt.Sprintf("%d_pgqueue_test.sql", version)},
		parsedMigration: parsedMigration{up: append(up, states(version)), down: append(down, states(SchemaVersion)), noTx: noTx},
	}
}

// runTestMigration migrates the bundle's schema, at SchemaVersion, up to mg (up) or back down
// from it, with pgqueue's migrations and mg.
func (b *bundle) runTestMigration(ctx context.Context, mg migration, up bool) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	_, err = runMigrations(ctx, b.db(), append(ms, mg), func(m *migrator) ([]Migration, error) {
		if up {
			return m.up(ctx, mg.version)
		}
		return m.down(ctx, SchemaVersion)
	})
	return err
}

// A migration whose lock waits behind a transaction that uses the jobs table times out after
// migrationLockTimeout, rolls back and tries again, so that what queues behind its lock request
// waits about that long, not until the transaction ends; once the transaction has ended, the
// migration gets its lock and is applied. Before, the migration waited the whole transaction,
// and every statement on the table waited behind it.
func TestMigrationRetriesAfterLockTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const hold = 3 * time.Second
	blocker, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := blocker.Exec(ctx, "SELECT count(*) FROM pgqueue_jobs"); err != nil { // ACCESS SHARE until it ends
		t.Fatal(err)
	}
	time.AfterFunc(hold, func() { _ = blocker.Rollback(context.Background()) })

	mg := testMigration(SchemaVersion+1, false, []string{"ALTER TABLE pgqueue_jobs ADD COLUMN test_col int"},
		[]string{"ALTER TABLE pgqueue_jobs DROP COLUMN test_col"})
	probeCtx, stopProbe := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var longest time.Duration
	var probeErr error
	wg.Go(func() { longest, probeErr = probeTable(probeCtx, b) })
	start := time.Now()
	err = b.runTestMigration(ctx, mg, true)
	took := time.Since(start)
	stopProbe()
	wg.Wait()
	if err != nil || probeErr != nil {
		t.Fatalf("migration: %v; probe: %v", err, probeErr)
	}
	if took < hold-100*time.Millisecond {
		t.Fatalf("the migration took %s, with the table in use for %s", took, hold)
	}
	schemaAt(t, b.newClient(), mg.version)
	// Each try held the probe's reads for at most the lock timeout; the whole hold would be 3 s.
	if longest >= hold-time.Second {
		t.Fatalf("a read of the jobs table waited %s behind the migration's lock request", longest)
	}
	t.Logf("migration applied after %s; the longest read of the table meanwhile took %s", took.Round(time.Millisecond), longest.Round(time.Millisecond))
	if err := b.runTestMigration(ctx, mg, false); err != nil {
		t.Fatal(err)
	}
	schemaAt(t, b.newClient(), SchemaVersion)
}

// probeTable reads the jobs table every 20 ms until ctx ends, and returns the longest read.
func probeTable(ctx context.Context, b *bundle) (time.Duration, error) {
	var longest time.Duration
	for ctx.Err() == nil {
		start := time.Now()
		if _, err := b.pool.Exec(ctx, "SELECT count(*) FROM pgqueue_jobs"); err != nil {
			if ctx.Err() != nil {
				break
			}
			return longest, err
		}
		longest = max(longest, time.Since(start))
		time.Sleep(20 * time.Millisecond)
	}
	return longest, nil
}

// A migration still waiting for its lock when its context ends stops with the context's error,
// naming the tries, and the schema stays at its version: whether the context ends in a pause
// between tries or while a try waits (after 0.7 s: the second try waits from about 0.55 s on).
func TestMigrationLockWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	for _, wait := range []time.Duration{2 * time.Second, 700 * time.Millisecond} {
		t.Run(wait.String(), func(t *testing.T) {
			t.Parallel()
			migrationLockWaitEnds(t, wait)
		})
	}
}

func migrationLockWaitEnds(t *testing.T, wait time.Duration) {
	b := setup(t)
	blocker, err := b.pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = blocker.Rollback(context.Background()) }()
	if _, err := blocker.Exec(t.Context(), "SELECT count(*) FROM pgqueue_jobs"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	defer cancel()
	mg := testMigration(SchemaVersion+1, false, []string{"ALTER TABLE pgqueue_jobs ADD COLUMN test_col int"}, []string{"SELECT 1"})
	err = b.runTestMigration(ctx, mg, true)
	var pgErr *pgconn.PgError
	if !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &pgErr) || pgErr.Code != "55P03" {
		t.Fatalf("migration behind a held lock, context ended: %v", err)
	}
	schemaAt(t, b.newClient(), SchemaVersion)
}

// A NO TRANSACTION migration runs its statements one by one, outside a transaction, so that it
// can build an index CONCURRENTLY, and is recorded once they have all run; down runs the same way.
// Should a statement fail, the migration is not recorded, the schema keeps its version, and a
// migration written by the rules (each statement safe to run again) is applied by the next run.
func TestNoTransactionMigration(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	b.exec("CREATE TABLE test_gate (open boolean)")
	b.exec("INSERT INTO test_gate VALUES (false)")
	mg := testMigration(SchemaVersion+1, true, []string{
		"DROP INDEX CONCURRENTLY IF EXISTS pgqueue_jobs_test_idx",
		"CREATE INDEX CONCURRENTLY pgqueue_jobs_test_idx ON pgqueue_jobs (created_at)",
		"SELECT 1 / (CASE WHEN open THEN 1 ELSE 0 END) FROM test_gate", // fails until the gate opens
	}, []string{"DROP INDEX CONCURRENTLY IF EXISTS pgqueue_jobs_test_idx"})

	if err := b.runTestMigration(ctx, mg, true); err == nil {
		t.Fatal("a failing statement of a NO TRANSACTION migration did not fail it")
	}
	schemaAt(t, b.newClient(), SchemaVersion)
	checkGooseTable(t, b, MigrationsVersionTable, allVersions(t, SchemaVersion))
	b.exec("UPDATE test_gate SET open = true")
	if err := b.runTestMigration(ctx, mg, true); err != nil {
		t.Fatal(err)
	}
	schemaAt(t, b.newClient(), mg.version)
	checkGooseTable(t, b, MigrationsVersionTable, append(allVersions(t, SchemaVersion), mg.version))
	var valid bool
	if err := b.pool.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = 'pgqueue_jobs_test_idx'::regclass`).Scan(&valid); err != nil || !valid {
		t.Fatalf("the index built concurrently: valid %v (%v)", valid, err)
	}
	if err := b.runTestMigration(ctx, mg, false); err != nil {
		t.Fatal(err)
	}
	schemaAt(t, b.newClient(), SchemaVersion)
	var left bool
	if err := b.pool.QueryRow(ctx, "SELECT to_regclass('pgqueue_jobs_test_idx') IS NOT NULL").Scan(&left); err != nil || left {
		t.Fatalf("the index is still there after down (%v)", err)
	}
}
