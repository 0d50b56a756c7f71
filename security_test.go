package pgqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/oklog/ulid/v2"

	"github.com/pgqueue/pgqueue/internal/testenv"
)

// TestHostileSchemaName runs pgqueue in a schema whose name holds quotes, spaces, a semicolon,
// an attempted injection, upper case and non-ASCII letters, long enough that its LISTEN/NOTIFY
// channel ("pgqueue." and the schema) is longer than the 63 bytes Postgres allows a channel:
// migrate, enqueue, wake an idle worker through NOTIFY, watch, pause, cancel. Nothing of the
// name is ever executed: a canary table in the schema survives. It stays one function: the steps
// share the one hostile schema and read in the order an application takes them.
func TestHostileSchemaName(t *testing.T) {
	t.Parallel()
	schema := `Q "x'; DROP TABLE canary; -- Ünïcödé Schéma ` + randomName("")
	if len(schema) > 63 || len("pgqueue."+schema) <= 63 {
		t.Fatalf("schema name of %d bytes: want one that fits 63 bytes while its channel does not", len(schema))
	}
	quoted := pgx.Identifier{schema}.Sanitize()
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, testDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+quoted); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), testDSN)
		if err != nil {
			t.Errorf("connect to drop schema: %v", err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+quoted+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	if _, err := admin.Exec(ctx, "CREATE TABLE "+quoted+".canary (x int); INSERT INTO "+quoted+".canary VALUES (1)"); err != nil {
		t.Fatal(err)
	}

	cfg, err := pgxpool.ParseConfig(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = quoted
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrate(t, pool)
	migrate(t, pool) // a second run finds its version table in the same schema
	var tables int
	if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename LIKE 'pgqueue%'`,
		schema).Scan(&tables); err != nil || tables != 14 {
		t.Fatalf("%d pgqueue tables in the schema (%v), want 14 (pgqueue_history and its forever partition among them)", tables, err)
	}

	client, err := NewClient(pool, &Config{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[string](t, client, "hostile")

	// The worker polls once an hour: only NOTIFY on the schema's channel can wake it.
	evs := newEvents()
	ran := make(chan string, 10)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[string]) error {
		ran <- job.Payload
		if job.Payload == "block" {
			<-ctx.Done()
		}
		return nil
	}, &WorkerOptions{Concurrency: 2, PollInterval: time.Hour, OnEvent: evs.on}))
	startWorker(t, w)
	evs.next(t, EventDrained)
	waitFor(t, 10*time.Second, "the listener to listen", func() bool { return client.listener.pid.Load() != 0 })
	// The history's keeper makes the partitions in the schema of that name (its functions quote
	// it), from today on.
	today := "pgqueue_history_" + time.Now().UTC().Format("20060102")
	waitFor(t, 10*time.Second, "today's partition of the history", func() bool {
		var n int
		err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = $2", schema, today).Scan(&n)
		return err == nil && n == 1
	})
	changes, err := q.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if c := receive(t, changes, 10*time.Second, "the first change"); c.Kind != ChangeResync {
		t.Fatalf("first change %+v, want resync", c)
	}

	if _, err := q.Enqueue(ctx, "woken", nil); err != nil {
		t.Fatalf("Enqueue in the hostile schema: %v", err)
	}
	if got := receive(t, ran, 10*time.Second, "the job woken by NOTIFY"); got != "woken" {
		t.Fatalf("ran %q", got)
	}
	evs.next(t, EventCompleted)
	if c := nextChange(t, changes, ChangeEnqueued); c.Queue != q.Name() {
		t.Fatalf("watch reported %+v", c)
	}

	// Pause and resume reach the worker over the same channel.
	if err := q.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	nextChange(t, changes, ChangePaused)
	if _, err := q.Enqueue(ctx, "after resume", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-ran:
		t.Fatalf("the paused queue ran %q", p)
	case <-time.After(200 * time.Millisecond):
	}
	if err := q.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, ran, 10*time.Second, "the job after resume"); got != "after resume" {
		t.Fatalf("ran %q", got)
	}

	// Cancelling a running job is told to its worker over the channel too.
	job, err := q.Enqueue(ctx, "block", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := receive(t, ran, 10*time.Second, "the blocking job"); got != "block" {
		t.Fatalf("ran %q", got)
	}
	if err := q.Cancel(ctx, job.ID); err != nil {
		t.Fatal(err)
	}
	if ev := evs.next(t, EventCancelled); ev.JobID != job.ID {
		t.Fatalf("cancelled %s, want %s", ev.JobID, job.ID)
	}

	var canary int
	if err := admin.QueryRow(ctx, "SELECT x FROM "+quoted+".canary").Scan(&canary); err != nil || canary != 1 {
		t.Fatalf("canary table: %d, %v", canary, err)
	}
}

// leastPrivilegeGrants are the privileges a role needs to use pgqueue (enqueue, work, operate,
// list, watch) in a schema migrated by another role, the owner. Migrate needs the owner.
//
//	GRANT USAGE ON SCHEMA <schema> TO <role>;
//	GRANT SELECT, INSERT, UPDATE, DELETE ON <schema>.pgqueue_jobs, <schema>.pgqueue_queues, <schema>.pgqueue_schedules,
//	    <schema>.pgqueue_counts, <schema>.pgqueue_count_deltas, <schema>.pgqueue_starts,
//	    <schema>.pgqueue_claims_held, <schema>.pgqueue_workflows, <schema>.pgqueue_workflow_jobs,
//	    <schema>.pgqueue_deps, <schema>.pgqueue_ended TO <role>;
//	GRANT EXECUTE ON FUNCTION <schema>.pgqueue_notify(text), <schema>.pgqueue_channel(), <schema>.pgqueue_schema_version(),
//	    <schema>.pgqueue_count_moves(text[], text[], text[]), <schema>.pgqueue_capped_take(text, integer),
//	    <schema>.pgqueue_wake_held(text[]), <schema>.pgqueue_start_holds(<schema>.pgqueue_starts, timestamptz),
//	    <schema>.pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer,
//	    uuid[], text), <schema>.pgqueue_lock_parents(uuid[]), <schema>.pgqueue_ulid(uuid) TO <role>;
//
// Postgres grants EXECUTE on a new function to PUBLIC unless default privileges revoke it, so the
// last line is needed only where that grant has been revoked.
const leastPrivilegeGrants = `GRANT USAGE ON SCHEMA %[1]s TO %[2]s;
GRANT SELECT, INSERT, UPDATE, DELETE ON %[1]s.pgqueue_jobs, %[1]s.pgqueue_queues, %[1]s.pgqueue_schedules,
    %[1]s.pgqueue_counts, %[1]s.pgqueue_count_deltas, %[1]s.pgqueue_starts, %[1]s.pgqueue_claims_held,
    %[1]s.pgqueue_workflows, %[1]s.pgqueue_workflow_jobs, %[1]s.pgqueue_deps, %[1]s.pgqueue_ended TO %[2]s;
GRANT EXECUTE ON FUNCTION %[1]s.pgqueue_notify(text), %[1]s.pgqueue_channel(), %[1]s.pgqueue_schema_version(),
    %[1]s.pgqueue_count_moves(text[], text[], text[]), %[1]s.pgqueue_capped_take(text, integer),
    %[1]s.pgqueue_wake_held(text[]), %[1]s.pgqueue_start_holds(%[1]s.pgqueue_starts, timestamptz),
    %[1]s.pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer, uuid[], text),
    %[1]s.pgqueue_lock_parents(uuid[]), %[1]s.pgqueue_ulid(uuid), %[1]s.pgqueue_line_place(integer, uuid) TO %[2]s;
GRANT SELECT, INSERT, UPDATE, DELETE ON %[1]s.pgqueue_history TO %[2]s;
GRANT SELECT ON %[1]s.pgqueue_all_jobs TO %[2]s;
GRANT EXECUTE ON FUNCTION %[1]s.pgqueue_ulid_time(uuid), %[1]s.pgqueue_history_job(uuid),
    %[1]s.pgqueue_history_extend(timestamptz), %[1]s.pgqueue_history_drop() TO %[2]s`

// historyGrants is the part of leastPrivilegeGrants that names what the history's migration
// (20261214120000) added.
const historyGrants = `;
GRANT SELECT, INSERT, UPDATE, DELETE ON %[1]s.pgqueue_history TO %[2]s;
GRANT SELECT ON %[1]s.pgqueue_all_jobs TO %[2]s;
GRANT EXECUTE ON FUNCTION %[1]s.pgqueue_ulid_time(uuid), %[1]s.pgqueue_history_job(uuid),
    %[1]s.pgqueue_history_extend(timestamptz), %[1]s.pgqueue_history_drop() TO %[2]s`

// pgqueueFunctions are the functions the migrations create that statements call, as
// regprocedure text: all but the trigger functions (a trigger runs its function whatever the
// privileges of the role whose statement fires it).
var pgqueueFunctions = []string{"pgqueue_notify(text)", "pgqueue_channel()", "pgqueue_schema_version()",
	"pgqueue_count_moves(text[],text[],text[])", "pgqueue_capped_take(text,integer)", "pgqueue_wake_held(text[])",
	"pgqueue_start_holds(pgqueue_starts,timestamp with time zone)",
	"pgqueue_add_job(text,jsonb,timestamp with time zone,integer,integer,text,text,integer,jsonb,interval,integer,uuid[],text)",
	"pgqueue_lock_parents(uuid[])", "pgqueue_ulid(uuid)", "pgqueue_line_place(integer,uuid)",
	"pgqueue_ulid_time(uuid)", "pgqueue_history_job(uuid)", "pgqueue_history_extend(timestamp with time zone)",
	"pgqueue_history_drop()"}

// definerFunctions are those of pgqueueFunctions that run as their owner, whose EXECUTE PUBLIC
// does not hold.
var definerFunctions = []string{"pgqueue_history_extend(timestamp with time zone)", "pgqueue_history_drop()"}

// newRole creates a login role that holds nothing, dropped (with what it owns and its grants)
// when the test ends, and returns its name.
func newRole(t *testing.T, b *bundle) string {
	t.Helper()
	role := randomName("pgqueue_role_")
	b.exec("CREATE ROLE " + pgx.Identifier{role}.Sanitize() + " LOGIN")
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), testDSN)
		if err != nil {
			t.Errorf("connect to drop role: %v", err)
			return
		}
		defer conn.Close(context.Background())
		r := pgx.Identifier{role}.Sanitize()
		if _, err := conn.Exec(context.Background(), "DROP OWNED BY "+r+"; DROP ROLE "+r); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	return role
}

// A role given the grants documented before migration 20261207120000, which added
// pgqueue_claims_held, may use the new table once the schema is migrated: the migration grants it
// to every role that may update pgqueue_jobs, so that claims and settles go on across the
// upgrade. A queue's claims held back when it runs stay marked. So with the function
// pgqueue_start_holds of 20261210120000, pgqueue_add_job of 20261211120000 for the roles that
// may insert jobs, the tables and functions of workflows (20261212120000, 20261212140000), and
// pgqueue_line_place of 20261213120000, and the history of 20261214120000.
func TestLeastPrivilegeAcrossUpgrade(t *testing.T) {
	t.Parallel()
	b := &bundle{t: t, schema: newSchema(t)}
	b.pool = newPool(t, b.schema, 4)
	ctx := t.Context()
	if _, err := MigrateTo(ctx, b.db(), 20261206120000); err != nil {
		t.Fatal(err)
	}
	role := newRole(t, b)
	before := strings.Replace(leastPrivilegeGrants, historyGrants, "", 1)
	before = strings.Replace(before, ", %[1]s.pgqueue_claims_held,\n    %[1]s.pgqueue_workflows, "+
		"%[1]s.pgqueue_workflow_jobs, %[1]s.pgqueue_deps, %[1]s.pgqueue_ended", "", 1)
	before = strings.Replace(before, ", %[1]s.pgqueue_start_holds(%[1]s.pgqueue_starts, timestamptz),\n    "+
		"%[1]s.pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer, uuid[], text),\n    "+
		"%[1]s.pgqueue_lock_parents(uuid[]), %[1]s.pgqueue_ulid(uuid), %[1]s.pgqueue_line_place(integer, uuid)", "", 1)
	if strings.Contains(before, "workflow") || strings.Contains(before, "add_job") || strings.Contains(before, "line_place") ||
		strings.Contains(before, "history") {
		t.Fatalf("the grants before the upgrade still name what it adds:\n%s", before)
	}
	b.exec(fmt.Sprintf(before, pgx.Identifier{b.schema}.Sanitize(), pgx.Identifier{role}.Sanitize()))
	b.exec("INSERT INTO pgqueue_queues (name, claims_held) VALUES ('held', true)")
	migrate(t, b.pool)
	table := pgx.Identifier{b.schema}.Sanitize() + ".pgqueue_claims_held"
	for _, privilege := range []string{"SELECT", "INSERT", "DELETE"} {
		var ok bool
		if err := b.pool.QueryRow(ctx, "SELECT has_table_privilege($1, $2, $3)", role, table, privilege).Scan(&ok); err != nil || !ok {
			t.Fatalf("after the upgrade the role may not %s on pgqueue_claims_held (%v)", privilege, err)
		}
	}
	var held bool
	if err := b.pool.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pgqueue_claims_held WHERE queue = 'held')").Scan(&held); err != nil || !held {
		t.Fatalf("the held claim's mark was not carried over (%v)", err)
	}
	fn := pgx.Identifier{b.schema}.Sanitize() + ".pgqueue_start_holds(pgqueue_starts, timestamptz)"
	if err := b.pool.QueryRow(ctx, "SELECT has_function_privilege($1, $2, 'EXECUTE')", role, fn).Scan(&held); err != nil || !held {
		t.Fatalf("after the upgrade the role may not execute pgqueue_start_holds (%v)", err)
	}
	for _, f := range []string{"pgqueue_add_job(text, jsonb, timestamptz, integer, integer, text, text, integer, jsonb, interval, integer, uuid[], text)",
		"pgqueue_lock_parents(uuid[])", "pgqueue_ulid(uuid)", "pgqueue_line_place(integer,uuid)",
		"pgqueue_ulid_time(uuid)", "pgqueue_history_job(uuid)", "pgqueue_history_extend(timestamp with time zone)",
		"pgqueue_history_drop()"} {
		fn = pgx.Identifier{b.schema}.Sanitize() + "." + f
		if err := b.pool.QueryRow(ctx, "SELECT has_function_privilege($1, $2, 'EXECUTE')", role, fn).Scan(&held); err != nil || !held {
			t.Fatalf("after the upgrade the role may not execute %s (%v)", f, err)
		}
	}
	for _, table := range []string{"pgqueue_workflows", "pgqueue_workflow_jobs", "pgqueue_deps", "pgqueue_ended", "pgqueue_history"} {
		for _, privilege := range []string{"SELECT", "INSERT", "UPDATE", "DELETE"} {
			var ok bool
			name := pgx.Identifier{b.schema}.Sanitize() + "." + table
			if err := b.pool.QueryRow(ctx, "SELECT has_table_privilege($1, $2, $3)", role, name, privilege).Scan(&ok); err != nil || !ok {
				t.Fatalf("after the upgrade the role may not %s on %s (%v)", privilege, table, err)
			}
		}
	}
}

// TestLeastPrivilege uses pgqueue as a role that holds only leastPrivilegeGrants: every call an
// application makes works, and Migrate fails. PUBLIC's default EXECUTE on the functions is
// revoked first, so that the role holds nothing beyond the grants. It stays one function: it walks
// every call an application makes, in order, as the one restricted role.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	role := newRole(t, b)
	executable := func() (n int) {
		t.Helper()
		for _, f := range pgqueueFunctions {
			var ok bool
			err := b.pool.QueryRow(ctx, "SELECT has_function_privilege($1, $2, 'EXECUTE')",
				role, pgx.Identifier{b.schema}.Sanitize()+"."+f).Scan(&ok)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				n++
			}
		}
		return n
	}
	var called []string
	if err := b.pool.QueryRow(ctx, `SELECT coalesce(array_agg(p.oid::regprocedure::text), '{}')
		FROM pg_proc AS p WHERE p.pronamespace = $1::regnamespace AND p.prorettype <> 'trigger'::regtype`,
		pgx.Identifier{b.schema}.Sanitize()).Scan(&called); err != nil {
		t.Fatal(err)
	}
	for i, f := range called { // regprocedure text names the schema when it is not on the search_path
		called[i] = strings.TrimPrefix(f, b.schema+".")
	}
	slices.Sort(called)
	if want := slices.Sorted(slices.Values(pgqueueFunctions)); !slices.Equal(called, want) {
		t.Fatalf("the schema's functions that statements call are %v; pgqueueFunctions (and the grants of docs/migrations.md, \"Least privilege\") say %v", called, want)
	}
	// All but the history's two SECURITY DEFINER functions, which make and drop tables as their
	// owner: migration 20261214120000 grants them to the roles that may change jobs, not PUBLIC.
	if n := executable(); n != len(pgqueueFunctions)-len(definerFunctions) {
		t.Fatalf("a new role may execute %d of the %d functions by default, want all but the %d SECURITY DEFINER ones (PUBLIC)",
			n, len(pgqueueFunctions), len(definerFunctions))
	}
	for _, f := range pgqueueFunctions {
		b.exec("REVOKE EXECUTE ON FUNCTION " + pgx.Identifier{b.schema}.Sanitize() + "." + f + " FROM PUBLIC")
	}
	if n := executable(); n != 0 {
		t.Fatalf("the role may execute %d functions after the revoke from PUBLIC, want 0", n)
	}
	b.exec(fmt.Sprintf(leastPrivilegeGrants, pgx.Identifier{b.schema}.Sanitize(), pgx.Identifier{role}.Sanitize()))

	cfg, err := pgxpool.ParseConfig(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = role
	cfg.ConnConfig.Password = ""
	cfg.ConnConfig.RuntimeParams["search_path"] = b.schema
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var who string
	if err := pool.QueryRow(ctx, "SELECT current_user").Scan(&who); err != nil || who != role {
		t.Fatalf("connected as %q (%v), want %q", who, err, role)
	}

	db := stdlib.OpenDBFromPool(pool)
	err = Migrate(ctx, db)
	_ = db.Close()
	if err == nil {
		t.Fatal("Migrate as a role without ownership succeeded")
	}

	client, err := NewClient(pool, &Config{Logger: testLogger(t), Retention: Retention{Completed: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[string](t, client, "restricted")
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s as the restricted role: %v", what, err)
		}
	}

	check("CheckSchema", client.CheckSchema(ctx))
	changes, err := q.Watch(ctx)
	check("Watch", err)
	nextChange(t, changes, ChangeResync)
	check("Pause", q.Pause(ctx))
	check("Resume", q.Resume(ctx))

	ok, err := q.Enqueue(ctx, "ok", &EnqueueOptions{Priority: 3})
	check("Enqueue", err)
	unique, err := q.Enqueue(ctx, "unique", &EnqueueOptions{UniqueKey: "u"})
	check("Enqueue unique", err)
	dup, err := q.Enqueue(ctx, "unique", &EnqueueOptions{UniqueKey: "u"})
	check("Enqueue duplicate", err)
	if !dup.Duplicate {
		t.Fatal("the second unique enqueue was not a duplicate")
	}
	_, err = q.EnqueueMany(ctx, []string{"many", "many"}, &EnqueueOptions{Delay: time.Hour})
	check("EnqueueMany", err)
	tx, err := pool.Begin(ctx)
	check("Begin", err)
	_, err = q.EnqueueTx(ctx, tx, "tx", &EnqueueOptions{Delay: time.Hour})
	check("EnqueueTx", err)
	_, err = q.EnqueueManyTx(ctx, tx, []string{"tx many"}, &EnqueueOptions{Delay: time.Hour})
	check("EnqueueManyTx", err)
	check("Commit", tx.Commit(ctx))
	_, err = pool.Exec(ctx, `SELECT pgqueue_add_job('restricted_sql', '"from SQL"', run_at => now() + interval '1 hour')`)
	check("pgqueue_add_job", err)
	failing, err := q.Enqueue(ctx, "fail", &EnqueueOptions{MaxAttempts: 1})
	check("Enqueue", err)
	snoozing, err := q.Enqueue(ctx, "snooze", nil)
	check("Enqueue", err)
	intx, err := q.Enqueue(ctx, "complete in tx", nil)
	check("Enqueue", err)
	running, err := q.Enqueue(ctx, "run until cancelled", &EnqueueOptions{Priority: -1})
	check("Enqueue", err)

	// Work: complete, update, fail, snooze, complete in the handler's transaction, cancel a
	// running job; heartbeats and rescue run meanwhile (short lease and poll).
	evs := newEvents()
	started := make(chan struct{}, 1)
	w := must(q.NewWorker(func(ctx context.Context, job *Job[string]) error {
		switch job.Payload {
		case "ok":
			return job.Update(ctx, "ok, updated")
		case "fail":
			return errors.New("failed on purpose")
		case "snooze":
			return Snooze(time.Hour)
		case "complete in tx":
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(ctx) }()
			if err := job.CompleteTx(ctx, tx); err != nil {
				return err
			}
			return tx.Commit(ctx)
		case "run until cancelled":
			select {
			case started <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return context.Cause(ctx)
		}
		return nil
	}, &WorkerOptions{Concurrency: 1, LockDuration: 1500 * time.Millisecond, PollInterval: 100 * time.Millisecond, OnEvent: evs.on}))
	startWorker(t, w)
	outcomes := map[string]EventKind{}
	for len(outcomes) < 6 {
		select {
		case ev := <-evs.ch:
			switch ev.Kind {
			case EventError:
				t.Fatalf("worker error as the restricted role: %v", ev.Err)
			case EventCompleted, EventFailed, EventSnoozed:
				outcomes[ev.JobID.String()] = ev.Kind
			}
		case <-started:
			time.Sleep(2 * time.Second) // heartbeats keep the lease of 1.5 s
			check("Cancel running", q.Cancel(ctx, running.ID))
			outcomes[running.ID.String()] = EventCancelled
		case <-time.After(30 * time.Second):
			t.Fatalf("outcomes so far: %v", outcomes)
		}
	}
	for id, want := range map[string]EventKind{ok.ID.String(): EventCompleted, unique.ID.String(): EventCompleted,
		failing.ID.String(): EventFailed, snoozing.ID.String(): EventSnoozed, intx.ID.String(): EventCompleted} {
		if outcomes[id] != want {
			t.Errorf("job %s: %s, want %s", id, outcomes[id], want)
		}
	}

	page, err := q.Jobs(ctx, &ListOptions{Statuses: listSections})
	check("Jobs", err)
	if len(page.Jobs) != 10 {
		t.Fatalf("listed %d jobs, want 10", len(page.Jobs))
	}
	_, err = q.Job(ctx, ok.ID)
	check("Job", err)
	st, err := q.Stats(ctx)
	check("Stats", err)
	if st.Completed != 3 || st.Failed != 1 || st.Cancelled != 1 || st.Scheduled != 5 || st.Available != 0 {
		t.Fatalf("stats %+v", st)
	}
	_, err = client.Stats(ctx)
	check("Client.Stats", err)
	check("Retry", q.Retry(ctx, failing.ID))
	check("Cancel", q.Cancel(ctx, snoozing.ID))
	check("Delete", q.Delete(ctx, snoozing.ID, nil))
	n, err := q.DeleteWaiting(ctx)
	check("DeleteWaiting", err)
	if n == 0 {
		t.Fatal("DeleteWaiting deleted nothing")
	}

	// Periodic jobs: record, enqueue, list, delete.
	pq := newQueue[string](t, client, "restricted-periodic")
	pevs := newEvents()
	pw := must(pq.NewWorker(func(context.Context, *Job[string]) error { return nil }, &WorkerOptions{OnEvent: pevs.on}))
	check("AddPeriodic", pw.AddPeriodic(Periodic[string]{Name: "tick", Every: time.Second, Payload: "tick"}))
	stop := startWorker(t, pw)
	if ev := pevs.next(t, EventCompleted); ev.Err != nil {
		t.Fatal(ev.Err)
	}
	stop()
	for len(pevs.ch) > 0 {
		if ev := <-pevs.ch; ev.Kind == EventError {
			t.Fatalf("periodic jobs as the restricted role: %v", ev.Err)
		}
	}
	schedules, err := client.Schedules(ctx)
	check("Schedules", err)
	if len(schedules) != 1 || schedules[0].Last.IsZero() {
		t.Fatalf("schedules %+v", schedules)
	}
	check("DeleteSchedule", client.DeleteSchedule(ctx, pq.Name(), "tick"))

	// Flow control: limits set, read, applied by claims that log starts and walk keys.
	lq := newQueue[int](t, client, "restricted-limited")
	check("SetLimits", lq.SetLimits(ctx, Limits{MaxRunning: 2, KeyMaxRunning: 1, Rate: Rate{Starts: 100, Per: time.Second},
		KeyRate: Rate{Starts: 100, Per: time.Second}}))
	_, err = lq.Limits(ctx)
	check("Limits", err)
	_, err = lq.EnqueueMany(ctx, []int{1, 2, 3}, &EnqueueOptions{Key: "tenant"})
	check("EnqueueMany with a key", err)
	workThree := func(q *Queue[int], opts WorkerOptions, what string) {
		t.Helper()
		evs := newEvents()
		opts.OnEvent = evs.on
		stop := startWorker(t, must(q.NewWorker(func(context.Context, *Job[int]) error { return nil }, &opts)))
		for range 3 {
			evs.next(t, EventCompleted)
		}
		stop()
		for len(evs.ch) > 0 {
			if ev := <-evs.ch; ev.Kind == EventError {
				t.Fatalf("%s as the restricted role: %v", what, ev.Err)
			}
		}
	}
	workThree(lq, WorkerOptions{}, "limited claims")
	_, err = lq.Stats(ctx)
	check("Stats of a limited queue", err)

	// A queue with only a MaxRunning, below the worker's Concurrency: its claims are held back by
	// the limit (pgqueue_capped_take) and its settles wake them (pgqueue_wake_held).
	cq := newQueue[int](t, client, "restricted-capped")
	check("SetLimits", cq.SetLimits(ctx, Limits{MaxRunning: 1}))
	_, err = cq.EnqueueMany(ctx, []int{1, 2, 3}, nil)
	check("EnqueueMany", err)
	workThree(cq, WorkerOptions{Concurrency: 2}, "capped claims")

	leastPrivilegeWorkflows(t, client, pool, ok.ID)
}

// leastPrivilegeWorkflows walks the calls of workflows as TestLeastPrivilege's restricted role:
// enqueue (with a job from outside, kept completed), results, a callback, a dependency from SQL,
// the resolver, the views, retry, cancel and the pruning of finished workflows.
func leastPrivilegeWorkflows(t *testing.T, client *Client, pool *pgxpool.Pool, outside ulid.ULID) {
	ctx := t.Context()
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s as the restricted role: %v", what, err)
		}
	}
	q := newQueue[string](t, client, "restricted-flow")
	wf := client.NewWorkflow("restricted")
	a := q.AddStep(wf, "a", &StepOptions{After: []Dependency{{Job: outside}}})
	q.AddStep(wf, "b", &StepOptions{After: After(a), Callback: CallbackAlways})
	check("Workflow.Enqueue", wf.Enqueue(ctx))
	var fromSQL ulid.ULID
	check("pgqueue_add_job after", pool.QueryRow(ctx, `SELECT pgqueue_add_job('restricted-flow', '"sql"', after => ARRAY[$1::uuid])`,
		FormatUUID(a.ID)).Scan((*uuidText)(&fromSQL)))
	evs := newEvents()
	stop := startWorker(t, must(q.NewWorker(func(ctx context.Context, j *Job[string]) error {
		if j.Payload == "b" {
			if _, err := j.Parents(ctx); err != nil {
				return err
			}
		}
		return j.SetResult(j.Payload)
	}, &WorkerOptions{OnEvent: evs.on})))
	info, err := client.AwaitWorkflow(ctx, wf.ID)
	check("AwaitWorkflow", err)
	if info.Status != WorkflowCompleted {
		t.Fatalf("the restricted role's workflow ended %s", info.Status)
	}
	r, err := client.AwaitJob(ctx, fromSQL)
	check("AwaitJob", err)
	if r.Status != StatusCompleted {
		t.Fatalf("the job added from SQL after a step ended %s", r.Status)
	}
	stop()
	for len(evs.ch) > 0 {
		if ev := <-evs.ch; ev.Kind == EventError || ev.Kind == EventFailed {
			t.Fatalf("workflows as the restricted role: %v", ev.Err)
		}
	}
	_, err = client.Workflows(ctx, nil)
	check("Workflows", err)
	_, err = client.RetryWorkflow(ctx, wf.ID)
	check("RetryWorkflow", err)
	_, err = client.CancelWorkflow(ctx, wf.ID)
	check("CancelWorkflow", err)
	var workflows, edges int
	check("prune_workflows", pool.QueryRow(ctx, pruneWorkflowsSQL, 10).Scan(&workflows, &edges))
}

// syncBuffer is a bytes.Buffer that concurrent writers and the test may share.
type syncBuffer = testenv.SyncBuffer

// TestPasswordNeverShown checks that the password of a connection string never appears in an
// error or a log line: connection strings that do not parse, a server that refuses connections,
// a host that does not resolve, and the real server (whose trust authentication ignores the
// password), through NewClient, Migrate, enqueue, a worker's logged errors, and the listener's
// reconnect logs (Config.ListenConnString). It stays one function: one list of paths, each
// checked against the same captured logs.
func TestPasswordNeverShown(t *testing.T) {
	t.Parallel()
	const canary = "s3cr3t-canary"
	ctx := t.Context()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var errs []error
	collect := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	real, err := pgx.ParseConfig(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	dsn := func(host string, port int) string {
		return fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable&connect_timeout=5",
			real.User, canary, host, port, real.Database)
	}
	refused := dsn("127.0.0.1", 1)
	unknown := dsn("pgqueue-no-such-host.invalid", 5432)
	working := dsn(real.Host, int(real.Port))

	// Connection strings that do not parse.
	for _, s := range []string{
		"postgres://u:" + canary + "@127.0.0.1:notaport/db",
		"postgres://u:" + canary + "@[::1/db",
		"host=127.0.0.1 password=" + canary + " port='",
		"host=127.0.0.1 password=" + canary + " sslmode=bogus",
	} {
		_, err := NewClient(newPool(t, "public", 1), &Config{ListenConnString: s, Logger: logger})
		if err == nil {
			t.Fatalf("NewClient accepted ListenConnString %q", s)
		}
		collect(err)
	}

	// A server that refuses, and a host that does not resolve: every call fails.
	for _, s := range []string{refused, unknown} {
		pool, err := pgxpool.New(ctx, s)
		if err != nil {
			collect(err)
			continue
		}
		client, err := NewClient(pool, &Config{Logger: logger, ListenConnString: s})
		if err != nil {
			t.Fatal(err)
		}
		q := newQueue[int](t, client, "secret")
		_, err = q.Enqueue(ctx, 1, nil)
		collect(err)
		_, err = q.EnqueueMany(ctx, []int{1}, nil)
		collect(err)
		_, err = q.Stats(ctx)
		collect(err)
		db := stdlib.OpenDBFromPool(pool)
		collect(Migrate(ctx, db))
		_ = db.Close()
		db = stdlib.OpenDB(*mustParse(t, s))
		collect(Migrate(ctx, db))
		_ = db.Close()

		// The worker reports the failures of its fetches (logged, and as events).
		evs := newEvents()
		w := must(q.NewWorker(func(context.Context, *Job[int]) error { return nil },
			&WorkerOptions{OnEvent: evs.on, ShutdownTimeout: time.Second}))
		stop := startWorker(t, w)
		for range 2 {
			collect(evs.next(t, EventError).Err)
		}
		stop()
		_ = client.Close()
		pool.Close()
	}

	// The real server, with the password (ignored by trust authentication), and a listener whose
	// own connection string is refused: the worker works by polling while the listener retries,
	// logging each failure.
	b := setup(t)
	pool, err := pgxpool.New(ctx, working+"&options=-csearch_path%3D"+b.schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	client, err := NewClient(pool, &Config{Logger: logger, ListenConnString: refused})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	q := newQueue[int](t, client, "secret")
	ran := make(chan int, 1)
	w := must(q.NewWorker(func(_ context.Context, j *Job[int]) error { ran <- j.Payload; return nil },
		&WorkerOptions{PollInterval: 50 * time.Millisecond}))
	stop := startWorker(t, w)
	if _, err := q.Enqueue(ctx, 7, nil); err != nil {
		t.Fatal(err)
	}
	receive(t, ran, 10*time.Second, "the job, by polling")
	waitFor(t, 10*time.Second, "the listener's reconnect warnings", func() bool {
		return strings.Count(logs.String(), "listener disconnected") >= 4
	})
	stop()
	// Errors of the real server (a schema without the tables) name no password either.
	bare, err := pgxpool.New(ctx, working+"&options=-csearch_path%3Dpgqueue_no_such_schema")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bare.Close)
	bareClient, err := NewClient(bare, &Config{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bareClient.Close() })
	_, err = newQueue[int](t, bareClient, "secret").Enqueue(ctx, 1, nil)
	collect(err)

	if len(errs) < 19 {
		t.Fatalf("only %d errors collected", len(errs))
	}
	for _, err := range errs {
		if strings.Contains(err.Error(), canary) || strings.Contains(fmt.Sprintf("%+v", err), canary) {
			t.Errorf("an error shows the password: %v", err)
		}
	}
	out := logs.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "listener disconnected") {
		t.Fatalf("the logs hold no errors or reconnects to check:\n%s", out)
	}
	if strings.Contains(out, canary) {
		t.Errorf("the logs show the password:\n%s", out)
	}
	t.Logf("%d errors and %d log lines checked", len(errs), strings.Count(out, "\n"))
}

func mustParse(t *testing.T, dsn string) *pgx.ConnConfig {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
