package pgqueue

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

// appFile is one of the application's own goose migrations: a table of its own.
func appFile(version int64, table string) (string, []byte) {
	return fmt.Sprintf("%05d_%s.sql", version, table),
		fmt.Appendf(nil, "-- +goose Up\nCREATE TABLE %[1]s (id bigint PRIMARY KEY);\n-- +goose Down\nDROP TABLE %[1]s;\n", table)
}

// appDir is an application's goose directory in memory.
type appDir struct{ fstest.MapFS }

func (d appDir) own(version int64, table string) {
	name, data := appFile(version, table)
	d.MapFS[name] = &fstest.MapFile{Data: data}
}

func (d appDir) add(files []GooseFile) {
	for _, f := range files {
		d.MapFS[f.Name] = &fstest.MapFile{Data: f.SQL}
	}
}

// gooseFiles calls GooseMigrations, failing the test on an error.
func gooseFiles(t *testing.T, after, first int64) []GooseFile {
	t.Helper()
	files, err := GooseMigrations(after, first)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// appGoose returns the application's plain goose provider (default version table, no
// out-of-order migrations) over fsys on the bundle's pool.
func (b *bundle) appGoose(fsys fs.FS) *goose.Provider {
	b.t.Helper()
	p, err := goose.NewProvider(goose.DialectPostgres, b.db(), fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		b.t.Fatal(err)
	}
	return p
}

// db returns a *sql.DB over the bundle's pool, closed when the test ends.
func (b *bundle) db() *sql.DB {
	db := stdlib.OpenDBFromPool(b.pool)
	b.t.Cleanup(func() { _ = db.Close() })
	return db
}

// up applies p's pending migrations and checks how many it applied.
func up(t *testing.T, p *goose.Provider, want int) {
	t.Helper()
	results, err := p.Up(t.Context())
	if err != nil {
		t.Fatalf("goose up: %v", err)
	}
	if len(results) != want {
		t.Fatalf("goose up applied %d migrations, want %d", len(results), want)
	}
}

// schemaAt checks the version the schema states (or shows).
func schemaAt(t *testing.T, c *Client, want int64) {
	t.Helper()
	if want == SchemaVersion {
		if err := c.CheckSchema(t.Context()); err != nil {
			t.Fatalf("CheckSchema: %v", err)
		}
		return
	}
	if se := schemaError(t, c); se.Have != want {
		t.Fatalf("schema at %d, want %d", se.Have, want)
	}
}

func TestGooseMigrations(t *testing.T) {
	t.Parallel()
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	files := gooseFiles(t, 0, 5)
	if len(files) != len(ms) {
		t.Fatalf("%d files, want %d", len(files), len(ms))
	}
	for i, f := range files {
		m := ms[i]
		want := fmt.Sprintf("%05d_pgqueue_%d_%s", 5+i, m.version, m.what)
		original, err := fs.ReadFile(Migrations, m.name)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name != want || f.Version != int64(5+i) || f.SchemaVersion != m.version || !bytes.Equal(f.SQL, original) {
			t.Errorf("file %d: %s (version %d, pgqueue %d), want %s (%d, %d) with the SQL of %s",
				i, f.Name, f.Version, f.SchemaVersion, want, 5+i, m.version, m.name)
		}
		if v, err := goose.NumericComponent(f.Name); err != nil || v != f.Version {
			t.Errorf("goose reads version %d (%v) from %s", v, err, f.Name)
		}
	}
	rest := gooseFiles(t, ms[1].version, 20270101000000)
	if len(rest) != len(ms)-2 || rest[0].SchemaVersion != ms[2].version || rest[0].Name[:15] != "20270101000000_" {
		t.Fatalf("after %d: %+v", ms[1].version, rest)
	}
	if none := gooseFiles(t, SchemaVersion, 9); len(none) != 0 {
		t.Fatalf("after the latest: %d files", len(none))
	}
	for _, bad := range [][2]int64{{0, 0}, {0, -1}, {12345, 1}, {SchemaVersion + 1, 1}} {
		if _, err := GooseMigrations(bad[0], bad[1]); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("GooseMigrations(%d, %d): %v, want ErrInvalidOption", bad[0], bad[1], err)
		}
	}
}

