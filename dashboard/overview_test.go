package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

func TestOverview(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	emails, reports := queue(t, b.client, "emails"), queue(t, b.client, "reports")
	for range 3 {
		enqueue(t, emails, `{"to":"ada@example.com"}`, nil)
	}
	enqueue(t, reports, `{}`, &pgqueue.EnqueueOptions{Delay: 3600e9})
	if err := reports.Pause(t.Context()); err != nil {
		t.Fatal(err)
	}
	w, err := reports.NewWorker(func(context.Context, *pgqueue.Job[json.RawMessage]) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddPeriodic(pgqueue.Periodic[json.RawMessage]{Name: "nightly", Cron: "0 3 * * *", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	status, body := b.get(t, "/")
	if status != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", status, body)
	}
	if got := count(body, "queue-row"); got != 2 {
		t.Errorf("queue rows: %d, want 2", got)
	}
	if got := cellOf(t, body, "emails", "count-available"); got != "3" {
		t.Errorf("emails available: %q, want 3", got)
	}
	if got := cellOf(t, body, "reports", "count-scheduled"); got != "1" {
		t.Errorf("reports scheduled: %q, want 1", got)
	}
	if !strings.Contains(body, `data-testid="queue-paused"`) {
		t.Error("the paused queue has no paused badge")
	}
	if !strings.Contains(body, `data-testid="schedule-row" data-queue="reports" data-name="nightly"`) ||
		!strings.Contains(body, `<code>0 3 * * *</code>`) || strings.Count(body, `data-testid="schedule-next"><time`) != 1 {
		t.Error("the overview does not list the schedule with its next run")
	}
	for _, id := range []string{"chart-available", "chart-wait", "chart-throughput", "table-live-rows", "live-status", "live-region"} {
		if count(body, id) == 0 {
			t.Errorf("no %s on the overview", id)
		}
	}
	// The fragment is the live region alone.
	status, frag := b.get(t, "/?fragment=1")
	if status != http.StatusOK || strings.Contains(frag, "<html") || count(frag, "queue-row") != 2 {
		t.Errorf("fragment: %d, %d queue rows, full page %v", status, count(frag, "queue-row"), strings.Contains(frag, "<html"))
	}
}

// A holder of the horizon shows as a banner atop the overview's live region, with its session,
// its statement (escaped) and how to end it, for each kind.
func TestOverviewHorizonBanner(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	render := func(path string, h *pgqueue.HorizonHolder) string {
		rec := httptest.NewRecorder()
		b.h.renderOverview(rec, httptest.NewRequest(http.MethodGet, path, nil), &pgqueue.Stats{Queues: []pgqueue.QueueStats{}, Horizon: h}, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	if body := render("/", nil); count(body, "horizon-warning") != 0 {
		t.Error("a banner without a holder")
	}
	tx := &pgqueue.HorizonHolder{Kind: pgqueue.HorizonTransaction, Age: 12 * time.Minute, Xacts: 48210, PID: 4242,
		ApplicationName: "report", User: "alice", ClientAddr: "10.0.0.5", State: "idle in transaction",
		QueryStart: time.Now().Add(-11 * time.Minute), Query: "SELECT '<script>' FROM big_report"}
	for _, path := range []string{"/", "/?fragment=1"} {
		body := render(path, tx)
		for _, want := range []string{`data-testid="horizon-warning" data-kind="transaction"`, "Vacuum held back for 12m00s",
			`<span data-testid="horizon-pid">4242</span>`, "<span data-testid=\"horizon-xacts\">48\u202f210</span>",
			`<dd data-testid="horizon-app">report</dd>`, `<dd data-testid="horizon-state">idle in transaction</dd>`,
			`<code data-testid="horizon-query">SELECT &#39;&lt;script&gt;&#39; FROM big_report</code>`,
			"<code>SELECT pg_terminate_backend(4242)</code>", "10.0.0.5", "alice"} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s: the banner lacks %s", path, want)
			}
		}
		if strings.Index(body, "horizon-warning") > strings.Index(body, "queues-empty") {
			t.Errorf("GET %s: the banner is not atop the live region", path)
		}
	}
	for _, c := range []struct {
		h    *pgqueue.HorizonHolder
		want []string
	}{
		{&pgqueue.HorizonHolder{Kind: pgqueue.HorizonPrepared, Age: 2 * time.Hour, Xacts: 20000, Name: "tx1", User: "alice"},
			[]string{"Vacuum held back for 2h00m", "the prepared transaction <code>tx1</code>", "<code>ROLLBACK PREPARED 'tx1'</code>"}},
		{&pgqueue.HorizonHolder{Kind: pgqueue.HorizonSlot, Xacts: 150000, Name: "standby1", State: "inactive"},
			[]string{"Vacuum held back</h2>", "the replication slot <code>standby1</code>,", "pg_drop_replication_slot('standby1')"}},
		{&pgqueue.HorizonHolder{Kind: pgqueue.HorizonStandby, Xacts: 200000, PID: 88, ApplicationName: "standby1"},
			[]string{"a standby's feedback, through pid", "<code>hot_standby_feedback</code> off there"}},
		{&pgqueue.HorizonHolder{Kind: pgqueue.HorizonTransaction, Xacts: 120000, PID: 77, User: "bob", Hidden: true},
			[]string{"grant it <code>pg_read_all_stats</code>", "<code>SELECT pg_terminate_backend(77)</code>"}},
	} {
		body := render("/", c.h)
		for _, want := range c.want {
			if !strings.Contains(body, want) {
				t.Errorf("the banner of %+v lacks %s", c.h, want)
			}
		}
	}
}
