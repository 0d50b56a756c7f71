package pgqueue

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// Migrations holds pgqueue's goose migrations (migrations/*.sql) for users who apply them with
// their own goose tooling. The files carry timestamp versions and names that say pgqueue, so they
// can sit in an application's goose directory beside its own numbered files; each runs inside
// goose's transaction.
//
//go:embed migrations/*.sql
var Migrations embed.FS

// MigrationsVersionTable is the table in which Migrate records the applied migrations, created
// in the same schema as pgqueue's tables.
const MigrationsVersionTable = "pgqueue_goose_version"

// migrationLockClass is the first key of the advisory lock that serializes Migrate runs; the
// second key is a hash of the target schema, so migrating one schema never waits for another.
const migrationLockClass = 0x70677175 // "pgqu"

// Migrate applies every pgqueue migration not yet applied, in the first schema of the
// connection's search_path (where the tables are created and looked up). It is safe to call
// from many processes at once: a session advisory lock makes each migration run exactly once.
// Migrate is never called implicitly; call it at deploy or start-up with a role that may create
// tables. Use stdlib.OpenDBFromPool to get a *sql.DB from a *pgxpool.Pool.
func Migrate(ctx context.Context, db *sql.DB) error {
	p, err := newMigrationProvider(db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("pgqueue: migrate: %w", err)
	}
	return nil
}

// newMigrationProvider returns a goose provider over the embedded migrations, with pgqueue's own
// version table and lock.
func newMigrationProvider(db *sql.DB) (*goose.Provider, error) {
	fsys, err := fs.Sub(Migrations, "migrations")
	if err != nil {
		return nil, fmt.Errorf("pgqueue: migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys,
		goose.WithTableName(MigrationsVersionTable),
		goose.WithSessionLocker(schemaLocker{}),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return nil, fmt.Errorf("pgqueue: migrate: %w", err)
	}
	return p, nil
}

// schemaLocker is a goose session locker that waits on a blocking advisory lock keyed by the
// target schema. goose's own Postgres locker polls pg_try_advisory_lock at intervals of at least
// a second; blocking lets concurrent migrators proceed the moment the lock is free.
type schemaLocker struct{}

func (schemaLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, migrateLockSQL, migrationLockClass)
	if err != nil {
		return fmt.Errorf("pgqueue: migrate: lock: %w", err)
	}
	return nil
}

func (schemaLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, migrateUnlockSQL, migrationLockClass)
	if err != nil {
		return fmt.Errorf("pgqueue: migrate: unlock: %w", err)
	}
	return nil
}