// An application's goose directory holds its own migrations before and after pgqueue's, which
// carry the application's versions; plain goose applies them, and later pgqueue's next
// migrations, added under new versions after more of the application's own; then down and up.
func TestGooseApplicationDirectory(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	c := b.newClient()
	ctx := t.Context()
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	const older = 2 // the pgqueue release the application started with had two migrations

	dir := appDir{fstest.MapFS{}}
	dir.own(1, "users")
	dir.add(gooseFiles(t, 0, 2)[:older])
	dir.own(2+older, "orders")
	up(t, b.appGoose(dir), 2+older)
	schemaAt(t, c, ms[older-1].version)

	// The next pgqueue release: its new migrations go in after the application's latest.
	next := 2 + older + 1
	newer := gooseFiles(t, ms[older-1].version, int64(next))
	dir.add(newer)
	dir.own(int64(next+len(newer)), "invoices")
	p := b.appGoose(dir)
	up(t, p, len(newer)+1)
	schemaAt(t, c, SchemaVersion)
	for _, table := range []string{"users", "orders", "invoices", "pgqueue_jobs", "pgqueue_queues"} {
		if !tableExists(t, b, table) {
			t.Errorf("table %s missing after goose up", table)
		}
	}
	if _, err := newQueue[string](t, c, "q").Enqueue(ctx, "hello", nil); err != nil {
		t.Fatal(err)
	}

	if _, err := p.DownTo(ctx, int64(next-1)); err != nil {
		t.Fatalf("goose down to %d: %v", next-1, err)
	}
	schemaAt(t, c, ms[older-1].version)
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("goose down to 0: %v", err)
	}
	schemaAt(t, c, 0)
	if tableExists(t, b, "pgqueue_jobs") || tableExists(t, b, "users") {
		t.Fatal("tables survived goose down")
	}
	up(t, p, len(dir.MapFS))
	schemaAt(t, c, SchemaVersion)
}

