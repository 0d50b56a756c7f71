package integration

// An application whose schema lives in its own goose directory, pgqueue's migrations among its
// own (pgqueue.WriteGooseMigrations), run by goose itself, as the application runs it.

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

// appMigrations holds an application's own first migration: a table, and a function and trigger
// in a StatementBegin block.
const appMigrations = "testdata/appmigrations"

// appGooseDir returns the application's goose directory as it keeps it: its own migration, then
// pgqueue's, written after it by pgqueue.WriteGooseMigrations; and the highest goose version.
func appGooseDir(t *testing.T) (dir string, latest int64) {
	t.Helper()
	dir = t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(appMigrations)); err != nil {
		t.Fatal(err)
	}
	files, err := pgqueue.WriteGooseMigrations(dir, 0)
	if err != nil || len(files) == 0 {
		t.Fatalf("write pgqueue's goose files: %d, %v", len(files), err)
	}
	return dir, files[len(files)-1].Version
}

// email is the payload of the application's welcome queue.
type email struct {
	To string `json:"to"`
}

// gooseUp applies the goose directory dir with goose's Provider, as an application does.
func gooseUp(dir string) func(ctx context.Context, db *sql.DB) error {
	return func(ctx context.Context, db *sql.DB) error {
		p, err := goose.NewProvider(goose.DialectPostgres, db, os.DirFS(dir))
		if err != nil {
			return err
		}
		_, err = p.Up(ctx)
		return err
	}
}

// TestNewDBWithTheApplicationsGoose: DBOptions.Migrate runs the application's goose directory in
// place of pgqueue.Migrate; the application's tables and pgqueue's are there, recorded in goose's
// version table alone, and the client works on them.
func TestNewDBWithTheApplicationsGoose(t *testing.T) {
	t.Parallel()
	dir, want := appGooseDir(t)
	db := pgqueuetest.NewDBWith(t, databaseURL, &pgqueuetest.DBOptions{Migrate: gooseUp(dir)})
	if err := db.Client.CheckSchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	var latest int64
	if err := db.Pool.QueryRow(t.Context(), "SELECT max(version_id) FROM goose_db_version").Scan(&latest); err != nil || latest != want {
		t.Fatalf("goose's version: %d, %v; want %d", latest, err, want)
	}
	if n := tablesNamed(t, db, "pgqueue_goose_version"); n != 0 {
		t.Fatalf("pgqueue.Migrate ran too: its version table is there")
	}
	signUpAndWelcome(t, db)
}

// TestNewDBWithNoMigration: NoMigration leaves the schema empty, for the application to migrate
// after NewDBWith; NewDB, which migrates pgqueue, leaves the application's goose directory
// nothing it can apply.
func TestNewDBWithNoMigration(t *testing.T) {
	t.Parallel()
	dir, _ := appGooseDir(t)
	err := gooseUp(dir)(t.Context(), pgqueuetest.NewDB(t, databaseURL, nil).SQL)
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("the application's goose after NewDB: %v, want pgqueue's tables in its way", err)
	}

	db := pgqueuetest.NewDBWith(t, databaseURL, &pgqueuetest.DBOptions{Migrate: pgqueuetest.NoMigration})
	if n := tablesNamed(t, db, "%"); n != 0 {
		t.Fatalf("the schema NoMigration leaves has %d tables", n)
	}
	if err := gooseUp(dir)(t.Context(), db.SQL); err != nil {
		t.Fatalf("the application's goose in the empty schema: %v", err)
	}
	signUpAndWelcome(t, db)
}

// tablesNamed counts the tables of the test's schema whose names are LIKE pattern.
func tablesNamed(t *testing.T, db *pgqueuetest.DB, pattern string) int {
	t.Helper()
	var n int
	err := db.Pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename LIKE $2",
		db.Schema, pattern).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// signUpAndWelcome inserts a user through the application's trigger and enqueues a welcome in
// the same transaction, then works it.
func signUpAndWelcome(t *testing.T, db *pgqueuetest.DB) {
	t.Helper()
	welcomes, err := pgqueue.NewQueue[email](db.Client, "welcomes")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var addr string
	if err := tx.QueryRow(t.Context(), "INSERT INTO users (email) VALUES ('Ada@Example.com') RETURNING email").Scan(&addr); err != nil {
		t.Fatal(err)
	}
	if _, err := welcomes.EnqueueTx(t.Context(), tx, email{To: addr}, nil); err != nil {
		t.Fatal(err)
	}
	// The application's trigger lower-cased the address.
	pgqueuetest.RequireEnqueued(t, tx, welcomes, func(e email) bool { return e.To == "ada@example.com" })
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	worker, err := welcomes.NewWorker(func(context.Context, *pgqueue.Job[email]) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := pgqueuetest.WorkOne(t, worker); r.Kind != pgqueue.EventCompleted {
		t.Fatalf("worked %+v, want completed", r)
	}
}
