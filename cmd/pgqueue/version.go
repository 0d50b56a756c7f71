package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pgqueue/pgqueue"
)

// versionJSON is "version --json".
type versionJSON struct {
	// SchemaVersion is the pgqueue schema version this command needs.
	SchemaVersion int64 `json:"schema_version"`
	// DatabaseSchemaVersion is the version the database's schema states; 0 without pgqueue tables.
	DatabaseSchemaVersion int64 `json:"database_schema_version"`
	// UpToDate says whether they are equal.
	UpToDate bool `json:"up_to_date"`
}

// versionCommand is "version": the schema versions, and a deploy gate.
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the database's schema version and this command's; exit 1 unless equal",
		Long: `Print the pgqueue schema version this command was built for and the version
the database's schema is at (0: no pgqueue tables there).

A deploy gate: exits 0 only when they are equal. When the schema is behind or
ahead, it exits 1 and says on standard error what to do: migrate (pgqueue
migrate up, or the application's goose with the files of pgqueue migrate get
--dir), or use the pgqueue command of the application's release.

--json: {"schema_version": N, "database_schema_version": N, "up_to_date": true}
(printed whatever the exit code)`,
		Example: "  pgqueue version\n  pgqueue version --json || exit 1",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			client, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			v := versionJSON{SchemaVersion: pgqueue.SchemaVersion}
			var schemaErr *pgqueue.SchemaError
			checked := client.CheckSchema(cmd.Context())
			switch {
			case errors.As(checked, &schemaErr):
				v.DatabaseSchemaVersion = schemaErr.Have
			case checked != nil:
				return checked
			default:
				v.DatabaseSchemaVersion, v.UpToDate = pgqueue.SchemaVersion, true
			}
			if err := a.printVersion(v); err != nil {
				return err
			}
			return checked
		},
	}
}

// printVersion prints the versions.
func (a *app) printVersion(v versionJSON) error {
	if a.json {
		return writeJSON(a.std.out, v)
	}
	state := ""
	switch {
	case v.DatabaseSchemaVersion > v.SchemaVersion:
		state = " (ahead of this command)"
	case !v.UpToDate:
		state = " (behind this command)"
	}
	_, err := fmt.Fprintf(a.std.out, "pgqueue schema version: %d\ndatabase schema version: %d%s\n",
		v.SchemaVersion, v.DatabaseSchemaVersion, state)
	return err
}
