package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

func TestMigrateUpStatusDown(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	all := migrationCount(t)

	var status []migrationStatusJSON
	e.okJSON(&status, "migrate", "status")
	if len(status) != all || status[0].Applied {
		t.Fatalf("status of a bare schema: %+v", status)
	}
	var v versionJSON
	r := e.exits(exitError, "version", "--json") // a schema behind the command's: exit 1, and the JSON
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatal(err)
	}
	if v.DatabaseSchemaVersion != 0 || v.UpToDate || v.SchemaVersion != pgqueue.SchemaVersion {
		t.Fatalf("version of a bare schema: %+v", v)
	}

	out := e.ok("", "migrate", "up")
	if n := strings.Count(out, "applied "); n != all {
		t.Fatalf("migrate up applied %d migrations, want %d:\n%s", n, all, out)
	}
	if out := e.ok("", "migrate", "up"); !strings.Contains(out, "nothing to do") {
		t.Errorf("second migrate up:\n%s", out)
	}
	e.okJSON(&status, "migrate", "status")
	for _, s := range status {
		if !s.Applied || s.AppliedAt.IsZero() {
			t.Errorf("after migrate up: %+v", s)
		}
	}
	e.okJSON(&v, "version")
	if !v.UpToDate || v.DatabaseSchemaVersion != pgqueue.SchemaVersion {
		t.Errorf("version after migrate up: %+v", v)
	}

	// Down asks first, and refuses when nobody can answer.
	r = e.exits(exitRefused, "migrate", "down")
	if !strings.Contains(r.stderr, "--yes") {
		t.Errorf("refusal does not mention --yes:\n%s", r.stderr)
	}
	var undone []migrationJSON
	e.okJSON(&undone, "migrate", "down", "--yes")
	if len(undone) != 1 || undone[0].Version != pgqueue.SchemaVersion {
		t.Fatalf("migrate down undid %+v, want the latest", undone)
	}
	out = e.ok("", "migrate", "down", "--all", "--yes")
	if n := strings.Count(out, "undone "); n != all-1 {
		t.Fatalf("migrate down --all undid %d, want %d:\n%s", n, all-1, out)
	}
	e.okJSON(&status, "migrate", "status")
	for _, s := range status {
		if s.Applied {
			t.Errorf("after migrate down --all: %+v", s)
		}
	}
}

func TestMigrateGetSQLApplies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	sql := e.ok("", "migrate", "get", "--format", "sql")
	var headers []string
	for line := range strings.SplitSeq(sql, "\n") {
		if strings.HasPrefix(line, "-- pgqueue migration ") {
			headers = append(headers, line)
		}
	}
	// Not a golden file: the list grows with every migration. The headers name pgqueue's files.
	names, err := fs.Glob(pgqueue.Migrations, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range names {
		names[i] = "-- pgqueue migration " + name
	}
	if !slices.Equal(headers, names) {
		t.Errorf("header lines:\n%s\nwant:\n%s", strings.Join(headers, "\n"), strings.Join(names, "\n"))
	}
	if strings.Contains(sql, "+goose") {
		t.Error("the SQL keeps goose's annotations")
	}

	// The SQL, run as psql would, gives the schema every migration: pgqueue sees it at its version.
	if _, err := e.pool.Exec(t.Context(), sql); err != nil {
		t.Fatalf("run the printed SQL: %v", err)
	}
	var v versionJSON
	e.okJSON(&v, "version")
	if !v.UpToDate {
		t.Errorf("version after running the printed SQL: %+v", v)
	}

	// --after prints only the later migrations.
	after := e.ok("", "migrate", "get", "--after", headerVersion(headers[len(headers)-2]))
	if n := strings.Count(after, "-- pgqueue migration "); n != 1 {
		t.Errorf("--after the one before the latest printed %d migrations:\n%s", n, after)
	}
}

func TestMigrateGetWritesGooseFiles(t *testing.T) {
	t.Parallel()
	e := &env{t: t, schema: "unused"}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "00041_app_users.sql"), []byte("-- +goose Up\nSELECT 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var files []gooseFileJSON
	e.okJSON(&files, "migrate", "get", "--dir", dir, "--first-version", "42")
	all := migrationCount(t)
	if len(files) != all {
		t.Fatalf("wrote %d files, want %d: %+v", len(files), all, files)
	}
	for i, f := range files {
		want := int64(42 + i)
		if f.Version != want || !strings.HasPrefix(f.Name, fmt.Sprintf("%05d_pgqueue_", want)) {
			t.Errorf("file %d: %+v, want version %d", i, f, want)
		}
		if _, err := os.Stat(filepath.Join(dir, f.Name)); err != nil {
			t.Error(err)
		}
	}
	if out := e.ok("", "migrate", "get", "--dir", dir, "--first-version", "100"); !strings.Contains(out, "already has every pgqueue migration") {
		t.Errorf("second run:\n%s", out)
	}
	// A first version not above the directory's is refused before anything is written.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "00041_app_users.sql"), []byte("-- +goose Up\nSELECT 1;\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.exits(exitUsage, "migrate", "get", "--dir", other, "--first-version", "7")
	if entries, _ := os.ReadDir(other); len(entries) != 1 {
		t.Errorf("a refused run wrote %d files", len(entries)-1)
	}
}

// Without --first-version, --dir numbers the files from one above the highest goose version in
// the directory (its .sql and .go files), or from 1 in a directory without migrations.
func TestMigrateGetDirPicksTheNextVersion(t *testing.T) {
	t.Parallel()
	e := &env{t: t, schema: "unused"}
	dir := t.TempDir()
	for _, name := range []string{"00007_app_init.sql", "00041_app_users.go", "00090_notes.txt", "README.md"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("-- +goose Up\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var files []gooseFileJSON
	e.okJSON(&files, "migrate", "get", "--dir", dir)
	if len(files) != migrationCount(t) || files[0].Version != 42 || !strings.HasPrefix(files[0].Name, "00042_pgqueue_") {
		t.Fatalf("wrote %+v, want the files from version 42", files)
	}
	if out := e.ok("", "migrate", "get", "--dir", dir); !strings.Contains(out, "already has every pgqueue migration") {
		t.Errorf("second run:\n%s", out)
	}
	empty := t.TempDir()
	e.okJSON(&files, "migrate", "get", "--dir", empty)
	if len(files) == 0 || files[0].Version != 1 {
		t.Errorf("in an empty directory: %+v, want the files from version 1", files)
	}
}

// migrationCount is how many migrations pgqueue has.
func migrationCount(t *testing.T) int {
	files, err := pgqueue.GooseMigrations(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	return len(files)
}

// headerVersion returns the version of a "-- pgqueue migration VERSION_name.sql" line.
func headerVersion(line string) string {
	v, _, _ := strings.Cut(strings.TrimPrefix(line, "-- pgqueue migration "), "_")
	return v
}
