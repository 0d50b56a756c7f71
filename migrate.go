package pgqueue

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"math"
	"time"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations holds pgqueue's goose migrations, the .sql files themselves at its root
// (20261129120000_pgqueue_init.sql, …), for reading or for a goose provider of their own. Each
// runs inside one transaction, but those marked -- +goose NO TRANSACTION (indexes built
// CONCURRENTLY), whose statements run one by one. To put them in an application's goose directory, under versions
// the application chooses, use WriteGooseMigrations or GooseMigrations.
var Migrations fs.FS = mustSub(migrationFiles, "migrations")

// mustSub returns the subtree dir of fsys. fs.Sub fails only for an invalid path, and dir is a
// constant, so a failure is a bug caught by every test.
func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// MigrationsVersionTable is the table in which Migrate records the applied migrations, created
// in the same schema as pgqueue's tables. It is a goose version table, in goose's format.
const MigrationsVersionTable = "pgqueue_goose_version"

// migrationLockClass is the first key of the advisory lock that serializes Migrate runs; the
// second key is a hash of the target schema, so migrating one schema never waits for another.
// Every pgqueue release takes the same lock, so two releases never migrate one schema at once.
const migrationLockClass = 0x70677175 // "pgqu"

// Migration names one of pgqueue's migrations: one that MigrateTo, MigrateDown or
// MigrateDownOne ran.
type Migration struct {
	// Version is pgqueue's version of the migration: what pgqueue_schema_version() states once it
	// is the latest applied.
	Version int64
	// Name is its file in Migrations, e.g. 20261129120000_pgqueue_init.sql.
	Name string
}

// MigrationStatus is one of pgqueue's migrations and whether a schema has it: MigrateStatus's
// answer.
type MigrationStatus struct {
	// Version and Name are as in Migration.
	Version int64
	Name    string
	// Applied says whether the schema has the migration: its version is at most the version the
	// schema states, whichever tool applied it.
	Applied bool
	// AppliedAt is when MigrationsVersionTable recorded it as applied, read in the session's time
	// zone (goose records a local time without zone). It is zero if the migration is not applied,
	// or if that table does not record it: applied by the application's goose, and not yet seen
	// by a Migrate call, which records it.
	AppliedAt time.Time
}

// Migrate applies every pgqueue migration the schema does not have yet, in the first schema of
// the connection's search_path (where the tables are created and looked up); that schema must
// exist, or Migrate returns a *SchemaError. It is safe to call from many processes at once: it
// waits on a session advisory lock, so each migration runs exactly once. Each migration runs in
// a transaction of its own (a NO TRANSACTION one, statement by statement), recorded in
// MigrationsVersionTable. A statement waits at most 500 ms for a lock, so that the queue's
// statements queued behind its lock request wait no longer; a migration that timed out is rolled
// back and tried again after a pause, for about ten minutes of tries, or until ctx ends: Migrate
// blocks meanwhile (docs/migrations.md, "On a busy queue"). Migrate is never called
// implicitly; call it at deploy or start-up with a role that may create tables. Use
// stdlib.OpenDBFromPool to get a *sql.DB from a *pgxpool.Pool.
//
// Migrate runs pgqueue's goose files itself; it does not need goose. It goes by the version the
// schema states (pgqueue_schema_version()), not only by its own version table: migrations that
// the application's goose applied are recorded there as applied first, and ones migrated down
// are taken out, so a schema can move from the application's goose to Migrate at any time.
func Migrate(ctx context.Context, db *sql.DB) error {
	if _, err := runMigrator(ctx, db, func(m *migrator) ([]Migration, error) {
		return m.up(ctx, math.MaxInt64)
	}); err != nil {
		return migrateError(err, "migrate")
	}
	return nil
}

// MigrateTo is Migrate up to and including the migration of the given version, which must be
// the version of one of pgqueue's migrations (otherwise the error wraps ErrInvalidOption). It
// returns the migrations it applied, in order; none if the schema is at that version or above.
// It waits on Migrate's lock.
func MigrateTo(ctx context.Context, db *sql.DB, version int64) ([]Migration, error) {
	if err := checkMigrationVersion(version, false); err != nil {
		return nil, migrateError(err, "migrate to %d", version)
	}
	ran, err := runMigrator(ctx, db, func(m *migrator) ([]Migration, error) {
		return m.up(ctx, version)
	})
	if err != nil {
		return ran, migrateError(err, "migrate to %d", version)
	}
	return ran, nil
}

