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
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
)

// db returns a *sql.DB over the bundle's pool, closed when the test ends.
func (b *bundle) db() *sql.DB {
	db := stdlib.OpenDBFromPool(b.pool)
	b.t.Cleanup(func() { _ = db.Close() })
	return db
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
		if v, err := gooseVersion(f.Name); err != nil || v != f.Version {
			t.Errorf("goose reads version %d (%v) from %s", v, err, f.Name)
		}
	}
	rest := gooseFiles(t, ms[1].version, 20270101000000)
	if len(rest) != len(ms)-2 || rest[0].SchemaVersion != ms[2].version || rest[0].Name[:15] != "20270101000000_" {
		t.Fatalf("after %d: %+v", ms[1].version, rest)
	}
	if none := gooseFiles(t, SchemaVersion, 10); len(none) != 0 {
		t.Fatalf("after the latest: %d files", len(none))
	}
	for _, bad := range [][2]int64{{0, 0}, {0, -1}, {12345, 1}, {SchemaVersion + 1, 1}} {
		if _, err := GooseMigrations(bad[0], bad[1]); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("GooseMigrations(%d, %d): %v, want ErrInvalidOption", bad[0], bad[1], err)
		}
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

// A first version of 0 numbers pgqueue's files from one above the directory's highest version,
// whatever made it: here an application migration numbered above pgqueue's copied files.
func TestWriteGooseMigrationsNextFreeVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ms, _ := embeddedMigrations()
	data, _ := fs.ReadFile(Migrations, ms[0].name)
	if err := os.WriteFile(filepath.Join(dir, ms[0].name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	appVersion := ms[0].version + 7
	app := fmt.Sprintf("%d_users.sql", appVersion)
	if err := os.WriteFile(filepath.Join(dir, app), []byte("-- +goose Up\nSELECT 1;\n-- +goose Down\nSELECT 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	written, err := WriteGooseMigrations(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != len(ms)-1 || written[0].Version != appVersion+1 || written[0].SchemaVersion != ms[1].version {
		t.Fatalf("wrote %+v, want %d files from version %d", written, len(ms)-1, appVersion+1)
	}
}

// MarkGooseApplied records, in the application's goose table, the files the schema has: it
// creates the table in goose's format, under the name goose would use (unquoted, so folded to
// lower case), records each file once, and refuses a name goose could not use and a missing
// schema.
func TestMarkGooseApplied(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	ctx := t.Context()
	ms, _ := embeddedMigrations()
	b.migrateUpTo(ms[len(ms)-2].version)
	files := gooseFiles(t, 0, 2)
	marked, err := MarkGooseApplied(ctx, b.db(), "App_Goose_Version", files)
	if err != nil {
		t.Fatal(err)
	}
	if len(marked) != len(files)-1 || !slices.EqualFunc(marked, files[:len(files)-1], func(a, b GooseFile) bool { return a.Name == b.Name }) {
		t.Fatalf("marked %d files, want all but the latest", len(marked))
	}
	want := []int64{0} // goose's own first row, then each file but the latest, numbered from 2
	for _, f := range files[:len(files)-1] {
		want = append(want, f.Version)
	}
	if want[1] != 2 || want[len(want)-1] != int64(len(files)) {
		t.Fatalf("files numbered %v, want 2 to %d", want[1:], len(files))
	}
	checkGooseTable(t, b, "app_goose_version", want)
	if again, err := MarkGooseApplied(ctx, b.db(), "app_goose_version", files); err != nil || len(again) != 0 {
		t.Fatalf("marking again: %d files (%v), want none", len(again), err)
	}
	migrate(t, b.pool)
	if again, err := MarkGooseApplied(ctx, b.db(), b.schema+".app_goose_version", files); err != nil || len(again) != 1 {
		t.Fatalf("marking after Migrate: %d files (%v), want the latest", len(again), err)
	}
	all := append(want, files[len(files)-1].Version)
	checkGooseTable(t, b, "app_goose_version", all)
	if _, err := MarkGooseApplied(ctx, b.db(), "", files); err != nil {
		t.Fatal(err)
	}
	checkGooseTable(t, b, "goose_db_version", all)

	for _, bad := range []string{"goose; DROP TABLE users", "a.b.c", "1goose", `"goose"`} {
		if _, err := MarkGooseApplied(ctx, b.db(), bad, files); !errors.Is(err, ErrInvalidOption) ||
			strings.Count(err.Error(), "pgqueue:") != 1 {
			t.Errorf("version table %q: %v, want ErrInvalidOption", bad, err)
		}
	}
	missing := newPool(t, randomName("pgqueue_test_missing_"), 1)
	db := stdlib.OpenDBFromPool(missing)
	defer db.Close()
	if _, err := MarkGooseApplied(ctx, db, "", files); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("a missing schema: %v, want ErrSchemaVersion", err)
	}
}
