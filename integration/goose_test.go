package integration

// pgqueue's migrations applied by the application's own goose (goose's Provider, as plain as an
// application runs it), beside the application's own files, and crossing between goose and
// pgqueue.Migrate both ways. The root module runs its migrations without goose; these tests hold
// it to goose's behaviour.

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pgqueue/pgqueue"
	"github.com/pressly/goose/v3"
)

// gooseEnv is a test's empty schema, a pgx pool and a *sql.DB on it, and a client.
type gooseEnv struct {
	t      *testing.T
	schema string
	pool   *pgxpool.Pool
	db     *sql.DB
	client *pgqueue.Client
}

// newGooseEnv creates an empty schema for the test, dropped when it ends.
func newGooseEnv(t *testing.T) *gooseEnv {
	t.Helper()
	return envOn(t, createSchema(t))
}

// envOn connects to schema (which need not exist).
func envOn(t *testing.T, schema string) *gooseEnv {
	t.Helper()
	e := &gooseEnv{t: t, schema: schema}
	cfg, err := pgxpool.ParseConfig(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = e.schema
	cfg.MaxConns = 4
	if e.pool, err = pgxpool.NewWithConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.pool.Close)
	e.db = stdlib.OpenDBFromPool(e.pool)
	t.Cleanup(func() { _ = e.db.Close() })
	if e.client, err = pgqueue.NewClient(e.pool, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.client.Close() })
	return e
}

// tableExists reports whether the schema has the table.
func (e *gooseEnv) tableExists(table string) bool {
	e.t.Helper()
	var ok bool
	err := e.pool.QueryRow(e.t.Context(),
		"SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = $2)", e.schema, table).Scan(&ok)
	if err != nil {
		e.t.Fatal(err)
	}
	return ok
}

// schemaAt checks the version the schema states (or shows).
func (e *gooseEnv) schemaAt(want int64) {
	e.t.Helper()
	err := e.client.CheckSchema(e.t.Context())
	if want == pgqueue.SchemaVersion {
		if err != nil {
			e.t.Fatalf("CheckSchema: %v", err)
		}
		return
	}
	var se *pgqueue.SchemaError
	if !errors.As(err, &se) || !errors.Is(err, pgqueue.ErrSchemaVersion) {
		e.t.Fatalf("CheckSchema: %v, want a *SchemaError", err)
	}
	if se.Have != want {
		e.t.Fatalf("schema at %d, want %d", se.Have, want)
	}
}

// enqueue enqueues a job, to show the schema works.
func (e *gooseEnv) enqueue() {
	e.t.Helper()
	q, err := pgqueue.NewQueue[int](e.client, "q")
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := q.Enqueue(e.t.Context(), 1, nil); err != nil {
		e.t.Fatal(err)
	}
}

