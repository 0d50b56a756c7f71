package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

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
