package main

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue"
)

// migrateCommand is "migrate" and its subcommands.
func (a *app) migrateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply, undo, list or export pgqueue's schema migrations",
		Long: `Apply, undo, list or export pgqueue's schema migrations.

pgqueue's tables live in the schema --schema names (default: the first schema of
the role's search_path), which must exist. Migrations are applied once even when
many processes migrate at once.`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(a.migrateUpCommand(), a.migrateDownCommand(), a.migrateStatusCommand(), a.migrateGetCommand())
	return cmd
}

// migrationJSON is one migration in --json output: {"version": 20261129120000, "name": "…sql"}.
type migrationJSON struct {
	Version int64  `json:"version"`
	Name    string `json:"name"`
}

// migrateUpCommand is "migrate up".
func (a *app) migrateUpCommand() *cobra.Command {
	var to int64
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Apply the migrations the schema does not have yet",
		Long: `Apply the migrations the schema does not have yet, each in a transaction of its
own, up to the latest (or --to VERSION). Prints the migrations applied.

--json: [{"version": 20261129120000, "name": "20261129120000_pgqueue_init.sql"}, ...]`,
		Example: "  pgqueue migrate up\n  pgqueue migrate up --schema jobs --to 20261201180000",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.migrate(cmd.Context(), "applied", func(ctx context.Context, db *sql.DB) ([]pgqueue.Migration, error) {
				return pgqueue.MigrateTo(ctx, db, cmp.Or(to, pgqueue.SchemaVersion))
			})
		},
	}
	cmd.Flags().Int64Var(&to, "to", 0, "apply up to and including this version (default: the latest)")
	return cmd
}

// migrateDownCommand is "migrate down".
func (a *app) migrateDownCommand() *cobra.Command {
	var to int64
	var all, yes bool
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Undo the latest migration, or down to a version",
		Long: `Undo the latest migration the schema has, or every one above --to VERSION, or
all of them (--all: drops pgqueue's tables with every job in them).

Asks for confirmation unless --yes; without --yes it refuses (exit 4) when
standard input is not a terminal.

--json: the migrations undone, newest first, as for "migrate up".`,
		Example: "  pgqueue migrate down\n  pgqueue migrate down --to 20261201180000 --yes",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if all && to != 0 {
				return &usageError{errors.New("--all and --to exclude each other")}
			}
			return a.migrate(cmd.Context(), "undone", func(ctx context.Context, db *sql.DB) ([]pgqueue.Migration, error) {
				what := "the latest pgqueue migration"
				if all {
					what = "every pgqueue migration, dropping pgqueue's tables and jobs,"
				} else if to != 0 {
					what = fmt.Sprintf("every pgqueue migration above %d", to)
				}
				if err := a.confirm(fmt.Sprintf("Undo %s?", what), yes); err != nil {
					return nil, err
				}
				if !all && to == 0 {
					return pgqueue.MigrateDownOne(ctx, db)
				}
				return pgqueue.MigrateDown(ctx, db, to)
			})
		},
	}
	cmd.Flags().Int64Var(&to, "to", 0, "undo every migration above this version")
	cmd.Flags().BoolVar(&all, "all", false, "undo every migration: drops pgqueue's tables and jobs")
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// migrate runs step, a migration call, on the database and prints the migrations it returns,
// saying they were done (applied, undone).
func (a *app) migrate(ctx context.Context, done string, step func(context.Context, *sql.DB) ([]pgqueue.Migration, error)) error {
	db, err := a.sqlDB(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	ran, err := step(ctx, db)
	if err != nil {
		return err
	}
	if a.json {
		out := make([]migrationJSON, 0, len(ran))
		for _, m := range ran {
			out = append(out, migrationJSON{Version: m.Version, Name: m.Name})
		}
		return writeJSON(a.std.out, out)
	}
	if len(ran) == 0 {
		fmt.Fprintln(a.std.out, "nothing to do: the schema is at that version")
	}
	for _, m := range ran {
		fmt.Fprintf(a.std.out, "%s %s\n", done, m.Name)
	}
	return nil
}

// migrationStatusJSON is one migration in "migrate status --json".
type migrationStatusJSON struct {
	Version   int64     `json:"version"`
	Name      string    `json:"name"`
	Applied   bool      `json:"applied"`
	AppliedAt time.Time `json:"applied_at,omitzero"`
}

// migrateStatusCommand is "migrate status".
func (a *app) migrateStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "List pgqueue's migrations and whether the schema has each",
		Long: `List pgqueue's migrations, oldest first, with whether the schema has each and
when it was applied (unknown for one applied by the application's own goose).

--json: [{"version": 20261129120000, "name": "...", "applied": true, "applied_at": "2026-12-01T12:00:00Z"}, ...]`,
		Example: "  pgqueue migrate status --schema jobs",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			db, err := a.sqlDB(cmd.Context())
			if err != nil {
				return err
			}
			defer db.Close()
			status, err := pgqueue.MigrateStatus(cmd.Context(), db)
			if err != nil {
				return err
			}
			return a.printMigrationStatus(status)
		},
	}
}

// printMigrationStatus prints MigrateStatus's answer.
func (a *app) printMigrationStatus(status []pgqueue.MigrationStatus) error {
	if a.json {
		out := make([]migrationStatusJSON, 0, len(status))
		for _, s := range status {
			out = append(out, migrationStatusJSON{s.Version, s.Name, s.Applied, s.AppliedAt})
		}
		return writeJSON(a.std.out, out)
	}
	t := newTable(a.std.out, "VERSION", "NAME", "APPLIED", "APPLIED AT")
	for _, s := range status {
		applied, at := "no", "-"
		if s.Applied {
			applied = "yes"
			if !s.AppliedAt.IsZero() {
				at = s.AppliedAt.UTC().Format(time.RFC3339)
			}
		}
		t.row(fmt.Sprint(s.Version), s.Name, applied, at)
	}
	return t.flush()
}
