package pgqueue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The server is shared with other tests, which hold transactions of their own: a test waits for
// Stats to name its holder (the oldest, once the others' have ended), and then for Stats to name
// something else, or nothing, once it has ended.

// holder is a connection of its own, as application app, on which a test holds the horizon.
type holder struct {
	t    *testing.T
	conn *pgx.Conn
	pid  int
	app  string
}

// newHolder connects as application app (made unique), closed when the test ends.
func newHolder(t *testing.T, app string) *holder {
	t.Helper()
	cfg := mustParse(t, testDSN)
	app = randomName(app + "_")
	cfg.RuntimeParams["application_name"] = app
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	h := &holder{t: t, conn: conn, app: app}
	h.exec("SELECT pg_backend_pid()", &h.pid)
	return h
}

// exec runs sql on the holder's connection, scanning its row into dest if given.
func (h *holder) exec(sql string, dest ...any) {
	h.t.Helper()
	if len(dest) == 0 {
		if _, err := h.conn.Exec(h.t.Context(), sql); err != nil {
			h.t.Fatalf("%s: %v", sql, err)
		}
		return
	}
	if err := h.conn.QueryRow(h.t.Context(), sql).Scan(dest...); err != nil {
		h.t.Fatalf("%s: %v", sql, err)
	}
}

