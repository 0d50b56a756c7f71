package pgqueue

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// A goose version table records which migrations a schema has: Migrate's own
// (pgqueue_goose_version) and the application's (MarkGooseApplied). pgqueue reads and writes it
// as goose's Postgres dialect does, so that a schema can be migrated by any pgqueue release and by
// goose: the same columns, a version 0 row inserted when the table is created, a row inserted
// for each migration applied and deleted when it is migrated down.

var (
	//go:embed sql/goose_version_exists.sql
	gooseVersionExistsSQL string
	//go:embed sql/goose_version_create.sql
	gooseVersionCreateSQL string
	//go:embed sql/goose_version_insert.sql
	gooseVersionInsertSQL string
	//go:embed sql/goose_version_delete.sql
	gooseVersionDeleteSQL string
	//go:embed sql/goose_version_list.sql
	gooseVersionListSQL string
)

// gooseDefaultTable is the version table goose uses unless told otherwise.
const gooseDefaultTable = "goose_db_version"

// gooseTableName matches a goose version table name, optionally schema-qualified: goose puts it
// into its statements as it is, unquoted.
var gooseTableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// versionTable is one goose version table.
type versionTable struct {
	schema string // "": the current schema, where an unqualified name is created
	name   string
}

// newVersionTable returns the table goose means by name (validated: letters, digits and _,
// optionally schema.table). goose writes the name unquoted, so Postgres folds it to lower case;
// pgqueue quotes it, folded the same way.
func newVersionTable(name string) (versionTable, error) {
	if !gooseTableName.MatchString(name) {
		return versionTable{}, fmt.Errorf("%q is not a table name goose can use (letters, digits and _, optionally schema.table)", name)
	}
	name = strings.ToLower(name)
	if schema, table, ok := strings.Cut(name, "."); ok {
		return versionTable{schema: schema, name: table}, nil
	}
	return versionTable{name: name}, nil
}

// String returns the table's name as goose shows it.
func (t versionTable) String() string {
	if t.schema == "" {
		return t.name
	}
	return t.schema + "." + t.name
}

// query returns the statement of a sql/goose_version_*.sql file for this table.
func (t versionTable) query(text string) string {
	id := pgx.Identifier{t.name}
	if t.schema != "" {
		id = pgx.Identifier{t.schema, t.name}
	}
	return strings.ReplaceAll(text, "{table}", id.Sanitize())
}

// ensure creates the table, with goose's version 0 row, if it does not exist, as goose does
// before its first migration.
func (t versionTable) ensure(ctx context.Context, tx *sql.Tx) error {
	var exists bool
	if err := tx.QueryRowContext(ctx, gooseVersionExistsSQL, t.schema, t.name).Scan(&exists); err != nil {
		return fmt.Errorf("look for %s: %w", t, err)
	}
	if exists {
		return nil
	}
	if _, err := tx.ExecContext(ctx, t.query(gooseVersionCreateSQL)); err != nil {
		return fmt.Errorf("create %s: %w", t, err)
	}
	return t.insert(ctx, tx, 0)
}

// insert records version as applied.
func (t versionTable) insert(ctx context.Context, tx *sql.Tx, version int64) error {
	if _, err := tx.ExecContext(ctx, t.query(gooseVersionInsertSQL), version); err != nil {
		return fmt.Errorf("record version %d in %s: %w", version, t, err)
	}
	return nil
}

// delete takes version out, as goose does when it migrates it down.
func (t versionTable) delete(ctx context.Context, tx *sql.Tx, version int64) error {
	if _, err := tx.ExecContext(ctx, t.query(gooseVersionDeleteSQL), version); err != nil {
		return fmt.Errorf("take version %d out of %s: %w", version, t, err)
	}
	return nil
}

// rowsQuerier is what applied reads through: a connection or a transaction.
type rowsQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// applied returns the versions the table records as applied, with the time of each. The newest
// row of a version decides, as in goose (older goose releases recorded a migration down as a row
// with is_applied false).
func (t versionTable) applied(ctx context.Context, q rowsQuerier) (map[int64]time.Time, error) {
	rows, err := q.QueryContext(ctx, t.query(gooseVersionListSQL))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t, err)
	}
	defer rows.Close()
	seen := make(map[int64]bool)
	applied := make(map[int64]time.Time)
	for rows.Next() {
		var version int64
		var isApplied bool
		var at time.Time
		if err := rows.Scan(&version, &isApplied, &at); err != nil {
			return nil, fmt.Errorf("read %s: %w", t, err)
		}
		if !seen[version] && isApplied {
			applied[version] = at
		}
		seen[version] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", t, err)
	}
	return applied, nil
}