// WriteGooseMigrations writes what the directory lacks, numbered as asked, and refuses numbers
// that plain goose would refuse; the directory works with plain goose at each step.
func TestWriteGooseMigrations(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	c := b.newClient()
	dir := t.TempDir()
	write := func(version int64, table string) {
		name, data := appFile(version, table)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(1, "users")
	if _, err := WriteGooseMigrations(dir, 1); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("first version 1 beside 00001: %v, want ErrInvalidOption", err)
	}
	written, err := WriteGooseMigrations(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := embeddedMigrations()
	if len(written) != len(ms) {
		t.Fatalf("wrote %d files, want %d", len(written), len(ms))
	}
	// As if an older pgqueue had written them: only the first two.
	for _, f := range written[2:] {
		if err := os.Remove(filepath.Join(dir, f.Name)); err != nil {
			t.Fatal(err)
		}
	}
	up(t, b.appGoose(os.DirFS(dir)), 3)
	write(4, "orders")
	up(t, b.appGoose(os.DirFS(dir)), 1)
	schemaAt(t, c, ms[1].version)

	if _, err := WriteGooseMigrations(dir, 4); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("first version 4 beside 00004: %v, want ErrInvalidOption", err)
	}
	written, err = WriteGooseMigrations(dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != len(ms)-2 || written[0].Version != 5 || written[0].SchemaVersion != ms[2].version {
		t.Fatalf("wrote %+v, want pgqueue's migrations from %d as 00005 on", written, ms[2].version)
	}
	write(int64(5+len(written)), "invoices")
	up(t, b.appGoose(os.DirFS(dir)), len(written)+1)
	schemaAt(t, c, SchemaVersion)

	if again, err := WriteGooseMigrations(dir, 100); err != nil || len(again) != 0 {
		t.Fatalf("a directory with every migration: wrote %d files (%v)", len(again), err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.sql"))
	if len(names) != 3+len(ms) {
		t.Fatalf("%d files in the directory, want %d", len(names), 3+len(ms))
	}
	if _, err := WriteGooseMigrations(filepath.Join(dir, "missing"), 1); err == nil {
		t.Fatal("WriteGooseMigrations into a missing directory succeeded")
	}
}

// pgqueue's files copied under their own names (what the README used to suggest) are
// recognized: only the migrations after them are written.
func TestWriteGooseMigrationsBesideCopiedFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ms, _ := embeddedMigrations()
	for _, m := range ms[:3] {
		data, _ := fs.ReadFile(Migrations, m.name)
		if err := os.WriteFile(filepath.Join(dir, m.name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	written, err := WriteGooseMigrations(dir, ms[2].version+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != len(ms)-3 || written[0].SchemaVersion != ms[3].version || written[0].Version != ms[2].version+1 {
		t.Fatalf("wrote %+v", written)
	}
}

// From Migrate to the application's goose: MarkGooseApplied records what the schema has, and
// plain goose then applies only the rest, pgqueue's and the application's.
func TestSwitchFromMigrateToGoose(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	c := b.newClient()
	ctx := t.Context()
	ms, _ := embeddedMigrations()
	// The application's goose has its users table; Migrate applied all but pgqueue's latest.
	dir := appDir{fstest.MapFS{}}
	dir.own(1, "users")
	up(t, b.appGoose(dir), 1)
	if _, err := b.provider().UpTo(ctx, ms[len(ms)-2].version); err != nil {
		t.Fatal(err)
	}

	files := gooseFiles(t, 0, 2)
	dir.add(files)
	dir.own(int64(2+len(files)), "orders")
	marked, err := MarkGooseApplied(ctx, b.db(), "", files)
	if err != nil {
		t.Fatal(err)
	}
	if len(marked) != len(files)-1 || !slices.EqualFunc(marked, files[:len(files)-1], func(a, b GooseFile) bool { return a.Name == b.Name }) {
		t.Fatalf("marked %d files, want all but the latest", len(marked))
	}
	if again, err := MarkGooseApplied(ctx, b.db(), "goose_db_version", files); err != nil || len(again) != 0 {
		t.Fatalf("marking again: %d files (%v), want none", len(again), err)
	}
	up(t, b.appGoose(dir), 2) // pgqueue's latest and orders
	schemaAt(t, c, SchemaVersion)
	if !tableExists(t, b, "orders") {
		t.Fatal("orders missing")
	}

	if _, err := MarkGooseApplied(ctx, b.db(), "goose; DROP TABLE users", files); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("an invalid version table: %v, want ErrInvalidOption", err)
	}
	missing := newPool(t, randomName("pgqueue_test_missing_"), 1)
	db := stdlib.OpenDBFromPool(missing)
	defer db.Close()
	if _, err := MarkGooseApplied(ctx, db, "", files); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("a missing schema: %v, want ErrSchemaVersion", err)
	}
}

// A schema the application's goose created goes to Migrate, which records what is there and
// applies the rest; and back to goose and to Migrate again, after goose migrated pgqueue's latest
// down.
func TestSwitchFromGooseToMigrate(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	c := b.newClient()
	ctx := t.Context()
	ms, _ := embeddedMigrations()

	dir := appDir{fstest.MapFS{}}
	dir.own(1, "users")
	dir.add(gooseFiles(t, 0, 2)[:2])
	up(t, b.appGoose(dir), 3)
	schemaAt(t, c, ms[1].version)

	migrate(t, b.pool)
	schemaAt(t, c, SchemaVersion)
	var recorded int
	if err := b.pool.QueryRow(ctx, "SELECT count(*) FROM "+MigrationsVersionTable+" WHERE version_id > 0").Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded != len(ms) {
		t.Fatalf("%s records %d migrations, want %d", MigrationsVersionTable, recorded, len(ms))
	}
	up(t, b.appGoose(dir), 0) // the application's goose has nothing to do

	// Back to goose for pgqueue's later migrations, which goose then migrates down.
	rest := gooseFiles(t, ms[1].version, 4)
	dir.add(rest)
	if _, err := MarkGooseApplied(ctx, b.db(), "", rest); err != nil {
		t.Fatal(err)
	}
	p := b.appGoose(dir)
	up(t, p, 0)
	if _, err := p.DownTo(ctx, 3); err != nil {
		t.Fatal(err)
	}
	schemaAt(t, c, ms[1].version)
	// Migrate goes by the schema, not by its version table, which still lists them all.
	migrate(t, b.pool)
	schemaAt(t, c, SchemaVersion)
	if _, err := newQueue[int](t, c, "q").Enqueue(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
}
