package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue"
)

// gooseFileJSON is one file in "migrate get --dir --json".
type gooseFileJSON struct {
	Name          string `json:"name"`
	Version       int64  `json:"version"`
	SchemaVersion int64  `json:"schema_version"`
}

// migrateGetCommand is "migrate get": pgqueue's migrations for another tool.
func (a *app) migrateGetCommand() *cobra.Command {
	var format, dir string
	var after, first int64
	cmd := &cobra.Command{
		Use:   "get",
		Short: "Print pgqueue's migrations as SQL, or write them as goose files",
		Long: `Print pgqueue's migrations, or write them into an application's goose directory.
Needs no database.

--format sql (default) prints the Up part of each migration, each in BEGIN/COMMIT,
for psql or a migration tool of your own; --format goose prints the files as
they are. --after VERSION starts after that pgqueue version.

--dir DIR writes the migrations DIR does not have yet as goose files numbered
N, N+1, ..., named like 00005_pgqueue_20261129120000_init.sql, so that the
application's goose applies them in line with its own migrations. N is one
above the highest version of DIR's .sql and .go files (1 if it has none), or
--first-version N, which must be above every one. Existing files are never
overwritten.

--json (with --dir): [{"name": "...", "version": N, "schema_version": N}, ...]`,
		Example: `  pgqueue migrate get > pgqueue.sql
  pgqueue migrate get --after 20261201180000
  pgqueue migrate get --dir db/migrations
  pgqueue migrate get --dir db/migrations --first-version 42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dir != "" {
				if cmd.Flags().Changed("first-version") && first <= 0 {
					return &usageError{errors.New("--first-version must be a positive version above every one in the directory")}
				}
				return a.writeGooseFiles(dir, first)
			}
			if first != 0 {
				return &usageError{errors.New("--first-version needs --dir")}
			}
			return printMigrations(a.std.out, format, after)
		},
	}
	cmd.Flags().StringVar(&format, "format", "sql", "what to print: sql (the Up parts) or goose (the files)")
	cmd.Flags().Int64Var(&after, "after", 0, "only the migrations after this pgqueue schema version")
	cmd.Flags().StringVar(&dir, "dir", "", "write goose files into this directory instead of printing")
	cmd.Flags().Int64Var(&first, "first-version", 0, "goose version of the first file written (with --dir; default: one above DIR's highest)")
	return cmd
}

// writeGooseFiles writes the goose files dir lacks, numbered from first (0: the next free
// version of dir), and lists them.
func (a *app) writeGooseFiles(dir string, first int64) error {
	files, err := pgqueue.WriteGooseMigrations(dir, first)
	if err != nil {
		return err
	}
	if a.json {
		out := make([]gooseFileJSON, 0, len(files))
		for _, f := range files {
			out = append(out, gooseFileJSON{f.Name, f.Version, f.SchemaVersion})
		}
		return writeJSON(a.std.out, out)
	}
	if len(files) == 0 {
		fmt.Fprintf(a.std.out, "%s already has every pgqueue migration\n", dir)
	}
	for _, f := range files {
		fmt.Fprintf(a.std.out, "wrote %s\n", f.Name)
	}
	return nil
}

// printMigrations prints the migrations after schema version after in format (sql or goose).
func printMigrations(w io.Writer, format string, after int64) error {
	if format != "sql" && format != "goose" {
		return &usageError{fmt.Errorf("--format %q: want sql or goose", format)}
	}
	files, err := pgqueue.GooseMigrations(after, 1)
	if err != nil {
		return err
	}
	for _, f := range files {
		name := migrationName(f.SchemaVersion)
		if format == "goose" {
			fmt.Fprintf(w, "-- pgqueue migration %s\n%s\n", name, f.SQL)
			continue
		}
		fmt.Fprintf(w, "-- pgqueue migration %s\nBEGIN;\n%sCOMMIT;\n\n", name, upSection(f.SQL))
	}
	return nil
}

// migrationName returns the file name of pgqueue's migration of the given version in
// pgqueue.Migrations, e.g. 20261129120000_pgqueue_init.sql.
func migrationName(version int64) string {
	names, _ := fs.Glob(pgqueue.Migrations, fmt.Sprintf("%d_*.sql", version)) // the pattern is valid
	if len(names) == 0 {
		return fmt.Sprint(version)
	}
	return names[0]
}

// upSection returns the statements of a goose file's Up part, without goose's annotations.
func upSection(sql []byte) string {
	var b strings.Builder
	in := false
	lines := bufio.NewScanner(bytes.NewReader(sql))
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		line := lines.Text()
		switch trimmed := strings.TrimSpace(line); {
		case trimmed == "-- +goose Up":
			in = true
		case trimmed == "-- +goose Down":
			return b.String()
		case strings.HasPrefix(trimmed, "-- +goose"):
		case in:
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
