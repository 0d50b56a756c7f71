package pgqueue

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the pgqueue schema version this code needs: the version of the latest
// migration in Migrations. A schema states its version with the function
// pgqueue_schema_version(), which every pgqueue migration from 20261201140000 on maintains.
const SchemaVersion int64 = 20261214120000

// ErrSchemaVersion is wrapped by the errors that say the database's schema is not the one this
// pgqueue needs: the search_path names no schema that exists, the schema has no pgqueue tables,
// or it is at an older or newer pgqueue schema version. Client.CheckSchema and Client.Run return
// it as a *SchemaError; a statement that fails because a table, column or function it names is
// missing wraps it too.
var ErrSchemaVersion = errors.New("pgqueue: schema is not at the version this pgqueue needs")

var (
	//go:embed sql/schema_objects.sql
	schemaObjectsSQL string
	//go:embed sql/schema_version.sql
	schemaVersionSQL string
)

// SchemaError says which pgqueue schema a database has and which this code needs. It wraps
// ErrSchemaVersion.
type SchemaError struct {
	// SearchPath is the connection's search_path.
	SearchPath string
	// Schema is the first schema of the search_path that exists (and that the role may use),
	// where pgqueue's tables are created and looked up; empty if there is none.
	Schema string
	// Have is the schema's pgqueue version; 0 when it has no pgqueue tables.
	Have int64
	// Want is the version this code needs: SchemaVersion.
	Want int64
}

// Error says what is there, what is needed and what to run.
func (e *SchemaError) Error() string {
	const migrate = "run pgqueue.Migrate, or goose up with pgqueue's migrations in your goose directory (pgqueue.WriteGooseMigrations)"
	switch {
	case e.Schema == "":
		return fmt.Sprintf("no schema of search_path %q exists, or none this role may use: create it (CREATE SCHEMA), then %s",
			e.SearchPath, migrate)
	case e.Have == 0:
		return fmt.Sprintf("schema %q has no pgqueue tables; this pgqueue needs schema version %d: %s", e.Schema, e.Want, migrate)
	case e.Have < e.Want:
		return fmt.Sprintf("schema %q is at pgqueue schema version %d; this pgqueue needs %d: %s", e.Schema, e.Have, e.Want, migrate)
	default:
		return fmt.Sprintf("schema %q is at pgqueue schema version %d, newer than this pgqueue knows (%d): "+
			"upgrade pgqueue in this program, or migrate the schema down to %d", e.Schema, e.Have, e.Want, e.Want)
	}
}

// Unwrap returns ErrSchemaVersion.
func (e *SchemaError) Unwrap() error { return ErrSchemaVersion }

// CheckSchema reports whether the schema of the pool's connections (the first schema of their
// search_path that exists) is at SchemaVersion. If not, it returns a *SchemaError, which wraps
// ErrSchemaVersion and says which version is there and what to run. It reads the catalog and
// calls pgqueue_schema_version(), one round trip each; Client.Run calls it once before serving.
func (c *Client) CheckSchema(ctx context.Context) error {
	conn, err := c.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pgqueue: check schema: %w", err)
	}
	defer conn.Release()
	if err := checkSchemaOn(ctx, conn); err != nil {
		return fmt.Errorf("pgqueue: check schema: %w", err)
	}
	return nil
}

// checkSchemaOn reads the schema's state on conn and returns a *SchemaError unless it is at
// SchemaVersion.
func checkSchemaOn(ctx context.Context, conn *pgxpool.Conn) error {
	s, err := readSchemaState(ctx, func(ctx context.Context, query string, dest ...any) error {
		return conn.QueryRow(ctx, query).Scan(dest...)
	})
	if err != nil {
		return err
	}
	return s.check()
}

// rowReader runs a query without arguments that returns one row and scans it into dest: over
// a pgx connection or a database/sql one, so that Migrate and Client share readSchemaState.
type rowReader func(ctx context.Context, query string, dest ...any) error

// schemaState is what readSchemaState found.
type schemaState struct {
	searchPath string
	schema     string // "" if no schema of the search_path exists
	version    int64  // 0: no pgqueue tables
}

// check returns a *SchemaError unless the schema is at SchemaVersion.
func (s schemaState) check() error {
	if s.schema != "" && s.version == SchemaVersion {
		return nil
	}
	return &SchemaError{SearchPath: s.searchPath, Schema: s.schema, Have: s.version, Want: SchemaVersion}
}

// readSchemaState finds the current schema and its pgqueue version: what the schema states
// through pgqueue_schema_version(), or, for a schema migrated before that function existed, the
// latest migration whose objects are there.
func readSchemaState(ctx context.Context, read rowReader) (schemaState, error) {
	var s schemaState
	var hasJobs, hasUniqueKey, hasNotify, hasVersion bool
	err := read(ctx, schemaObjectsSQL, &s.searchPath, &s.schema, &hasJobs, &hasUniqueKey, &hasNotify, &hasVersion)
	if err != nil {
		return s, err
	}
	switch {
	case hasVersion:
		if err := read(ctx, schemaVersionSQL, &s.version); err != nil {
			return s, fmt.Errorf("read pgqueue_schema_version(): %w", err)
		}
	// The migrations that came before the schema stated its version, by what each added.
	case hasNotify:
		s.version = 20261201120000 // pgqueue_notify
	case hasUniqueKey:
		s.version = 20261129140000 // pgqueue_jobs.unique_key, pgqueue_queues
	case hasJobs:
		s.version = 20261129120000 // pgqueue_jobs
	}
	return s, nil
}

// undefinedObjectCodes are the SQLSTATEs of a statement that names a table, column or function
// the schema does not have: undefined_table, undefined_column, undefined_function.
var undefinedObjectCodes = map[string]bool{"42P01": true, "42703": true, "42883": true}

// explainSchemaError returns err with an explanation and ErrSchemaVersion added when it is the
// error of a statement that names a table, column or function the schema does not have: the
// schema is then missing or not at the version this code needs. Other errors are returned as
// they are. Call it on the error of any statement that reads or writes pgqueue's tables.
func explainSchemaError(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !undefinedObjectCodes[pgErr.Code] || errors.Is(err, ErrSchemaVersion) {
		return err
	}
	return &schemaQueryError{err: err}
}

// schemaQueryError is a statement's error explained by explainSchemaError.
type schemaQueryError struct{ err error }

// Error is the statement's error followed by the explanation.
func (e *schemaQueryError) Error() string {
	return fmt.Sprintf("%v (the schema is not at the pgqueue schema version this code needs, %d: "+
		"Client.CheckSchema says which it is; run pgqueue.Migrate, or goose up with pgqueue's migrations)", e.err, SchemaVersion)
}

// Unwrap returns ErrSchemaVersion and the statement's error.
func (e *schemaQueryError) Unwrap() []error { return []error{ErrSchemaVersion, e.err} }
