package pgqueue

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// checkGooseTable checks that the bundle's schema has the goose version table in goose's Postgres
// format, and that it records the versions want, in the order of its ids.
func checkGooseTable(t *testing.T, b *bundle, table string, want []int64) {
	t.Helper()
	ctx := t.Context()
	rows, err := b.pool.Query(ctx, `SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || is_identity ||
		' ' || coalesce(identity_generation, '') || ' ' || coalesce(column_default, '')
		FROM information_schema.columns WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`, b.schema, table)
	if err != nil {
		t.Fatal(err)
	}
	columns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	goose := []string{
		"id integer NO YES BY DEFAULT ",
		"version_id bigint NO NO  ",
		"is_applied boolean NO NO  ",
		"tstamp timestamp without time zone NO NO  now()",
	}
	if !slices.Equal(columns, goose) {
		t.Fatalf("%s has columns\n%s\nwant goose's\n%s", table, strings.Join(columns, "\n"), strings.Join(goose, "\n"))
	}
	rows, err = b.pool.Query(ctx, "SELECT version_id FROM "+pgx.Identifier{b.schema, table}.Sanitize()+" WHERE is_applied ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(versions, want) {
		t.Fatalf("%s records %v, want %v", table, versions, want)
	}
}

// allVersions returns 0 and the version of each of pgqueue's migrations up to and including
// upTo: what a version table holds when the schema is at upTo.
func allVersions(t *testing.T, upTo int64) []int64 {
	t.Helper()
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	vs := []int64{0}
	for _, m := range ms {
		if m.version <= upTo {
			vs = append(vs, m.version)
		}
	}
	return vs
}

// Migrate creates its version table as goose does, with the zero version first, records each
// migration it applies in order, and migrating down deletes each one's row.
func TestMigratorVersionTable(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	migrate(t, b.pool)
	checkGooseTable(t, b, MigrationsVersionTable, allVersions(t, SchemaVersion))
	ms, _ := embeddedMigrations()
	b.migrateDownTo(ms[1].version)
	checkGooseTable(t, b, MigrationsVersionTable, allVersions(t, ms[1].version))
	b.migrateDownTo(0)
	checkGooseTable(t, b, MigrationsVersionTable, []int64{0})
}

// MigrateTo, MigrateDown and MigrateDownOne run what they say and return it, MigrateStatus shows
// it, and versions that are not pgqueue's are refused.
func TestMigrateToAndDown(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	c := b.newClient()
	ctx := t.Context()
	db := b.db()
	ms, _ := embeddedMigrations()
	checkMigrateStatus(t, db, ms, 0)

	ran, err := MigrateTo(ctx, db, ms[1].version)
	if err != nil || !slices.Equal(migrationNames(ran), []string{ms[0].name, ms[1].name}) || ran[1].Version != ms[1].version {
		t.Fatalf("MigrateTo %d: %+v (%v)", ms[1].version, ran, err)
	}
	schemaAt(t, c, ms[1].version)
	checkMigrateStatus(t, db, ms, 2)
	if ran, err := MigrateTo(ctx, db, ms[0].version); err != nil || len(ran) != 0 {
		t.Fatalf("MigrateTo an older version: %+v (%v), want nothing", ran, err)
	}
	ran, err = MigrateDownOne(ctx, db)
	if err != nil || !slices.Equal(migrationNames(ran), []string{ms[1].name}) {
		t.Fatalf("MigrateDownOne: %+v (%v)", ran, err)
	}
	schemaAt(t, c, ms[0].version)
	checkMigrateStatus(t, db, ms, 1)

	migrate(t, b.pool)
	checkMigrateStatus(t, db, ms, len(ms))
	ran, err = MigrateDown(ctx, db, ms[len(ms)-3].version)
	if err != nil || !slices.Equal(migrationNames(ran), []string{ms[len(ms)-1].name, ms[len(ms)-2].name}) {
		t.Fatalf("MigrateDown: %+v (%v)", ran, err)
	}
	schemaAt(t, c, ms[len(ms)-3].version)
	if ran, err := MigrateDown(ctx, db, ms[len(ms)-1].version); err != nil || len(ran) != 0 {
		t.Fatalf("MigrateDown to a newer version: %+v (%v), want nothing", ran, err)
	}
	for range len(ms) - 2 {
		if ran, err := MigrateDownOne(ctx, db); err != nil || len(ran) != 1 {
			t.Fatalf("MigrateDownOne: %+v (%v)", ran, err)
		}
	}
	schemaAt(t, c, 0)
	checkMigrateStatus(t, db, ms, 0)
	if ran, err := MigrateDownOne(ctx, db); err != nil || len(ran) != 0 {
		t.Fatalf("MigrateDownOne on an empty schema: %+v (%v)", ran, err)
	}

	checkMigrateRefusesVersions(t, db, ms)
}

// migrationNames returns the names of the migrations in ran, in order.
func migrationNames(ran []Migration) []string {
	var s []string
	for _, m := range ran {
		s = append(s, m.Name)
	}
	return s
}

