package pgqueue

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"slices"
	"time"
)

// The migrator runs pgqueue's migrations for Migrate and its kin. It replaces a goose provider so
// that an application importing pgqueue does not get goose's module, which requires every
// database driver goose supports, in its module graph. It keeps what pgqueue used of goose: the
// files, the version table in goose's format, and a session advisory lock per schema.

// migration is one of pgqueue's migrations with its statements.
type migration struct {
	migrationFile
	parsedMigration
}

// public returns the migration as Migration.
func (m migration) public() Migration { return Migration{Version: m.version, Name: m.name} }

// loadMigrations reads and parses pgqueue's migrations, in version order.
func loadMigrations() ([]migration, error) {
	files, err := embeddedMigrations()
	if err != nil {
		return nil, err
	}
	ms := make([]migration, len(files))
	for i, f := range files {
		data, err := fs.ReadFile(Migrations, f.name)
		if err != nil {
			return nil, err
		}
		p, err := parseGooseMigration(data)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", f.name, err)
		}
		ms[i] = migration{f, p}
	}
	return ms, nil
}

// migrator runs migrations on one connection that holds Migrate's lock. state.version is the
// version the schema states, kept up to date as migrations run.
type migrator struct {
	conn       *sql.Conn
	state      schemaState
	migrations []migration
	table      versionTable
}

// runMigrator runs op under Migrate's lock, once Migrate's version table agrees with the version
// the schema states.
func runMigrator(ctx context.Context, db *sql.DB, op func(m *migrator) ([]Migration, error)) ([]Migration, error) {
	ms, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	return runMigrations(ctx, db, ms, op)
}

// runMigrations is runMigrator over the migrations ms, in version order.
func runMigrations(ctx context.Context, db *sql.DB, ms []migration, op func(m *migrator) ([]Migration, error)) ([]Migration, error) {
	return withSchemaLock(ctx, db, func(conn *sql.Conn, s schemaState) ([]Migration, error) {
		m := &migrator{conn: conn, state: s, migrations: ms, table: versionTable{name: MigrationsVersionTable}}
		pairs := make([]versionPair, len(ms))
		for i, mg := range ms {
			pairs[i] = versionPair{goose: mg.version, schema: mg.version}
		}
		if _, err := recordVersions(ctx, conn, m.table, pairs, s.version, true); err != nil {
			return nil, err
		}
		return op(m)
	})
}

// up applies, in order, the migrations above the schema's version up to version to.
func (m *migrator) up(ctx context.Context, to int64) ([]Migration, error) {
	var ran []Migration
	for _, mg := range m.migrations {
		if mg.version <= m.state.version || mg.version > to {
			continue
		}
		if err := m.run(ctx, mg, true); err != nil {
			return ran, err
		}
		ran = append(ran, mg.public())
		m.state.version = mg.version
	}
	return ran, nil
}

// down migrates down, newest first, the migrations the schema has above version to.
func (m *migrator) down(ctx context.Context, to int64) ([]Migration, error) {
	if latest := m.migrations[len(m.migrations)-1].version; m.state.version > latest {
		return nil, fmt.Errorf("schema %q is at pgqueue schema version %d, newer than this pgqueue knows (%d): "+
			"migrate it down with the pgqueue release that brought that version: %w", m.state.schema, m.state.version, latest, ErrSchemaVersion)
	}
	var ran []Migration
	for i, mg := range slices.Backward(m.migrations) {
		if mg.version <= to || mg.version > m.state.version {
			continue
		}
		if err := m.run(ctx, mg, false); err != nil {
			return ran, err
		}
		ran = append(ran, mg.public())
		m.state.version = 0
		if i > 0 {
			m.state.version = m.migrations[i-1].version
		}
	}
	return ran, nil
}

// previous returns the version of the migration before the schema's latest: 0 if that is the
// first or the schema has none.
func (m *migrator) previous() int64 {
	prev := int64(0)
	for _, mg := range m.migrations {
		if mg.version >= m.state.version {
			break
		}
		prev = mg.version
	}
	return prev
}

// run runs one migration's Up or Down statements and records it in the version table: in one
// transaction, as goose runs a migration, or, a NO TRANSACTION one, each statement on its own
// and then the record. Every statement waits at most migrationLockTimeout for a lock (a file may
// set another), so that a migration never holds the claims and settles queued behind its lock
// request for longer; one that timed out is rolled back (or, without a transaction, stopped) and
// run again from its first statement after a pause, until it gets its locks or ctx ends.
func (m *migrator) run(ctx context.Context, mg migration, up bool) error {
	direction, stmts := "up", mg.up
	if !up {
		direction, stmts = "down", mg.down
	}
	once := func() error {
		if mg.noTx {
			return m.runNoTx(ctx, mg, stmts, up)
		}
		return m.runTx(ctx, mg, stmts, up)
	}
	if err := retryLockTimeouts(ctx, once); err != nil {
		return fmt.Errorf("%s %s: %w", mg.name, direction, err)
	}
	return nil
}

