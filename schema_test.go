package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/oklog/ulid/v2"
)

// emptyBundle is a bundle on a schema of its own that holds nothing yet.
func emptyBundle(t *testing.T) *bundle {
	t.Helper()
	b := &bundle{t: t, schema: newSchema(t)}
	b.pool = newPool(t, b.schema, 4)
	return b
}

// migrateUpTo brings the bundle's schema up to version with MigrateTo.
func (b *bundle) migrateUpTo(version int64) {
	b.t.Helper()
	db := stdlib.OpenDBFromPool(b.pool)
	defer db.Close()
	if _, err := MigrateTo(b.t.Context(), db, version); err != nil {
		b.t.Fatalf("migrate to %d: %v", version, err)
	}
}

// migrateDownTo brings the bundle's schema down to version with MigrateDown.
func (b *bundle) migrateDownTo(version int64) {
	b.t.Helper()
	db := stdlib.OpenDBFromPool(b.pool)
	defer db.Close()
	if _, err := MigrateDown(b.t.Context(), db, version); err != nil {
		b.t.Fatalf("migrate down to %d: %v", version, err)
	}
}

// schemaError returns CheckSchema's error as a *SchemaError, failing the test for any other.
func schemaError(t *testing.T, c *Client) *SchemaError {
	t.Helper()
	err := c.CheckSchema(t.Context())
	var se *SchemaError
	if !errors.Is(err, ErrSchemaVersion) || !errors.As(err, &se) {
		t.Fatalf("CheckSchema: %v, want a *SchemaError wrapping ErrSchemaVersion", err)
	}
	if strings.Count(err.Error(), "pgqueue:") != 1 {
		t.Errorf("CheckSchema: %q repeats the prefix", err)
	}
	return se
}

// schemaAt checks the version the schema states (or shows).
func schemaAt(t *testing.T, c *Client, want int64) {
	t.Helper()
	if want == SchemaVersion {
		if err := c.CheckSchema(t.Context()); err != nil {
			t.Fatalf("CheckSchema: %v", err)
		}
		return
	}
	if se := schemaError(t, c); se.Have != want {
		t.Fatalf("schema at %d, want %d", se.Have, want)
	}
}

// SchemaVersion is the version of the latest embedded migration, and what a migrated schema
// states.
func TestSchemaVersionIsTheLatestMigration(t *testing.T) {
	t.Parallel()
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	if latest := ms[len(ms)-1].version; latest != SchemaVersion {
		t.Fatalf("SchemaVersion is %d, the latest migration %d", SchemaVersion, latest)
	}
	b := setup(t)
	var v int64
	if err := b.pool.QueryRow(t.Context(), "SELECT pgqueue_schema_version()").Scan(&v); err != nil || v != SchemaVersion {
		t.Fatalf("pgqueue_schema_version() = %d (%v), want %d", v, err, SchemaVersion)
	}
	if err := b.client.CheckSchema(t.Context()); err != nil {
		t.Fatalf("CheckSchema on a migrated schema: %v", err)
	}
}

// At each migration, up and down, the version read is that migration's: from
// pgqueue_schema_version() where it exists, from the objects of each migration before it.
func TestSchemaVersionAtEachMigration(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	c := b.newClient()
	ctx := t.Context()
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	expect := func(step string, want int64) {
		t.Helper()
		if want == SchemaVersion {
			if err := c.CheckSchema(ctx); err != nil {
				t.Fatalf("%s: CheckSchema: %v", step, err)
			}
			return
		}
		if se := schemaError(t, c); se.Have != want || se.Want != SchemaVersion || se.Schema != b.schema {
			t.Fatalf("%s: %+v, want version %d of %d in %s", step, se, want, SchemaVersion, b.schema)
		}
	}
	expect("before migrating", 0)
	for _, m := range ms {
		b.migrateUpTo(m.version)
		expect(fmt.Sprintf("up to %d", m.version), m.version)
	}
	for i := len(ms) - 1; i >= 0; i-- {
		prev := int64(0)
		if i > 0 {
			prev = ms[i-1].version
		}
		b.migrateDownTo(prev)
		expect(fmt.Sprintf("down to %d", prev), prev)
	}
}