// horizonOf polls c.Stats until ok holds of its Horizon, failing the test after 30 s with the
// last holder seen.
func horizonOf(t *testing.T, c *Client, what string, ok func(*HorizonHolder) bool) *HorizonHolder {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if ok(st.Horizon) {
			return st.Horizon
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; Stats.Horizon is %+v", what, st.Horizon)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pidIs says whether h is the holder of pid, of kind.
func pidIs(pid int, kind HorizonKind) func(*HorizonHolder) bool {
	return func(h *HorizonHolder) bool { return h != nil && h.PID == pid && h.Kind == kind }
}

// pidIsNot says whether h is nil or not the holder of pid.
func pidIsNot(pid int) func(*HorizonHolder) bool {
	return func(h *HorizonHolder) bool { return h == nil || h.PID != pid }
}

// A REPEATABLE READ transaction that took a transaction id, left idle, is reported once it is
// older than the threshold, with its session's details and its last statement cut to 200
// characters; once it commits it is not.
func TestStatsHorizonTransaction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.client.horizonMinAge = 2 * time.Second
	h := newHolder(t, "report")
	opened := time.Now()
	h.exec("BEGIN ISOLATION LEVEL REPEATABLE READ")
	long := "SELECT txid_current() /* " + strings.Repeat("x", 300) + " */"
	var xid int64
	h.exec(long, &xid)

	if st := must(b.client.Stats(t.Context())); st.Horizon != nil && st.Horizon.PID == h.pid && time.Since(opened) < 2*time.Second {
		t.Fatalf("Stats reports a transaction younger than the threshold: %+v", st.Horizon)
	}
	got := horizonOf(t, b.client, "the open transaction", pidIs(h.pid, HorizonTransaction))
	var database string
	if err := b.pool.QueryRow(t.Context(), "SELECT current_database()").Scan(&database); err != nil {
		t.Fatal(err)
	}
	if got.ApplicationName != h.app || got.User != "postgres" || got.Database != database ||
		got.State != "idle in transaction" || got.ClientAddr == "" || got.Hidden || got.Name != "" {
		t.Errorf("the session's details: %+v", got)
	}
	if got.Age < 2*time.Second || got.Age > time.Since(opened)+time.Second || got.Xacts < 1 || got.QueryStart.IsZero() {
		t.Errorf("age %s, %d transactions, query start %s (opened %s ago)", got.Age, got.Xacts, got.QueryStart, time.Since(opened))
	}
	if n := utf8.RuneCountInString(got.Query); n != 200 || !strings.HasPrefix(got.Query, "SELECT txid_current() /* xxx") ||
		!strings.HasSuffix(got.Query, "x…") {
		t.Errorf("query of %d characters: %q", n, got.Query)
	}

	h.exec("COMMIT")
	horizonOf(t, b.client, "the committed transaction to be gone", pidIsNot(h.pid))
}

// A session of another role is found by a role without pg_read_all_stats, by its xmin: Hidden,
// without its state, times or query, and reported past the transactions threshold.
func TestStatsHorizonHidden(t *testing.T) {
	t.Parallel()
	b := setup(t)
	role := newRole(t, b)
	b.exec(fmt.Sprintf(leastPrivilegeGrants, pgx.Identifier{b.schema}.Sanitize(), pgx.Identifier{role}.Sanitize()))
	cfg, err := pgxpool.ParseConfig(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User, cfg.ConnConfig.Password = role, ""
	cfg.ConnConfig.RuntimeParams["search_path"] = b.schema
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	client, err := NewClient(pool, &Config{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	client.horizonMinXacts = 1

	h := newHolder(t, "hidden")
	h.exec("BEGIN ISOLATION LEVEL REPEATABLE READ")
	var xid int64
	h.exec("SELECT txid_current()", &xid)
	got := horizonOf(t, client, "the other role's transaction", pidIs(h.pid, HorizonTransaction))
	if !got.Hidden || got.Query != "" || got.State != "" || got.Age != 0 || !got.QueryStart.IsZero() || got.ClientAddr != "" {
		t.Errorf("a session of another role shows %+v, want it hidden", got)
	}
	if got.ApplicationName != h.app || got.User != "postgres" || got.Xacts < 1 {
		t.Errorf("what Postgres shows every role: %+v", got)
	}
	h.exec("COMMIT")
	horizonOf(t, client, "the committed transaction to be gone", pidIsNot(h.pid))
}

// A prepared transaction is reported with its gid and owner, and no pid, until it is rolled
// back. The server must allow prepared transactions (max_prepared_transactions > 0).
func TestStatsHorizonPrepared(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var allowed int
	if err := b.pool.QueryRow(t.Context(), "SELECT current_setting('max_prepared_transactions')::int").Scan(&allowed); err != nil {
		t.Fatal(err)
	}
	if allowed == 0 {
		t.Skip("the server has max_prepared_transactions = 0: it cannot prepare a transaction " +
			"(the prepared-transaction branch of horizon.sql is covered by TestHorizonStandIns)")
	}
	b.client.horizonMinAge = time.Second
	gid := randomName("pgqueue_horizon_")
	h := newHolder(t, "prepare")
	h.exec("BEGIN")
	var xid int64
	h.exec("SELECT txid_current()", &xid)
	h.exec("PREPARE TRANSACTION '" + gid + "'")
	prepared := true
	t.Cleanup(func() {
		if prepared {
			_, _ = b.pool.Exec(context.Background(), "ROLLBACK PREPARED '"+gid+"'")
		}
	})
	isOurs := func(h *HorizonHolder) bool { return h != nil && h.Kind == HorizonPrepared && h.Name == gid }
	got := horizonOf(t, b.client, "the prepared transaction", isOurs)
	if got.PID != 0 || got.User != "postgres" || got.Age < time.Second || got.Xacts < 1 {
		t.Errorf("the prepared transaction: %+v", got)
	}
	b.exec("ROLLBACK PREPARED '" + gid + "'")
	prepared = false
	horizonOf(t, b.client, "the rolled-back transaction to be gone", func(h *HorizonHolder) bool { return !isOurs(h) })
}

// A physical slot that reserves WAL but has had no standby has no xmin, and a logical slot's
// catalog_xmin holds back the catalogs only: neither is reported, whatever the thresholds. (A
// slot with an xmin needs a standby: TestHorizonStandIns covers it.)
func TestStatsHorizonSlots(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.client.horizonMinXacts = 1
	b.client.horizonMinAge = time.Nanosecond
	var slots int
	var walLevel string
	if err := b.pool.QueryRow(t.Context(), "SELECT current_setting('max_replication_slots')::int, current_setting('wal_level')").
		Scan(&slots, &walLevel); err != nil {
		t.Fatal(err)
	}
	if slots == 0 {
		t.Skip("the server has max_replication_slots = 0: it cannot make a slot")
	}
	h := newHolder(t, "slots")
	physical := randomName("pgqueue_physical_")
	h.exec("SELECT pg_create_physical_replication_slot('" + physical + "', true, true)") // temporary: gone with the session
	names := []string{physical}
	if walLevel == "logical" {
		logical := randomName("pgqueue_logical_")
		h.exec("SELECT pg_create_logical_replication_slot('" + logical + "', 'pgoutput', true)")
		names = append(names, logical)
	} else {
		t.Logf("wal_level is %s, not logical: no logical slot to check", walLevel)
	}
	var withCatalogXmin int
	h.exec("SELECT count(*) FROM pg_replication_slots WHERE slot_name = ANY('{"+strings.Join(names, ",")+"}') AND catalog_xmin IS NOT NULL", &withCatalogXmin)
	if withCatalogXmin != len(names)-1 {
		t.Fatalf("%d of the slots have a catalog_xmin, want the logical one", withCatalogXmin)
	}
	for range 3 {
		if st := must(b.client.Stats(t.Context())); st.Horizon != nil && st.Horizon.Kind == HorizonSlot && slices.Contains(names, st.Horizon.Name) {
			t.Fatalf("Stats reports a slot without an xmin: %+v", st.Horizon)
		}
	}
}

// standIns are temporary tables of the columns horizon.sql reads of each catalog view, which a
// test fills with the holders no test server has (standbys, slots with an xmin, prepared
// transactions, other roles' and databases' sessions), and the functions that make their values.
const standIns = `
CREATE TEMPORARY TABLE activity (pid int, datid oid, datname name, usesysid oid, usename name,
    application_name text, client_addr inet, state text, xact_start timestamptz, query_start timestamptz,
    query text, backend_xid xid, backend_xmin xid, backend_type text);
CREATE TEMPORARY TABLE replication (pid int);
CREATE TEMPORARY TABLE prepared (transaction xid, gid text, prepared timestamptz, owner name, database name);
CREATE TEMPORARY TABLE slot_rows (slot_name name, database name, active bool, active_pid int, slot_xmin xid,
    catalog_xmin xid, inactive_since timestamptz);
-- A table may not have a column called xmin: a view of one may.
CREATE TEMPORARY VIEW slots AS
    SELECT slot_name, database, active, active_pid, slot_xmin AS xmin, catalog_xmin, inactive_since FROM slot_rows;
-- xid_ago(n) is the transaction id n transactions before the next: age() says n.
CREATE FUNCTION pg_temp.xid_ago(n bigint) RETURNS xid LANGUAGE sql AS
    $$ SELECT (((pg_snapshot_xmax(pg_current_snapshot())::text::bigint - n) % 4294967296 + 4294967296) % 4294967296)::text::xid $$;
-- ago(s) is s seconds before now().
CREATE FUNCTION pg_temp.ago(s int) RETURNS timestamptz LANGUAGE sql AS $$ SELECT now() - s * interval '1 second' $$;
-- here is the oid of this database.
CREATE FUNCTION pg_temp.here() RETURNS oid LANGUAGE sql AS $$ SELECT oid FROM pg_database WHERE datname = current_database() $$`

// standInSQL is horizon.sql reading the stand-ins in place of the catalog views.
func standInSQL(t *testing.T) string {
	t.Helper()
	q := horizonSQL
	for view, table := range map[string]string{"pg_catalog.pg_stat_activity": "pg_temp.activity",
		"pg_catalog.pg_stat_replication": "pg_temp.replication", "pg_catalog.pg_prepared_xacts": "pg_temp.prepared",
		"pg_catalog.pg_replication_slots": "pg_temp.slots"} {
		if n := strings.Count(q, view); n != 1 {
			t.Fatalf("horizon.sql names %s %d times, want once", view, n)
		}
		q = strings.Replace(q, view, table, 1)
	}
	return q
}

// A session row of the stand-in activity: the columns after pid, datid and datname.
const (
	// visible is a session of role postgres (10) whose details the caller sees, of application
	// "app", idle in transaction.
	visible = `10, 'postgres', 'app', '10.0.0.5', 'idle in transaction'`
	// hidden is what Postgres shows a role without pg_read_all_stats of another role's session.
	hidden = `10, 'postgres', 'app', NULL, NULL, NULL, NULL, '<insufficient privilege>'`
)

// Each kind of holder, the thresholds, the ranking and what is not a holder, over stand-ins of
// the catalog views with the default thresholds (1 minute, 100,000 transactions).
func TestHorizonStandIns(t *testing.T) {
	t.Parallel()
	conn := newHolder(t, "standins").conn // its temporary objects go with it
	if _, err := conn.Exec(t.Context(), standIns); err != nil {
		t.Fatal(err)
	}
	query := standInSQL(t)
	type want struct {
		kind        HorizonKind
		pid         int
		name, state string
		xacts       int64
		age         time.Duration // within 5 s of it; 0: exactly zero
		hidden      bool
		query       string
	}
	for _, c := range []struct {
		name string
		rows string // INSERTs into the stand-ins
		want *want
	}{
		{"nothing", ``, nil},
		{"a transaction past a minute", `INSERT INTO activity VALUES
			(11, pg_temp.here(), current_database(), ` + visible + `, pg_temp.ago(300), pg_temp.ago(290), 'SELECT 1', pg_temp.xid_ago(1000), pg_temp.xid_ago(1000), 'client backend')`,
			&want{kind: HorizonTransaction, pid: 11, state: "idle in transaction", xacts: 1000, age: 300 * time.Second, query: "SELECT 1"}},
		{"younger than a minute, however much it holds back", `INSERT INTO activity VALUES
			(11, pg_temp.here(), current_database(), ` + visible + `, pg_temp.ago(30), pg_temp.ago(30), 'SELECT 1', NULL, pg_temp.xid_ago(900000), 'client backend')`, nil},
		{"the oldest xmin of those past the threshold", `INSERT INTO activity VALUES
			(11, pg_temp.here(), current_database(), ` + visible + `, pg_temp.ago(3600), pg_temp.ago(3600), 'SELECT 1', NULL, pg_temp.xid_ago(1000), 'client backend'),
			(12, pg_temp.here(), current_database(), ` + visible + `, pg_temp.ago(120), pg_temp.ago(120), 'SELECT 2', NULL, pg_temp.xid_ago(5000), 'client backend'),
			(13, pg_temp.here(), current_database(), ` + visible + `, pg_temp.ago(10), pg_temp.ago(10), 'SELECT 3', NULL, pg_temp.xid_ago(9000), 'client backend')`,
			&want{kind: HorizonTransaction, pid: 12, state: "idle in transaction", xacts: 5000, age: 120 * time.Second, query: "SELECT 2"}},
		{"a tie goes to the transaction whose own id is the xmin", `INSERT INTO activity VALUES
			(11, pg_temp.here(), current_database(), ` + visible + `, pg_temp.ago(600), pg_temp.ago(600), 'SELECT 1', NULL, pg_temp.xid_ago(7000), 'client backend'),
			(12, pg_temp.here(), current_database(), ` + visible + `, pg_temp.ago(300), pg_temp.ago(300), 'UPDATE t', pg_temp.xid_ago(7000), pg_temp.xid_ago(7000), 'client backend')`,
			&want{kind: HorizonTransaction, pid: 12, state: "idle in transaction", xacts: 7000, age: 300 * time.Second, query: "UPDATE t"}},
		{"another database's snapshot does not hold this one; its transaction id does", `INSERT INTO activity VALUES
			(11, 1, 'other', ` + visible + `, pg_temp.ago(3600), pg_temp.ago(3600), 'SELECT 1', NULL, pg_temp.xid_ago(800000), 'client backend'),
			(12, 1, 'other', ` + visible + `, pg_temp.ago(600), pg_temp.ago(600), 'UPDATE t', pg_temp.xid_ago(3000), pg_temp.xid_ago(600000), 'client backend'),
			(13, pg_temp.here(), current_database(), ` + visible + `, pg_temp.ago(120), pg_temp.ago(120), 'SELECT 3', NULL, pg_temp.xid_ago(2000), 'client backend')`,
			&want{kind: HorizonTransaction, pid: 12, state: "idle in transaction", xacts: 3000, age: 600 * time.Second, query: "UPDATE t"}},
		{"not autovacuum, the server's own processes or parallel workers", `INSERT INTO activity VALUES
			(11, pg_temp.here(), current_database(), NULL, NULL, '', NULL, 'active', pg_temp.ago(3600), pg_temp.ago(3600), 'autovacuum: VACUUM t', NULL, pg_temp.xid_ago(900000), 'autovacuum worker'),
			(12, pg_temp.here(), current_database(), ` + visible + `, pg_temp.ago(3600), pg_temp.ago(3600), 'SELECT 1', NULL, pg_temp.xid_ago(900000), 'parallel worker')`, nil},
		{"a hidden session, past the transactions threshold", `INSERT INTO activity VALUES
			(11, pg_temp.here(), current_database(), ` + hidden + `, NULL, pg_temp.xid_ago(120000), NULL),
			(12, pg_temp.here(), current_database(), ` + hidden + `, NULL, pg_temp.xid_ago(90000), NULL)`,
			&want{kind: HorizonTransaction, pid: 11, xacts: 120000, hidden: true}},
		{"a hidden session below it", `INSERT INTO activity VALUES
			(11, pg_temp.here(), current_database(), ` + hidden + `, NULL, pg_temp.xid_ago(90000), NULL)`, nil},
		{"a standby's feedback", `INSERT INTO activity VALUES
			(11, NULL, NULL, 10, 'replicator', 'standby1', '10.0.0.9', 'active', NULL, NULL, '', NULL, pg_temp.xid_ago(200000), 'walsender');
			INSERT INTO replication VALUES (11)`,
			&want{kind: HorizonStandby, pid: 11, state: "active", xacts: 200000}},
		{"a prepared transaction", `INSERT INTO prepared VALUES (pg_temp.xid_ago(20000), 'tx1', pg_temp.ago(7200), 'alice', current_database())`,
			&want{kind: HorizonPrepared, name: "tx1", xacts: 20000, age: 2 * time.Hour}},
		{"a slot's xmin; not a logical slot's catalog_xmin", `INSERT INTO slot_rows VALUES
			('standby1', NULL, false, NULL, pg_temp.xid_ago(150000), NULL, NULL),
			('cdc', current_database(), true, 21, NULL, pg_temp.xid_ago(900000), NULL)`,
			&want{kind: HorizonSlot, name: "standby1", state: "inactive", xacts: 150000}},
		{"a slot inactive past a minute (PostgreSQL 17)", `INSERT INTO slot_rows VALUES
			('standby1', NULL, false, NULL, pg_temp.xid_ago(5000), NULL, pg_temp.ago(7200))`,
			&want{kind: HorizonSlot, name: "standby1", state: "inactive", xacts: 5000, age: 2 * time.Hour}},
		{"an active slot below the transactions threshold", `INSERT INTO slot_rows VALUES
			('standby1', NULL, true, 21, pg_temp.xid_ago(5000), NULL, NULL)`, nil},
	} {
		if _, err := conn.Exec(t.Context(), "TRUNCATE activity, replication, prepared, slot_rows; "+c.rows); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := readHorizon(t.Context(), conn, query, HorizonMinAge, HorizonMinXacts)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.want == nil || got == nil {
			if c.want != nil || got != nil {
				t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
			}
			continue
		}
		w := c.want
		// Other sessions take transaction ids meanwhile: age() grows a little.
		if got.Kind != w.kind || got.PID != w.pid || got.Name != w.name || got.State != w.state || got.Hidden != w.hidden ||
			got.Query != w.query || got.Xacts < w.xacts || got.Xacts > w.xacts+50000 ||
			(w.age == 0) != (got.Age == 0) || got.Age < w.age || got.Age > w.age+5*time.Second {
			t.Errorf("%s: got %+v, want %+v", c.name, got, w)
		}
	}
}
