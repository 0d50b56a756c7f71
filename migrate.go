package pgqueue

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations holds pgqueue's goose migrations, the .sql files themselves at its root
// (20261129120000_pgqueue_init.sql, …), for reading or for a goose provider of their own. Each
// runs inside goose's transaction. To put them in an application's goose directory, under
// versions the application chooses, use WriteGooseMigrations or GooseMigrations.
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
// in the same schema as pgqueue's tables.
const MigrationsVersionTable = "pgqueue_goose_version"

// migrationLockClass is the first key of the advisory lock that serializes Migrate runs; the
// second key is a hash of the target schema, so migrating one schema never waits for another.
const migrationLockClass = 0x70677175 // "pgqu"

// Migrate applies every pgqueue migration the schema does not have yet, in the first schema of
// the connection's search_path (where the tables are created and looked up); that schema must
// exist, or Migrate returns a *SchemaError. It is safe to call from many processes at once: a
// session advisory lock makes each migration run exactly once. Migrate is never called
// implicitly; call it at deploy or start-up with a role that may create tables. Use
// stdlib.OpenDBFromPool to get a *sql.DB from a *pgxpool.Pool.
//
// Migrate goes by the version the schema states (pgqueue_schema_version()), not only by its own
// version table: migrations that the application's goose applied are recorded there as applied
// first, and ones migrated down are taken out, so a schema can move from the application's
// goose to Migrate at any time.
func Migrate(ctx context.Context, db *sql.DB) error {
	p, err := newMigrationProvider(db)
	if err != nil {
		return fmt.Errorf("pgqueue: migrate: %w", err)
	}
	if err := syncMigrateVersionTable(ctx, db); err != nil {
		return fmt.Errorf("pgqueue: migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("pgqueue: migrate: %w", err)
	}
	return nil
}

// newMigrationProvider returns a goose provider over the embedded migrations, with pgqueue's own
// version table and lock.
func newMigrationProvider(db *sql.DB) (*goose.Provider, error) {
	return goose.NewProvider(goose.DialectPostgres, db, Migrations,
		goose.WithTableName(MigrationsVersionTable),
		goose.WithSessionLocker(schemaLocker{}),
		goose.WithDisableGlobalRegistry(true),
	)
}

// syncMigrateVersionTable makes Migrate's version table agree with the version the schema
// states, under the lock Migrate's provider takes, so that concurrent Migrate runs record each
// version once.
func syncMigrateVersionTable(ctx context.Context, db *sql.DB) error {
	ms, err := embeddedMigrations()
	if err != nil {
		return err
	}
	pairs := make([]versionPair, len(ms))
	for i, m := range ms {
		pairs[i] = versionPair{goose: m.version, schema: m.version}
	}
	_, err = withSchemaLock(ctx, db, func(conn *sql.Conn, have int64) ([]versionPair, error) {
		return recordVersions(ctx, conn, MigrationsVersionTable, pairs, have, true)
	})
	return err
}

// withSchemaLock runs fn on one connection holding the advisory lock that Migrate holds, with
// the schema's pgqueue version read under the lock. It returns a *SchemaError if no schema of the
// search_path exists.
func withSchemaLock(ctx context.Context, db *sql.DB, fn func(conn *sql.Conn, have int64) ([]versionPair, error)) (_ []versionPair, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	read := func(ctx context.Context, query string, dest ...any) error {
		return conn.QueryRowContext(ctx, query).Scan(dest...)
	}
	s, err := readSchemaState(ctx, read)
	if err != nil {
		return nil, err
	}
	if s.schema == "" {
		return nil, s.check()
	}
	if _, err := conn.ExecContext(ctx, migrateLockSQL, migrationLockClass); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	defer func() {
		if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), migrateUnlockSQL, migrationLockClass); uerr != nil && err == nil {
			err = fmt.Errorf("unlock: %w", uerr)
		}
	}()
	if s, err = readSchemaState(ctx, read); err != nil {
		return nil, err
	}
	return fn(conn, s.version)
}