// Every mismatch gives a *SchemaError that says what is there, what is needed and what to run;
// Run returns it before serving.
func TestCheckSchemaMismatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		prepare func(b *bundle)
		have    int64
		says    []string
	}{
		{"no tables", func(*bundle) {}, 0, []string{"has no pgqueue tables", "needs schema version", "pgqueue.Migrate", "goose up"}},
		{"old version", func(b *bundle) {
			b.migrateUpTo(20261129140000)
		}, 20261129140000, []string{"is at pgqueue schema version 20261129140000", fmt.Sprint(SchemaVersion), "pgqueue.Migrate"}},
		{"newer version", func(b *bundle) {
			migrate(b.t, b.pool)
			b.exec(fmt.Sprintf("CREATE OR REPLACE FUNCTION pgqueue_schema_version() RETURNS bigint "+
				"LANGUAGE sql STABLE AS 'SELECT %d::bigint'", SchemaVersion+1))
		}, SchemaVersion + 1, []string{"newer than this pgqueue knows", "upgrade pgqueue"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := emptyBundle(t)
			tc.prepare(b)
			c := b.newClient()
			se := schemaError(t, c)
			if se.Have != tc.have || se.Want != SchemaVersion || se.Schema != b.schema {
				t.Fatalf("%+v, want version %d of %d in %s", se, tc.have, SchemaVersion, b.schema)
			}
			for _, s := range append(tc.says, b.schema) {
				if !strings.Contains(se.Error(), s) {
					t.Errorf("%q does not say %q", se, s)
				}
			}
			w, err := newQueue[int](t, c, "q").NewWorker(func(ctx context.Context, j *Job[int]) error { return nil }, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if err := c.Run(ctx, w); !errors.As(err, &se) || se.Have != tc.have {
				t.Fatalf("Run: %v, want the *SchemaError", err)
			}
		})
	}
}

// A search_path that names no schema that exists: CheckSchema and Migrate say so.
func TestCheckSchemaWithoutSchema(t *testing.T) {
	t.Parallel()
	missing := randomName("pgqueue_test_missing_")
	pool := newPool(t, missing, 1)
	c, err := NewClient(pool, &Config{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	se := schemaError(t, c)
	if se.Schema != "" || se.SearchPath != missing || !strings.Contains(se.Error(), "no schema of search_path") {
		t.Fatalf("%+v: %v", se, se)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	err = Migrate(t.Context(), db)
	if !errors.As(err, &se) || se.Schema != "" || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Migrate: %v, want a *SchemaError naming the search_path", err)
	}
	if strings.Contains(err.Error(), MigrationsVersionTable) || strings.Count(err.Error(), "pgqueue:") != 1 {
		t.Fatalf("Migrate: %q", err)
	}
}

// A statement that names a table, column or function the schema lacks is explained, and keeps
// Postgres's error; other errors are left alone.
func TestExplainSchemaError(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	ctx := t.Context()
	b.migrateUpTo(20261129120000)
	for _, q := range []string{
		"SELECT 1 FROM pgqueue_queues",        // 42P01
		"SELECT unique_key FROM pgqueue_jobs", // 42703
		"SELECT pgqueue_notify('x')",          // 42883
	} {
		_, err := b.pool.Exec(ctx, q)
		err = explainSchemaError(err)
		var pgErr *pgconn.PgError
		if !errors.Is(err, ErrSchemaVersion) || !errors.As(err, &pgErr) ||
			!strings.Contains(err.Error(), "Client.CheckSchema") || !strings.Contains(err.Error(), pgErr.Message) {
			t.Errorf("%s: %v", q, err)
		}
		if again := explainSchemaError(err); again != err {
			t.Errorf("%s: explained twice: %v", q, again)
		}
	}
	_, err := b.pool.Exec(ctx, "SELECT 1/0")
	if explainSchemaError(err) != err || errors.Is(err, ErrSchemaVersion) {
		t.Errorf("division by zero explained as a schema error: %v", explainSchemaError(err))
	}
	if explainSchemaError(nil) != nil {
		t.Error("explainSchemaError(nil) is not nil")
	}
}

// A runtime whose statements fail because the schema changed under it reports EventError
// wrapping ErrSchemaVersion.
func TestRunReportsSchemaErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	evs := newEvents()
	q := newQueue[int](t, b.client, "q")
	w, err := q.NewWorker(func(ctx context.Context, j *Job[int]) error { return nil },
		&WorkerOptions{PollInterval: 50 * time.Millisecond, OnEvent: evs.on})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, w)
	evs.next(t, EventDrained)
	b.exec("ALTER TABLE pgqueue_queues RENAME TO pgqueue_queues_gone")
	for {
		ev := evs.next(t, EventError)
		if errors.Is(ev.Err, ErrSchemaVersion) {
			break
		}
		t.Logf("an error not explained (yet): %v", ev.Err)
	}
	b.exec("ALTER TABLE pgqueue_queues_gone RENAME TO pgqueue_queues")
}

// The calls an application makes against a schema that has only pgqueue's first migration fail
// wrapping ErrSchemaVersion, with the package named once.
func TestCallsOnAnOldSchema(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	ctx := t.Context()
	b.migrateUpTo(20261129120000)
	client, err := NewClient(b.pool, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := must(NewQueue[int](client, "old"))
	_, enqueueErr := q.Enqueue(ctx, 1, &EnqueueOptions{UniqueKey: "k"})
	_, manyErr := q.EnqueueMany(ctx, []int{1, 2}, nil)
	_, statsErr := q.Stats(ctx)
	_, jobErr := client.Job(ctx, ulid.Make())
	for name, err := range map[string]error{"Enqueue": enqueueErr, "EnqueueMany": manyErr, "Stats": statsErr,
		"Pause": q.Pause(ctx), "Client.Job": jobErr} {
		if !errors.Is(err, ErrSchemaVersion) || strings.Count(err.Error(), "pgqueue:") != 1 {
			t.Errorf("%s: %v", name, err)
		}
	}
}
