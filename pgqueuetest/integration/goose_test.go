package integration

// An application whose schema lives in its own goose directory, pgqueue's migrations among its
// own (pgqueue.WriteGooseMigrations), run by goose itself, as the application runs it.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/pgqueuetest"
)

// appMigrations is an application's goose directory: its own first migration (a table, and a
// function and trigger in a StatementBegin block), then pgqueue's from version 2 on.
const appMigrations = "testdata/appmigrations"

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
	db := pgqueuetest.NewDBWith(t, databaseURL, &pgqueuetest.DBOptions{Migrate: gooseUp(appMigrations)})
	if err := db.Client.CheckSchema(t.Context()); err != nil {
		t.Fatal(err)
	}
	var latest int64
	if err := db.Pool.QueryRow(t.Context(), "SELECT max(version_id) FROM goose_db_version").Scan(&latest); err != nil || latest != 16 {
		t.Fatalf("goose's version: %d, %v; want 16", latest, err)
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
	err := gooseUp(appMigrations)(t.Context(), pgqueuetest.NewDB(t, databaseURL, nil).SQL)
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("the application's goose after NewDB: %v, want pgqueue's tables in its way", err)
	}

	db := pgqueuetest.NewDBWith(t, databaseURL, &pgqueuetest.DBOptions{Migrate: pgqueuetest.NoMigration})
	if n := tablesNamed(t, db, "%"); n != 0 {
		t.Fatalf("the schema NoMigration leaves has %d tables", n)
	}
	if err := gooseUp(appMigrations)(t.Context(), db.SQL); err != nil {
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

// TestAppMigrationsHoldPgqueues: the testdata directory holds every one of pgqueue's migrations,
// byte for byte, as pgqueue.WriteGooseMigrations wrote them from version 2.
func TestAppMigrationsHoldPgqueues(t *testing.T) {
	t.Parallel()
	files, err := pgqueue.GooseMigrations(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(appMigrations, f.Name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			t.Errorf("%s lacks %s: pgqueue has a migration it lacks; add it with %s", appMigrations, f.Name,
				fmt.Sprintf("pgqueue.WriteGooseMigrations(%q, %d)", appMigrations, f.Version))
		case err != nil:
			t.Fatal(err)
		case string(data) != string(f.SQL):
			t.Errorf("%s/%s is not pgqueue's migration %d", appMigrations, f.Name, f.SchemaVersion)
		}
	}
}