// runTx runs stmts and records the migration in one transaction.
func (m *migrator) runTx(ctx context.Context, mg migration, stmts []string, up bool) (err error) {
	tx, err := m.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err := tx.ExecContext(ctx, setLockTimeoutSQL, lockTimeoutSetting(), true); err != nil {
		return err
	}
	for i, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("statement %d: %w", i+1, err)
		}
	}
	if err := m.record(ctx, tx, mg, up); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// runNoTx runs stmts one by one on the migrator's connection, each committed as it ends, then
// records the migration. The lock timeout is the session's for the migration's time (a
// statement of the file may change it), and reset after.
func (m *migrator) runNoTx(ctx context.Context, mg migration, stmts []string, up bool) (err error) {
	if _, err := m.conn.ExecContext(ctx, setLockTimeoutSQL, lockTimeoutSetting(), false); err != nil {
		return err
	}
	defer func() {
		if _, rerr := m.conn.ExecContext(context.WithoutCancel(ctx), "RESET lock_timeout"); rerr != nil && err == nil {
			err = fmt.Errorf("reset lock_timeout: %w", rerr)
		}
	}()
	for i, s := range stmts {
		if _, err := m.conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("statement %d: %w", i+1, err)
		}
	}
	tx, err := m.conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := m.record(ctx, tx, mg, up); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// record records mg in the version table as applied (up) or takes it out.
func (m *migrator) record(ctx context.Context, tx *sql.Tx, mg migration, up bool) error {
	if up {
		return m.table.insert(ctx, tx, mg.version)
	}
	return m.table.delete(ctx, tx, mg.version)
}

// versionPair is one pgqueue migration as a goose directory numbers it (goose) and as pgqueue
// does (schema); they differ in an application's own goose directory.
type versionPair struct{ goose, schema int64 }

// recordVersions records in the goose version table, in one transaction, each migration of
// pairs whose schema version is at most have (the schema has it) and which is not recorded
// yet; with prune, it also takes out each one recorded whose schema version is above have. It
// creates the table, as goose does, if it does not exist, and returns what it recorded.
func recordVersions(ctx context.Context, conn *sql.Conn, table versionTable, pairs []versionPair, have int64, prune bool) (_ []versionPair, err error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := table.ensure(ctx, tx); err != nil {
		return nil, err
	}
	applied, err := table.applied(ctx, tx)
	if err != nil {
		return nil, err
	}
	var recorded []versionPair
	for _, p := range pairs {
		_, isApplied := applied[p.goose]
		switch {
		case p.schema <= have && !isApplied:
			if err := table.insert(ctx, tx, p.goose); err != nil {
				return nil, err
			}
			recorded = append(recorded, p)
		case p.schema > have && isApplied && prune:
			if err := table.delete(ctx, tx, p.goose); err != nil {
				return nil, err
			}
		}
	}
	return recorded, tx.Commit()
}

// migrationStatus is MigrateStatus.
func migrationStatus(ctx context.Context, db *sql.DB) ([]MigrationStatus, error) {
	ms, err := embeddedMigrations()
	if err != nil {
		return nil, err
	}
	return withSchema(ctx, db, false, func(conn *sql.Conn, s schemaState) ([]MigrationStatus, error) {
		return statusOf(ctx, conn, s, ms)
	})
}

// statusOf is MigrateStatus of the migrations ms over conn, for a schema in state s.
func statusOf(ctx context.Context, conn *sql.Conn, s schemaState, ms []migrationFile) ([]MigrationStatus, error) {
	table := versionTable{name: MigrationsVersionTable}
	var exists bool
	if err := conn.QueryRowContext(ctx, gooseVersionExistsSQL, "", table.name).Scan(&exists); err != nil {
		return nil, fmt.Errorf("look for %s: %w", table, err)
	}
	var applied map[int64]time.Time
	if exists {
		var err error
		if applied, err = table.applied(ctx, conn); err != nil {
			return nil, err
		}
	}
	st := make([]MigrationStatus, len(ms))
	for i, m := range ms {
		st[i] = MigrationStatus{Version: m.version, Name: m.name, Applied: m.version <= s.version}
		if st[i].Applied {
			st[i].AppliedAt = applied[m.version]
		}
	}
	return st, nil
}
