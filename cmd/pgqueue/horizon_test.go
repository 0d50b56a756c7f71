package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/internal/testenv"
)

// The warning line of each kind of holder says what it is, for how long, its session and how
// to end it, on one line whatever the statement's line breaks.
func TestHorizonWarning(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 3, 10, 12, 0, time.UTC)
	for _, c := range []struct {
		h    *pgqueue.HorizonHolder
		want string
	}{
		{nil, ""},
		{&pgqueue.HorizonHolder{Kind: pgqueue.HorizonTransaction, Age: 12 * time.Minute, Xacts: 48210, PID: 4242,
			ApplicationName: "report", User: "alice", ClientAddr: "10.0.0.5", State: "idle in transaction",
			QueryStart: at, Query: "SELECT *\n  FROM big_report"},
			"WARNING: vacuum held back for 12m00s by pid 4242 (app report, user alice, from 10.0.0.5, idle in transaction, " +
				"last statement at 03:10:12 UTC), 48,210 transactions behind: SELECT * FROM big_report; " +
				"end it with SELECT pg_terminate_backend(4242)"},
		{&pgqueue.HorizonHolder{Kind: pgqueue.HorizonTransaction, Xacts: 120000, PID: 77, ApplicationName: "psql",
			User: "bob", Hidden: true},
			"WARNING: vacuum held back by pid 77 (app psql, user bob, details hidden from this role: grant it pg_read_all_stats), " +
				"120,000 transactions behind; end it with SELECT pg_terminate_backend(77)"},
		{&pgqueue.HorizonHolder{Kind: pgqueue.HorizonPrepared, Age: 2 * time.Hour, Xacts: 20000, Name: "tx1", User: "alice", Database: "app"},
			"WARNING: vacuum held back for 2h00m by prepared transaction 'tx1' (user alice, database app), 20,000 transactions " +
				"behind; end it with COMMIT PREPARED or ROLLBACK PREPARED 'tx1'"},
		{&pgqueue.HorizonHolder{Kind: pgqueue.HorizonSlot, Xacts: 150000, Name: "standby1", State: "inactive"},
			"WARNING: vacuum held back by replication slot standby1 (inactive), 150,000 transactions behind; " +
				"bring its standby back, or drop it: SELECT pg_drop_replication_slot('standby1')"},
		{&pgqueue.HorizonHolder{Kind: pgqueue.HorizonStandby, Xacts: 200000, PID: 88, ApplicationName: "standby1",
			User: "replicator", ClientAddr: "10.0.0.9", State: "active"},
			"WARNING: vacuum held back by standby feedback of pid 88 (app standby1, user replicator, from 10.0.0.9, active), " +
				"200,000 transactions behind; end the standby's long queries, or turn hot_standby_feedback off there"},
	} {
		if got := horizonWarning(c.h); got != c.want {
			t.Errorf("warning of %+v:\n got %q\nwant %q", c.h, got, c.want)
		}
	}
}

// A transaction open for less than pgqueue.HorizonMinAge draws no warning; with
// PGQUEUE_CLI_HORIZON=1 the test then waits out that minute and checks that queues, top and
// their JSON name it, and that they no longer do once it has committed. (Other sessions of the
// server may hold the horizon too: the test looks for its own transaction.)
func TestQueuesHorizonWarning(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	cfg, err := pgx.ParseConfig(testDSN)
	if err != nil {
		t.Fatal(err)
	}
	app := testenv.RandomName("report_")
	cfg.RuntimeParams["application_name"] = app
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var pid int
	var xid int64
	if err := conn.QueryRow(t.Context(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(t.Context(), "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(t.Context(), "SELECT txid_current()").Scan(&xid); err != nil {
		t.Fatal(err)
	}
	remedy := "end it with SELECT pg_terminate_backend(" + strconv.Itoa(pid) + ")"
	if out := e.ok("", "queues"); strings.Contains(out, remedy) {
		t.Errorf("queues warns of a transaction younger than a minute:\n%s", out)
	}
	if os.Getenv("PGQUEUE_CLI_HORIZON") == "" {
		t.Log("PGQUEUE_CLI_HORIZON=1 waits out the minute and checks the warning")
		return
	}
	deadline := time.Now().Add(pgqueue.HorizonMinAge + 30*time.Second)
	for {
		st, err := e.client.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if st.Horizon != nil && st.Horizon.PID == pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stats does not name the open transaction; its Horizon is %+v", st.Horizon)
		}
		time.Sleep(time.Second)
	}
	want := "by pid " + strconv.Itoa(pid) + " (app " + app + ", user postgres, database " + cfg.Database +
		", from 127.0.0.1, idle in transaction, last statement at "
	for _, args := range [][]string{{"queues"}, {"top", "--frames", "1"}} {
		if out := e.ok("", args...); !strings.Contains(out, "\nWARNING: vacuum held back for 1m") || !strings.Contains(out, want) ||
			!strings.Contains(out, "SELECT txid_current(); "+remedy) {
			t.Errorf("%s does not warn of the open transaction:\n%s", strings.Join(args, " "), out)
		}
	}
	var stats pgqueue.Stats
	e.okJSON(&stats, "queues")
	if h := stats.Horizon; h == nil || h.PID != pid || h.Kind != pgqueue.HorizonTransaction || h.ApplicationName != app || h.Age < pgqueue.HorizonMinAge {
		t.Errorf("queues --json: horizon %+v", h)
	}
	var frame map[string]json.RawMessage
	if err := json.Unmarshal([]byte(e.ok("", "top", "--frames", "1", "--json")), &frame); err != nil || frame["horizon"] == nil {
		t.Errorf("top --json has no horizon: %v, %v", frame, err)
	}

	if _, err := conn.Exec(t.Context(), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	if out := e.ok("", "queues"); strings.Contains(out, remedy) {
		t.Errorf("queues still warns of the committed transaction:\n%s", out)
	}
}