// versionPair is one pgqueue migration as a goose directory numbers it (goose) and as pgqueue
// does (schema); they differ in an application's own goose directory.
type versionPair struct{ goose, schema int64 }

// recordVersions records in the goose version table, in one transaction, each migration of
// pairs whose schema version is at most have (the schema has it) and which is not recorded
// yet; with prune, it also takes out each one recorded whose schema version is above have. It
// creates the table, as goose does, if it does not exist, and returns what it recorded.
func recordVersions(ctx context.Context, conn *sql.Conn, table string, pairs []versionPair, have int64, prune bool) (_ []versionPair, err error) {
	store, err := database.NewStore(database.DialectPostgres, table)
	if err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	applied, err := appliedVersions(ctx, tx, store)
	if err != nil {
		return nil, err
	}
	var recorded []versionPair
	for _, p := range pairs {
		switch {
		case p.schema <= have && !applied[p.goose]:
			if err := store.Insert(ctx, tx, database.InsertRequest{Version: p.goose}); err != nil {
				return nil, fmt.Errorf("record version %d in %s: %w", p.goose, table, err)
			}
			recorded = append(recorded, p)
		case p.schema > have && applied[p.goose] && prune:
			if err := store.Delete(ctx, tx, p.goose); err != nil {
				return nil, fmt.Errorf("take version %d out of %s: %w", p.goose, table, err)
			}
		}
	}
	return recorded, tx.Commit()
}

// appliedVersions returns the versions recorded as applied in the store's table, which it
// creates first, with goose's zero version, if it does not exist.
func appliedVersions(ctx context.Context, tx *sql.Tx, store database.Store) (map[int64]bool, error) {
	exists, err := store.(database.StoreExtender).TableExists(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("look for %s: %w", store.Tablename(), err)
	}
	if !exists {
		if err := store.CreateVersionTable(ctx, tx); err != nil {
			return nil, fmt.Errorf("create %s: %w", store.Tablename(), err)
		}
		if err := store.Insert(ctx, tx, database.InsertRequest{Version: 0}); err != nil {
			return nil, fmt.Errorf("create %s: %w", store.Tablename(), err)
		}
	}
	rows, err := store.ListMigrations(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", store.Tablename(), err)
	}
	applied := make(map[int64]bool, len(rows))
	for _, r := range rows {
		applied[r.Version] = r.IsApplied
	}
	return applied, nil
}

// migrationFile is one of pgqueue's embedded migrations.
type migrationFile struct {
	version int64  // its goose version, which is its pgqueue schema version
	what    string // the rest of its name: "init.sql" in 20261129120000_pgqueue_init.sql
	name    string
}

// embeddedMigrations lists pgqueue's migrations in version order.
func embeddedMigrations() ([]migrationFile, error) {
	names, err := fs.Glob(Migrations, "*.sql")
	if err != nil {
		return nil, err
	}
	ms := make([]migrationFile, 0, len(names))
	for _, name := range names {
		v, err := goose.NumericComponent(name)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		what, ok := strings.CutPrefix(path.Base(name), fmt.Sprintf("%d_pgqueue_", v))
		if !ok {
			return nil, fmt.Errorf("migration %s: not named <version>_pgqueue_<what>.sql", name)
		}
		ms = append(ms, migrationFile{version: v, what: what, name: name})
	}
	slices.SortFunc(ms, func(a, b migrationFile) int { return cmp.Compare(a.version, b.version) })
	return ms, nil
}

// schemaLocker is a goose session locker that waits on a blocking advisory lock keyed by the
// target schema. goose's own Postgres locker polls pg_try_advisory_lock at intervals of at least
// a second; blocking lets concurrent migrators proceed the moment the lock is free.
type schemaLocker struct{}

func (schemaLocker) SessionLock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, migrateLockSQL, migrationLockClass)
	if err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	return nil
}

func (schemaLocker) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, migrateUnlockSQL, migrationLockClass)
	if err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}
