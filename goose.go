package pgqueue

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// GooseFile is one of pgqueue's migrations as a file of an application's own goose directory,
// under a version the application chose.
type GooseFile struct {
	// Name is the file name: the application's version, then pgqueue, pgqueue's version and what
	// the migration does, as in 00005_pgqueue_20261129120000_init.sql.
	Name string
	// Version is the goose version the file carries in the application's directory.
	Version int64
	// SchemaVersion is pgqueue's version of the migration: what pgqueue_schema_version() states
	// once it is the latest applied.
	SchemaVersion int64
	// SQL is the content, byte for byte pgqueue's migration in Migrations.
	SQL []byte
}

// GooseMigrations returns pgqueue's migrations after schema version after (0: all of them) as
// files for an application's goose directory, numbered firstVersion, firstVersion+1, …, so that
// plain goose applies them in line with the application's own migrations. An application that
// already has pgqueue's migrations up to some version passes that version as after, and as
// firstVersion one above the highest version in its directory. after must be 0 or the version of
// one of pgqueue's migrations, and firstVersion positive; otherwise the error wraps
// ErrInvalidOption. No migration after after gives no files and no error.
func GooseMigrations(after, firstVersion int64) ([]GooseFile, error) {
	if firstVersion < 1 {
		return nil, invalidf("GooseMigrations: the first version must be positive, not %d", firstVersion)
	}
	ms, err := embeddedMigrations()
	if err != nil {
		return nil, fmt.Errorf("pgqueue: goose migrations: %w", err)
	}
	start := -1
	for i, m := range ms {
		if m.version == after {
			start = i + 1
		}
	}
	if after == 0 {
		start = 0
	}
	if start < 0 {
		return nil, invalidf("GooseMigrations: %d is not the version of a pgqueue migration (0, or %d … %d)",
			after, ms[0].version, ms[len(ms)-1].version)
	}
	files := make([]GooseFile, 0, len(ms)-start)
	for i, m := range ms[start:] {
		data, err := fs.ReadFile(Migrations, m.name)
		if err != nil {
			return nil, fmt.Errorf("pgqueue: goose migrations: %w", err)
		}
		v := firstVersion + int64(i)
		files = append(files, GooseFile{
			Name:          fmt.Sprintf("%05d_pgqueue_%d_%s", v, m.version, m.what),
			Version:       v,
			SchemaVersion: m.version,
			SQL:           data,
		})
	}
	return files, nil
}

// gooseFileName matches the name of a GooseFile; its group is pgqueue's version.
var gooseFileName = regexp.MustCompile(`^[0-9]+_pgqueue_([0-9]+)_[^/]*\.sql$`)

// WriteGooseMigrations writes into the goose directory dir the pgqueue migrations it does not
// have yet, numbered from firstVersion (see GooseMigrations), and returns them. It recognizes
// pgqueue's files by their names: those it wrote, and pgqueue's files copied under their own
// names. firstVersion must be above every version in dir, or plain goose would refuse the new
// files as missing migrations once a later one is applied: otherwise the error wraps
// ErrInvalidOption. A firstVersion of 0 numbers them from one above dir's highest version. It
// never overwrites a file; if writing fails midway, the files written before stay.
func WriteGooseMigrations(dir string, firstVersion int64) ([]GooseFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("pgqueue: write goose migrations: %w", err)
	}
	ms, err := embeddedMigrations()
	if err != nil {
		return nil, fmt.Errorf("pgqueue: write goose migrations: %w", err)
	}
	var highest, have int64
	for _, e := range entries {
		v, err := gooseVersion(e.Name())
		if e.IsDir() || err != nil {
			continue // not a migration
		}
		highest = max(highest, v)
		have = max(have, pgqueueFileVersion(e.Name(), ms))
	}
	if have >= ms[len(ms)-1].version {
		return nil, nil
	}
	if firstVersion == 0 {
		firstVersion = highest + 1
	}
	if firstVersion <= highest {
		return nil, invalidf("WriteGooseMigrations: the first version %d is not above %d, the highest version in %s",
			firstVersion, highest, dir)
	}
	files, err := GooseMigrations(have, firstVersion)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if err := writeNewFile(filepath.Join(dir, f.Name), f.SQL); err != nil {
			return nil, fmt.Errorf("pgqueue: write goose migrations: %w", err)
		}
	}
	return files, nil
}

// pgqueueFileVersion returns pgqueue's version of the goose file name, or 0 if it is not one of
// pgqueue's migrations.
func pgqueueFileVersion(name string, ms []migrationFile) int64 {
	if m := gooseFileName.FindStringSubmatch(name); m != nil {
		v, err := strconv.ParseInt(m[1], 10, 64)
		if err == nil {
			return v
		}
	}
	for _, m := range ms {
		if m.name == name {
			return m.version
		}
	}
	return 0
}

// writeNewFile creates the file path, which must not exist, with data.
func writeNewFile(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// MarkGooseApplied records in the application's goose version table (versionTable; "" means
// goose's default, goose_db_version) that the files the schema already has are applied,
// without running them: each of files whose SchemaVersion is at most the version the schema
// states. It is the way from Migrate to the application's goose: call it once, with the files
// written into the goose directory, before the first goose up that includes them; goose up then
// applies only pgqueue's migrations the schema does not have. Files already recorded are left
// as they are; it returns the ones it recorded. It works in the schema Migrate would use (the
// first of the search_path), creates the version table as goose does if it does not exist, and
// holds Migrate's lock meanwhile. goose writes versionTable into its statements unquoted, so
// Postgres folds it to lower case; MarkGooseApplied quotes it, folded the same way, and so writes
// the table goose reads. An invalid versionTable gives an error wrapping ErrInvalidOption; a
// missing schema, a *SchemaError.
func MarkGooseApplied(ctx context.Context, db *sql.DB, versionTable string, files []GooseFile) ([]GooseFile, error) {
	table, err := newVersionTable(cmp.Or(versionTable, gooseDefaultTable))
	if err != nil {
		return nil, invalidf("MarkGooseApplied: %v", err)
	}
	pairs := make([]versionPair, len(files))
	for i, f := range files {
		pairs[i] = versionPair{goose: f.Version, schema: f.SchemaVersion}
	}
	recorded, err := withSchemaLock(ctx, db, func(conn *sql.Conn, s schemaState) ([]versionPair, error) {
		return recordVersions(ctx, conn, table, pairs, s.version, false)
	})
	if err != nil {
		return nil, fmt.Errorf("pgqueue: mark goose applied: %w", err)
	}
	marked := make([]GooseFile, 0, len(recorded))
	for _, f := range files {
		for _, r := range recorded {
			if r.goose == f.Version {
				marked = append(marked, f)
			}
		}
	}
	return marked, nil
}
