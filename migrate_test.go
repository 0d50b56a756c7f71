package pgqueue

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// tableExists reports whether the schema has the table.
func tableExists(t *testing.T, b *bundle, table string) bool {
	t.Helper()
	var ok bool
	err := b.pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = $2)", b.schema, table).Scan(&ok)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// functionExists reports whether the schema has a function of that name.
func functionExists(t *testing.T, b *bundle, name string) bool {
	t.Helper()
	var ok bool
	err := b.pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_proc AS p JOIN pg_namespace AS n
		ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = $2)`, b.schema, name).Scan(&ok)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestMigrateUpDownUp(t *testing.T) {
	t.Parallel()
	b := &bundle{t: t, schema: newSchema(t)}
	b.pool = newPool(t, b.schema, 4)
	ctx := t.Context()

	migrate(t, b.pool)
	if !tableExists(t, b, "pgqueue_jobs") || !tableExists(t, b, MigrationsVersionTable) {
		t.Fatal("after Migrate: pgqueue_jobs or the version table is missing")
	}
	migrate(t, b.pool) // a second run is a no-op

	b.migrateDownTo(0)
	if tableExists(t, b, "pgqueue_jobs") {
		t.Fatal("after migrating down: pgqueue_jobs still exists")
	}
	migrate(t, b.pool)
	if !tableExists(t, b, "pgqueue_jobs") {
		t.Fatal("after migrating up again: pgqueue_jobs is missing")
	}
	// The schema works after the round trip.
	q := newQueue[int](t, b.newClient(), "q")
	if _, err := q.Enqueue(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
}

// The notify migration adds pgqueue_channel and pgqueue_notify on the way up and takes them away,
// and nothing else, on the way down; twice over, then up to the latest.
func TestMigrateNotifyFunctions(t *testing.T) {
	t.Parallel()
	b := &bundle{t: t, schema: newSchema(t)}
	b.pool = newPool(t, b.schema, 4)
	ctx := t.Context()
	const before, notify = 20261129140000, 20261201120000
	functions := []string{"pgqueue_channel", "pgqueue_notify"}
	for round := range 2 {
		b.migrateUpTo(before)
		for _, f := range functions {
			if functionExists(t, b, f) {
				t.Fatalf("round %d: %s exists before the notify migration", round, f)
			}
		}
		b.migrateUpTo(notify)
		for _, f := range functions {
			if !functionExists(t, b, f) {
				t.Fatalf("round %d: %s missing after the notify migration", round, f)
			}
		}
		var volatility string
		if err := b.pool.QueryRow(ctx, `SELECT p.provolatile::text FROM pg_proc AS p JOIN pg_namespace AS n
			ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = 'pgqueue_notify'`, b.schema).
			Scan(&volatility); err != nil || volatility != "v" {
			t.Fatalf("round %d: pgqueue_notify has volatility %q (%v), want v (volatile)", round, volatility, err)
		}
		b.migrateDownTo(before)
		for _, f := range functions {
			if functionExists(t, b, f) {
				t.Fatalf("round %d: %s survived migrating down", round, f)
			}
		}
		if !tableExists(t, b, "pgqueue_jobs") || !tableExists(t, b, "pgqueue_queues") {
			t.Fatalf("round %d: migrating the notify migration down took a table with it", round)
		}
	}
	migrate(t, b.pool)
	q := newQueue[int](t, b.newClient(), "q")
	if _, err := q.Enqueue(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
}

// pgqueue_notify sends on the channel of the schema it lives in, whatever the caller's
// search_path: here one that puts another schema first, with a pg_notify of its own ahead of
// pg_catalog's. pgqueue_channel names the same channel.
func TestNotifyChannelIsTheFunctionsSchema(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other := newSchema(t)
	ctx := t.Context()
	b.exec("CREATE FUNCTION " + pgx.Identifier{other, "pg_notify"}.Sanitize() +
		"(text, text) RETURNS void LANGUAGE plpgsql AS $$BEGIN RAISE EXCEPTION 'the caller''s pg_notify ran'; END$$")

	listen, err := pgx.Connect(ctx, testDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer listen.Close(context.Background())
	var want, wrong string
	if err := listen.QueryRow(ctx, "SELECT ('pgqueue.' || $1::text)::name::text, ('pgqueue.' || $2::text)::name::text",
		b.schema, other).Scan(&want, &wrong); err != nil {
		t.Fatal(err)
	}
	var channel string
	if err := b.pool.QueryRow(ctx, channelSQL).Scan(&channel); err != nil || channel != want {
		t.Fatalf("channel.sql gives %q (%v), want %q", channel, err, want)
	}
	for _, c := range []string{want, wrong} {
		if _, err := listen.Exec(ctx, "LISTEN "+pgx.Identifier{c}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}

	caller := newPool(t, pgx.Identifier{other}.Sanitize()+", pg_catalog", 1)
	if _, err := caller.Exec(ctx, "SELECT "+pgx.Identifier{b.schema, "pgqueue_notify"}.Sanitize()+"($1)", "a q"); err != nil {
		t.Fatalf("pgqueue_notify from another search_path: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := listen.WaitForNotification(wctx)
	if err != nil {
		t.Fatalf("no notification: %v", err)
	}
	if n.Channel != want || n.Payload != "a q" {
		t.Fatalf("notification %q on %q, want %q on %q", n.Payload, n.Channel, "a q", want)
	}
}

// Ten processes starting at once each call Migrate; every migration must be applied exactly
// once. Each migrator has its own connections, as separate processes would.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	const migrators = 10
	errs := make(chan error, migrators)
	for range migrators {
		pool := newPool(t, schema, 2)
		go func() {
			db := stdlib.OpenDBFromPool(pool)
			defer db.Close()
			errs <- Migrate(t.Context(), db)
		}()
	}
	for range migrators {
		if err := <-errs; err != nil {
			t.Errorf("Migrate: %v", err)
		}
	}
	files, err := fs.Glob(Migrations, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	pool := newPool(t, schema, 1)
	var applied, distinct int
	err = pool.QueryRow(t.Context(),
		"SELECT count(*), count(DISTINCT version_id) FROM "+MigrationsVersionTable+" WHERE version_id > 0").Scan(&applied, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	if applied != len(files) || distinct != len(files) {
		t.Fatalf("version table has %d rows for %d distinct versions; want %d migrations applied once each",
			applied, distinct, len(files))
	}
}

// Every query in sql/ is prepared against a migrated schema, so a typo fails here: those on a
// goose version table against Migrate's.
func TestQueriesPrepare(t *testing.T) {
	t.Parallel()
	b := setup(t)
	files, err := fs.Glob(queryFiles, "sql/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries found: %v", err)
	}
	conn, err := b.pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, path := range files {
		text, err := fs.ReadFile(queryFiles, path)
		if err != nil {
			t.Fatal(err)
		}
		if path == "sql/job_filter.sql" || path == "sql/workflow_filter.sql" {
			continue // conditions, prepared within every bulk statement
		}
		// The statements on goose version tables name the table {table}; the bulk statements
		// take job_filter.sql's condition, and workflow_filter.sql's after their parameters.
		workflowParam := 7
		if strings.Contains(string(text), "$8") {
			workflowParam = 9
		}
		b := withJobFilter(string(text), workflowParam)
		for _, q := range []string{b.plain, b.workflow} {
			if _, err := conn.Conn().Prepare(t.Context(), "", versionTable{name: MigrationsVersionTable}.query(q)); err != nil {
				t.Errorf("%s: %v", path, err)
			}
		}
	}
}

func TestMigrateWithoutSchema(t *testing.T) {
	t.Parallel()
	pool := newPool(t, randomName("pgqueue_test_missing_"), 1)
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	if err := Migrate(t.Context(), db); !errors.Is(err, ErrSchemaVersion) {
		t.Fatalf("Migrate into a search_path without an existing schema: %v, want ErrSchemaVersion", err)
	}
}

// TestEveryMigrationDownRestores takes each migration up and down again and checks that down
// leaves the schema's catalog — tables, columns, indexes, constraints, triggers, functions — as
// it found it.
func TestEveryMigrationDownRestores(t *testing.T) {
	t.Parallel()
	b := emptyBundle(t)
	ms, err := embeddedMigrations()
	if err != nil {
		t.Fatal(err)
	}
	before := catalogOf(t, b)
	for i, m := range ms {
		b.migrateUpTo(m.version)
		if i > 0 {
			b.migrateDownTo(ms[i-1].version)
		} else {
			b.migrateDownTo(0)
		}
		if after := catalogOf(t, b); after != before {
			t.Fatalf("down from %d does not restore the catalog:\nbefore:\n%s\nafter:\n%s", m.version, before, after)
		}
		b.migrateUpTo(m.version)
		before = catalogOf(t, b)
	}
}

// catalogOf describes the pgqueue objects of b's schema, one per line, in a stable order; the
// migrations' version table, which migrating down keeps, is left out.
func catalogOf(t *testing.T, b *bundle) string {
	t.Helper()
	var s string
	err := b.pool.QueryRow(t.Context(), `
		SELECT coalesce(string_agg(line, E'\n' ORDER BY line), '') FROM (
			SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable ||
			       ' ' || coalesce(column_default, '') AS line
			FROM information_schema.columns WHERE table_schema = $1 AND table_name LIKE 'pgqueue%'
			UNION ALL
			SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = $1 AND tablename LIKE 'pgqueue%'
			UNION ALL
			SELECT 'constraint ' || conrelid::regclass::text || ' ' || pg_get_constraintdef(c.oid)
			FROM pg_constraint AS c JOIN pg_namespace AS n ON n.oid = c.connamespace WHERE n.nspname = $1
			UNION ALL
			SELECT 'trigger ' || pg_get_triggerdef(g.oid)
			FROM pg_trigger AS g JOIN pg_class AS r ON r.oid = g.tgrelid JOIN pg_namespace AS n ON n.oid = r.relnamespace
			WHERE n.nspname = $1 AND NOT g.tgisinternal
			UNION ALL
			SELECT 'function ' || p.oid::regprocedure::text || ' ' || md5(p.prosrc)
			FROM pg_proc AS p JOIN pg_namespace AS n ON n.oid = p.pronamespace WHERE n.nspname = $1
		) AS objects`, b.schema).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(s, "\n")
	lines = slices.DeleteFunc(lines, func(l string) bool { return strings.Contains(l, MigrationsVersionTable) })
	return strings.Join(lines, "\n")
}