// MigrateDown migrates the schema down to the given version: it runs the Down section of each
// of pgqueue's migrations the schema has above it, newest first, each in a transaction of its
// own, and returns them in that order. version 0 takes out all of pgqueue's tables and
// functions, with the jobs in them; otherwise it must be the version of one of pgqueue's
// migrations (else the error wraps ErrInvalidOption). A schema at a version newer than this
// pgqueue knows must be migrated down by the release that knows it (the error wraps
// ErrSchemaVersion). It works in the schema Migrate would use and waits on Migrate's lock.
func MigrateDown(ctx context.Context, db *sql.DB, version int64) ([]Migration, error) {
	if err := checkMigrationVersion(version, true); err != nil {
		return nil, migrateError(err, "migrate down to %d", version)
	}
	ran, err := runMigrator(ctx, db, func(m *migrator) ([]Migration, error) {
		return m.down(ctx, version)
	})
	if err != nil {
		return ran, migrateError(err, "migrate down to %d", version)
	}
	return ran, nil
}

// MigrateDownOne migrates down the latest of pgqueue's migrations the schema has, and returns
// it; nothing if the schema has none. Otherwise it is MigrateDown.
func MigrateDownOne(ctx context.Context, db *sql.DB) ([]Migration, error) {
	ran, err := runMigrator(ctx, db, func(m *migrator) ([]Migration, error) {
		return m.down(ctx, m.previous())
	})
	if err != nil {
		return ran, migrateError(err, "migrate down one")
	}
	return ran, nil
}

// MigrateStatus lists pgqueue's migrations, oldest first, each with whether the schema has it
// and when it was applied. It only reads: the catalog, pgqueue_schema_version() and
// MigrationsVersionTable (if it exists), on one connection, without Migrate's lock. A
// search_path that names no existing schema gives a *SchemaError.
func MigrateStatus(ctx context.Context, db *sql.DB) ([]MigrationStatus, error) {
	st, err := migrationStatus(ctx, db)
	if err != nil {
		return nil, migrateError(err, "migrate status")
	}
	return st, nil
}

// checkMigrationVersion returns an error wrapping ErrInvalidOption unless version is that of one
// of pgqueue's migrations, or 0 where zero is allowed.
func checkMigrationVersion(version int64, zero bool) error {
	ms, err := embeddedMigrations()
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.version == version {
			return nil
		}
	}
	if zero && version == 0 {
		return nil
	}
	return invalidf("%d is not the version of a pgqueue migration (%d … %d)", version, ms[0].version, ms[len(ms)-1].version)
}

// withSchemaLock runs fn on one connection holding the advisory lock that Migrate holds, with
// the schema's state read under the lock. It returns a *SchemaError if no schema of the
// search_path exists.
func withSchemaLock[T any](ctx context.Context, db *sql.DB, fn func(conn *sql.Conn, s schemaState) (T, error)) (T, error) {
	return withSchema(ctx, db, true, fn)
}

// withSchema runs fn on one connection with the schema's state, holding the advisory lock that
// Migrate holds if lock (the state is then read under it). It returns a *SchemaError if no
// schema of the search_path exists.
func withSchema[T any](ctx context.Context, db *sql.DB, lock bool, fn func(conn *sql.Conn, s schemaState) (T, error)) (_ T, err error) {
	var zero T
	conn, err := db.Conn(ctx)
	if err != nil {
		return zero, err
	}
	defer conn.Close()
	s, err := readSchemaState(ctx, connReader(conn))
	if err != nil {
		return zero, err
	}
	if s.schema == "" {
		return zero, s.check()
	}
	if !lock {
		return fn(conn, s)
	}
	if _, err := conn.ExecContext(ctx, migrateLockSQL, migrationLockClass); err != nil {
		return zero, fmt.Errorf("lock: %w", err)
	}
	defer func() {
		if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), migrateUnlockSQL, migrationLockClass); uerr != nil && err == nil {
			err = fmt.Errorf("unlock: %w", uerr)
		}
	}()
	if s, err = readSchemaState(ctx, connReader(conn)); err != nil {
		return zero, err
	}
	return fn(conn, s)
}

// connReader is a rowReader over a database/sql connection.
func connReader(conn *sql.Conn) rowReader {
	return func(ctx context.Context, query string, dest ...any) error {
		return conn.QueryRowContext(ctx, query).Scan(dest...)
	}
}

// migrateError returns err as the error of the migration operation that format and args
// describe, with the package named once.
func migrateError(err error, format string, args ...any) error {
	return &opError{op: fmt.Sprintf(format, args...), err: err}
}