// checkMigrateStatus checks that MigrateStatus lists every migration of ms, in order, the first
// applied of them as applied (within the last hour) and the rest as not.
func checkMigrateStatus(t testing.TB, db *sql.DB, ms []migrationFile, applied int) {
	t.Helper()
	st, err := MigrateStatus(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != len(ms) {
		t.Fatalf("MigrateStatus lists %d migrations, want %d", len(st), len(ms))
	}
	for i, s := range st {
		if s.Version != ms[i].version || s.Name != ms[i].name || s.Applied != (i < applied) ||
			s.Applied == s.AppliedAt.IsZero() || (s.Applied && time.Since(s.AppliedAt).Abs() > time.Hour) {
			t.Errorf("status of %s with %d applied: %+v", ms[i].name, applied, s)
		}
	}
}

// checkMigrateRefusesVersions checks that MigrateTo refuses versions that are not among ms's
// with ErrInvalidOption (naming the package once), and that MigrateDown does too, except 0.
func checkMigrateRefusesVersions(t testing.TB, db *sql.DB, ms []migrationFile) {
	t.Helper()
	ctx := t.Context()
	for _, v := range []int64{-1, 0, 1, ms[0].version + 1, SchemaVersion + 1} {
		if _, err := MigrateTo(ctx, db, v); !errors.Is(err, ErrInvalidOption) || strings.Count(err.Error(), "pgqueue:") != 1 {
			t.Errorf("MigrateTo %d: %v, want ErrInvalidOption", v, err)
		}
		if _, err := MigrateDown(ctx, db, v); (v == 0) != (err == nil) || (v != 0 && !errors.Is(err, ErrInvalidOption)) {
			t.Errorf("MigrateDown %d: %v", v, err)
		}
	}
}

// A schema newer than this pgqueue knows is not migrated down (its Down statements are not
// here), and Migrate leaves it alone.
func TestMigrateDownNewerSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec("CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint LANGUAGE sql STABLE AS 'SELECT 20991231000000::bigint'")
	db := b.db()
	for name, call := range map[string]func() ([]Migration, error){
		"MigrateDown":    func() ([]Migration, error) { return MigrateDown(t.Context(), db, 0) },
		"MigrateDownOne": func() ([]Migration, error) { return MigrateDownOne(t.Context(), db) },
	} {
		ran, err := call()
		if !errors.Is(err, ErrSchemaVersion) || len(ran) != 0 || !strings.Contains(err.Error(), "20991231000000") {
			t.Errorf("%s: %+v, %v", name, ran, err)
		}
	}
	if err := Migrate(t.Context(), db); err != nil {
		t.Fatalf("Migrate on a newer schema: %v", err)
	}
	if !tableExists(t, b, "pgqueue_jobs") {
		t.Fatal("pgqueue_jobs is gone")
	}
}

// A migration that fails is rolled back whole, statements and record: the schema stays at the
// migration before, and the error names the file.
func TestMigrateFailureRollsBack(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	ms, _ := embeddedMigrations()
	b.migrateUpTo(ms[0].version)
	b.exec("CREATE TABLE pgqueue_queues (x int)") // the second migration creates it
	_, err := MigrateTo(t.Context(), b.db(), ms[1].version)
	if err == nil || !strings.Contains(err.Error(), ms[1].name) || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("MigrateTo over a conflicting table: %v", err)
	}
	schemaAt(t, b.newClient(), ms[0].version)
	checkGooseTable(t, b, MigrationsVersionTable, allVersions(t, ms[0].version))
	var unique bool
	if err := b.pool.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = 'pgqueue_jobs'::regclass
		AND attname = 'unique_key' AND NOT attisdropped)`).Scan(&unique); err != nil || unique {
		t.Fatalf("the failed migration's first statement stayed (%v)", err)
	}
	b.exec("DROP TABLE pgqueue_queues")
	migrate(t, b.pool)
	schemaAt(t, b.newClient(), SchemaVersion)
}

// Migrate waits on the lock that every pgqueue release takes to migrate a schema: the same
// advisory lock, held here by another session, keeps it waiting until released.
func TestMigrateWaitsForTheLock(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	ctx := t.Context()
	holder, err := b.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	if _, err := holder.Exec(ctx, migrateLockSQL, migrationLockClass); err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, b.schema, 2)
	done := make(chan error, 1)
	go func() {
		db := stdlib.OpenDBFromPool(pool)
		defer db.Close()
		done <- Migrate(ctx, db)
	}()
	// Wait until Migrate's session waits for the advisory lock.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting bool
		if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'
			AND classid = $1 AND objid = hashtext($2)::oid AND NOT granted)`, migrationLockClass, b.schema).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Migrate finished (%v) while another session held the lock", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("Migrate never waited on the lock")
		}
	}
	if tableExists(t, b, "pgqueue_jobs") {
		t.Fatal("Migrate created tables without the lock")
	}
	if _, err := holder.Exec(ctx, migrateUnlockSQL, migrationLockClass); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Migrate did not finish once the lock was free")
	}
	schemaAt(t, b.newClient(), SchemaVersion)
}

// MigrateStatus reads a schema without a version table (the application's goose applied
// pgqueue's files): applied, with no time; and says so for a missing schema.
func TestMigrateStatusWithoutVersionTable(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	ms, _ := embeddedMigrations()
	b.migrateUpTo(ms[1].version)
	b.exec("DROP TABLE " + MigrationsVersionTable)
	st, err := MigrateStatus(t.Context(), b.db())
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range st {
		if s.Applied != (i <= 1) || !s.AppliedAt.IsZero() {
			t.Errorf("%+v", s)
		}
	}
	if tableExists(t, b, MigrationsVersionTable) {
		t.Fatal("MigrateStatus created the version table")
	}
	missing := newPool(t, randomName("pgqueue_test_missing_"), 1)
	db := stdlib.OpenDBFromPool(missing)
	defer db.Close()
	var se *SchemaError
	if _, err := MigrateStatus(context.Background(), db); !errors.As(err, &se) || strings.Count(err.Error(), "pgqueue:") != 1 {
		t.Fatalf("MigrateStatus on a missing schema: %v", err)
	}
}