// appGoose returns the application's plain goose provider (default version table, no
// out-of-order migrations) over fsys.
func (e *gooseEnv) appGoose(fsys fs.FS) *goose.Provider {
	e.t.Helper()
	p, err := goose.NewProvider(goose.DialectPostgres, e.db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// pgqueueGoose returns a goose provider over pgqueue's own files and version table: what Migrate
// was in the pgqueue releases that ran goose.
func (e *gooseEnv) pgqueueGoose() *goose.Provider {
	e.t.Helper()
	p, err := goose.NewProvider(goose.DialectPostgres, e.db, pgqueue.Migrations,
		goose.WithTableName(pgqueue.MigrationsVersionTable), goose.WithDisableGlobalRegistry(true))
	if err != nil {
		e.t.Fatal(err)
	}
	return p
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

func (d appDir) add(files []pgqueue.GooseFile) {
	for _, f := range files {
		d.MapFS[f.Name] = &fstest.MapFile{Data: f.SQL}
	}
}

// gooseFiles calls GooseMigrations, failing the test on an error.
func gooseFiles(t *testing.T, after, first int64) []pgqueue.GooseFile {
	t.Helper()
	files, err := pgqueue.GooseMigrations(after, first)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// versions returns the versions of pgqueue's migrations, oldest first.
func versions(t *testing.T) []int64 {
	t.Helper()
	var vs []int64
	for _, f := range gooseFiles(t, 0, 1) {
		vs = append(vs, f.SchemaVersion)
	}
	return vs
}

// goose reads from each file GooseMigrations names the version it carries.
func TestGooseReadsTheVersions(t *testing.T) {
	t.Parallel()
	for _, f := range gooseFiles(t, 0, 5) {
		if v, err := goose.NumericComponent(f.Name); err != nil || v != f.Version {
			t.Errorf("goose reads version %d (%v) from %s, want %d", v, err, f.Name, f.Version)
		}
	}
	names, err := fs.Glob(pgqueue.Migrations, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		if v, err := goose.NumericComponent(name); err != nil || v != versions(t)[i] {
			t.Errorf("goose reads version %d (%v) from %s", v, err, name)
		}
	}
}

// An application's goose directory holds its own migrations before and after pgqueue's, which
// carry the application's versions; plain goose applies them, and later pgqueue's next
// migrations, added under new versions after more of the application's own; then down and up.
func TestGooseApplicationDirectory(t *testing.T) {
	t.Parallel()
	e := newGooseEnv(t)
	ctx := t.Context()
	vs := versions(t)
	const older = 2 // the pgqueue release the application started with had two migrations

	dir := appDir{fstest.MapFS{}}
	dir.own(1, "users")
	dir.add(gooseFiles(t, 0, 2)[:older])
	dir.own(2+older, "orders")
	up(t, e.appGoose(dir), 2+older)
	e.schemaAt(vs[older-1])

	// The next pgqueue release: its new migrations go in after the application's latest.
	next := 2 + older + 1
	newer := gooseFiles(t, vs[older-1], int64(next))
	dir.add(newer)
	dir.own(int64(next+len(newer)), "invoices")
	p := e.appGoose(dir)
	up(t, p, len(newer)+1)
	e.schemaAt(pgqueue.SchemaVersion)
	for _, table := range []string{"users", "orders", "invoices", "pgqueue_jobs", "pgqueue_queues"} {
		if !e.tableExists(table) {
			t.Errorf("table %s missing after goose up", table)
		}
	}
	e.enqueue()

	if _, err := p.DownTo(ctx, int64(next-1)); err != nil {
		t.Fatalf("goose down to %d: %v", next-1, err)
	}
	e.schemaAt(vs[older-1])
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("goose down to 0: %v", err)
	}
	e.schemaAt(0)
	if e.tableExists("pgqueue_jobs") || e.tableExists("users") {
		t.Fatal("tables survived goose down")
	}
	up(t, p, len(dir.MapFS))
	e.schemaAt(pgqueue.SchemaVersion)
}

// WriteGooseMigrations writes what the directory lacks, numbered as asked, and refuses numbers
// that plain goose would refuse; the directory works with plain goose at each step.
func TestWriteGooseMigrations(t *testing.T) {
	t.Parallel()
	e := newGooseEnv(t)
	dir := t.TempDir()
	write := func(version int64, table string) {
		name, data := appFile(version, table)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(1, "users")
	if _, err := pgqueue.WriteGooseMigrations(dir, 1); !errors.Is(err, pgqueue.ErrInvalidOption) {
		t.Fatalf("first version 1 beside 00001: %v, want ErrInvalidOption", err)
	}
	written, err := pgqueue.WriteGooseMigrations(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	vs := versions(t)
	if len(written) != len(vs) {
		t.Fatalf("wrote %d files, want %d", len(written), len(vs))
	}
	// As if an older pgqueue had written them: only the first two.
	for _, f := range written[2:] {
		if err := os.Remove(filepath.Join(dir, f.Name)); err != nil {
			t.Fatal(err)
		}
	}
	up(t, e.appGoose(os.DirFS(dir)), 3)
	write(4, "orders")
	up(t, e.appGoose(os.DirFS(dir)), 1)
	e.schemaAt(vs[1])

	if _, err := pgqueue.WriteGooseMigrations(dir, 4); !errors.Is(err, pgqueue.ErrInvalidOption) {
		t.Fatalf("first version 4 beside 00004: %v, want ErrInvalidOption", err)
	}
	written, err = pgqueue.WriteGooseMigrations(dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != len(vs)-2 || written[0].Version != 5 || written[0].SchemaVersion != vs[2] {
		t.Fatalf("wrote %+v, want pgqueue's migrations from %d as 00005 on", written, vs[2])
	}
	write(int64(5+len(written)), "invoices")
	up(t, e.appGoose(os.DirFS(dir)), len(written)+1)
	e.schemaAt(pgqueue.SchemaVersion)

	if again, err := pgqueue.WriteGooseMigrations(dir, 100); err != nil || len(again) != 0 {
		t.Fatalf("a directory with every migration: wrote %d files (%v)", len(again), err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.sql"))
	if len(names) != 3+len(vs) {
		t.Fatalf("%d files in the directory, want %d", len(names), 3+len(vs))
	}
	if _, err := pgqueue.WriteGooseMigrations(filepath.Join(dir, "missing"), 1); err == nil {
		t.Fatal("WriteGooseMigrations into a missing directory succeeded")
	}
}

// From Migrate to the application's goose: MarkGooseApplied records what the schema has, and
// plain goose then applies only the rest, pgqueue's and the application's.
func TestSwitchFromMigrateToGoose(t *testing.T) {
	t.Parallel()
	e := newGooseEnv(t)
	ctx := t.Context()
	vs := versions(t)
	// The application's goose has its users table; Migrate applied all but pgqueue's latest.
	dir := appDir{fstest.MapFS{}}
	dir.own(1, "users")
	up(t, e.appGoose(dir), 1)
	if _, err := pgqueue.MigrateTo(ctx, e.db, vs[len(vs)-2]); err != nil {
		t.Fatal(err)
	}

	files := gooseFiles(t, 0, 2)
	dir.add(files)
	dir.own(int64(2+len(files)), "orders")
	marked, err := pgqueue.MarkGooseApplied(ctx, e.db, "", files)
	if err != nil {
		t.Fatal(err)
	}
	if len(marked) != len(files)-1 || !slices.EqualFunc(marked, files[:len(files)-1], func(a, b pgqueue.GooseFile) bool { return a.Name == b.Name }) {
		t.Fatalf("marked %d files, want all but the latest", len(marked))
	}
	if again, err := pgqueue.MarkGooseApplied(ctx, e.db, "goose_db_version", files); err != nil || len(again) != 0 {
		t.Fatalf("marking again: %d files (%v), want none", len(again), err)
	}
	up(t, e.appGoose(dir), 2) // pgqueue's latest and orders
	e.schemaAt(pgqueue.SchemaVersion)
	if !e.tableExists("orders") {
		t.Fatal("orders missing")
	}

	if _, err := pgqueue.MarkGooseApplied(ctx, e.db, "goose; DROP TABLE users", files); !errors.Is(err, pgqueue.ErrInvalidOption) {
		t.Fatalf("an invalid version table: %v, want ErrInvalidOption", err)
	}
	missing := envOn(t, "pgqueue_integration_missing")
	if _, err := pgqueue.MarkGooseApplied(ctx, missing.db, "", files); !errors.Is(err, pgqueue.ErrSchemaVersion) {
		t.Fatalf("a missing schema: %v, want ErrSchemaVersion", err)
	}
}

// MarkGooseApplied creates the application's version table, when goose has not yet, in goose's
// own format: goose then finds the files recorded and applies only the rest.
func TestMarkGooseAppliedCreatesGoosesTable(t *testing.T) {
	t.Parallel()
	e := newGooseEnv(t)
	ctx := t.Context()
	if err := pgqueue.Migrate(ctx, e.db); err != nil {
		t.Fatal(err)
	}
	files := gooseFiles(t, 0, 1)
	if marked, err := pgqueue.MarkGooseApplied(ctx, e.db, "", files); err != nil || len(marked) != len(files) {
		t.Fatalf("marked %d files (%v), want %d", len(marked), err, len(files))
	}
	dir := appDir{fstest.MapFS{}}
	dir.add(files)
	dir.own(int64(len(files)+1), "users")
	p := e.appGoose(dir)
	up(t, p, 1)
	if v, err := p.GetDBVersion(ctx); err != nil || v != int64(len(files)+1) {
		t.Fatalf("goose's version: %d (%v)", v, err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatal(err)
	}
	e.schemaAt(0)
}

// A schema the application's goose created goes to Migrate, which records what is there and
// applies the rest; and back to goose and to Migrate again, after goose migrated pgqueue's latest
// down.
func TestSwitchFromGooseToMigrate(t *testing.T) {
	t.Parallel()
	e := newGooseEnv(t)
	ctx := t.Context()
	vs := versions(t)

	dir := appDir{fstest.MapFS{}}
	dir.own(1, "users")
	dir.add(gooseFiles(t, 0, 2)[:2])
	up(t, e.appGoose(dir), 3)
	e.schemaAt(vs[1])

	if err := pgqueue.Migrate(ctx, e.db); err != nil {
		t.Fatal(err)
	}
	e.schemaAt(pgqueue.SchemaVersion)
	var recorded int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM "+pgqueue.MigrationsVersionTable+" WHERE version_id > 0").Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	if recorded != len(vs) {
		t.Fatalf("%s records %d migrations, want %d", pgqueue.MigrationsVersionTable, recorded, len(vs))
	}
	up(t, e.appGoose(dir), 0) // the application's goose has nothing to do

	// Back to goose for pgqueue's later migrations, which goose then migrates down.
	rest := gooseFiles(t, vs[1], 4)
	dir.add(rest)
	if _, err := pgqueue.MarkGooseApplied(ctx, e.db, "", rest); err != nil {
		t.Fatal(err)
	}
	p := e.appGoose(dir)
	up(t, p, 0)
	if _, err := p.DownTo(ctx, 3); err != nil {
		t.Fatal(err)
	}
	e.schemaAt(vs[1])
	// Migrate goes by the schema, not by its version table, which still lists them all.
	if err := pgqueue.Migrate(ctx, e.db); err != nil {
		t.Fatal(err)
	}
	e.schemaAt(pgqueue.SchemaVersion)
	e.enqueue()
}

// A schema that an earlier pgqueue release migrated with goose (goose's Provider over pgqueue's
// files and version table) is continued by Migrate, up and down; and a schema Migrate brought
// part way is continued by goose, up and down: both read and write the version table alike. It
// stays one function: the two directions hand one schema back and forth, in order.
func TestMigratorAndGooseShareTheVersionTable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	vs := versions(t)

	t.Run("goose then Migrate", func(t *testing.T) {
		t.Parallel()
		e := newGooseEnv(t)
		if _, err := e.pgqueueGoose().UpTo(ctx, vs[1]); err != nil {
			t.Fatal(err)
		}
		ran, err := pgqueue.MigrateTo(ctx, e.db, vs[2])
		if err != nil || len(ran) != 1 || ran[0].Version != vs[2] {
			t.Fatalf("MigrateTo after goose: %+v (%v)", ran, err)
		}
		p := e.pgqueueGoose()
		if v, err := p.GetDBVersion(ctx); err != nil || v != vs[2] {
			t.Fatalf("goose reads version %d (%v) after MigrateTo, want %d", v, err, vs[2])
		}
		up(t, p, len(vs)-3)
		if _, err := pgqueue.MigrateDown(ctx, e.db, vs[0]); err != nil {
			t.Fatal(err)
		}
		if v, err := p.GetDBVersion(ctx); err != nil || v != vs[0] {
			t.Fatalf("goose reads version %d (%v) after MigrateDown, want %d", v, err, vs[0])
		}
		e.schemaAt(vs[0])
		if _, err := p.DownTo(ctx, 0); err != nil {
			t.Fatal(err)
		}
		e.schemaAt(0)
	})

	t.Run("Migrate then goose", func(t *testing.T) {
		t.Parallel()
		e := newGooseEnv(t)
		if _, err := pgqueue.MigrateTo(ctx, e.db, vs[1]); err != nil {
			t.Fatal(err)
		}
		p := e.pgqueueGoose()
		status, err := p.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range status {
			if applied := s.State == goose.StateApplied; applied != (i <= 1) || (applied && s.AppliedAt.IsZero()) {
				t.Errorf("goose's status of %d: %s at %v", s.Source.Version, s.State, s.AppliedAt)
			}
		}
		up(t, p, len(vs)-2)
		e.schemaAt(pgqueue.SchemaVersion)
		if _, err := p.DownTo(ctx, vs[2]); err != nil {
			t.Fatal(err)
		}
		st, err := pgqueue.MigrateStatus(ctx, e.db)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range st {
			if s.Applied != (i <= 2) || s.Applied == s.AppliedAt.IsZero() {
				t.Errorf("MigrateStatus after goose: %+v", s)
			}
		}
		if _, err := pgqueue.MigrateDown(ctx, e.db, 0); err != nil {
			t.Fatal(err)
		}
		if v, err := p.GetDBVersion(ctx); err != nil || v != 0 {
			t.Fatalf("goose reads version %d (%v) after MigrateDown to 0", v, err)
		}
		up(t, p, len(vs))
		e.schemaAt(pgqueue.SchemaVersion)
		e.enqueue()
	})
}

// Migrate and goose produce the same schema, object by object, at every version.
func TestMigratorBuildsWhatGooseBuilds(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	mine, theirs := newGooseEnv(t), newGooseEnv(t)
	p := theirs.pgqueueGoose()
	for _, v := range versions(t) {
		if _, err := pgqueue.MigrateTo(ctx, mine.db, v); err != nil {
			t.Fatal(err)
		}
		if _, err := p.UpTo(ctx, v); err != nil {
			t.Fatal(err)
		}
		a, b := mine.catalog(), theirs.catalog()
		if !strings.Contains(a, "column pgqueue_jobs.id uuid") || strings.Contains(a, "function pgqueue_") != (v >= versions(t)[2]) {
			t.Fatalf("at %d, the catalog misses pgqueue's objects:\n%s", v, a)
		}
		if a != b {
			t.Fatalf("at %d, Migrate built\n%s\ngoose built\n%s", v, a, b)
		}
	}
}

// catalog describes the schema's tables, columns, indexes, constraints and functions, without
// the schema's name.
func (e *gooseEnv) catalog() string {
	e.t.Helper()
	rows, err := e.pool.Query(e.t.Context(), `
		SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) ||
		       CASE WHEN a.attnotnull THEN ' not null' ELSE '' END || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
		FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
		LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
		WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped
		UNION ALL
		SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
		UNION ALL
		SELECT 'constraint ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
		WHERE connamespace = current_schema()::regnamespace
		UNION ALL
		SELECT 'function ' || proname || ' ' || pg_get_functiondef(oid) FROM pg_proc
		WHERE pronamespace = current_schema()::regnamespace
		UNION ALL
		SELECT 'reloptions ' || relname || ' ' || array_to_string(reloptions, ',') FROM pg_class
		WHERE relnamespace = current_schema()::regnamespace AND reloptions IS NOT NULL
		ORDER BY 1`)
	if err != nil {
		e.t.Fatal(err)
	}
	lines, err := pgxCollectStrings(rows)
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.ReplaceAll(strings.Join(lines, "\n"), e.schema, "<schema>")
}

// pgxCollectStrings reads one text column of every row.
func pgxCollectStrings(rows pgx.Rows) ([]string, error) {
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
