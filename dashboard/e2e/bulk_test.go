package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// choose selects the option of the select matching the CSS selector whose value is value, as a
// person picking it from the list does (the select then fires its change event).
func (p *page) choose(sel, value string) {
	p.t.Helper()
	p.waitVisible(sel)
	ok := p.eval(fmt.Sprintf(`(() => {
		const s = document.querySelector(%q);
		if (![...s.options].some(o => o.value === %q)) return "no option " + %q + " in: " + [...s.options].map(o => o.value).join(", ");
		s.value = %q;
		s.dispatchEvent(new Event("input", {bubbles: true}));
		s.dispatchEvent(new Event("change", {bubbles: true}));
		return "";
	})()`, sel, value, value, value), sel)
	if ok != "" {
		p.t.Fatalf("choosing %q in %s: %s", value, sel, ok)
	}
}

// TestBulkRetry: the operator retries every failed job of one queue from the bulk page. The
// confirmation states how many jobs match before anything changes; confirming retries exactly
// those, and leaves other queues' failed jobs alone.
func TestBulkRetry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	emails := queue(t, e.client, "emails")
	for i := range 3 {
		enqueue(t, emails, fmt.Sprintf("user%d@example.com", i), nil)
	}
	failJobs(t, emails, errors.New("smtp: 421 try again later"))
	enqueue(t, emails, "waiting@example.com", nil)
	reports := queue(t, e.client, "reports")
	enqueue(t, reports, "ops@example.com", nil)
	failJobs(t, reports, errors.New("render: timeout"))

	p := e.page
	p.open("/")
	p.follow(testid("nav-bulk"))
	p.choose(testid("bulk-queue"), "emails")
	p.choose(testid("bulk-status"), string(pgqueue.StatusFailed))
	p.choose(testid("bulk-action"), "retry")
	p.follow(testid("bulk-review"))
	p.waitVisible(testid("bulk-confirm"))
	p.waitExact(in(testid("bulk-confirm"), testid("bulk-count")), "3")
	if got := count(t, e.client, "emails", pgqueue.StatusFailed); got != 3 {
		t.Fatalf("counting changed the jobs: %d failed in emails, want 3", got)
	}

	p.follow(testid("bulk-run"))
	p.waitText(testid("flash"), "3")
	if got := count(t, e.client, "emails", pgqueue.StatusFailed); got != 0 {
		t.Errorf("%d jobs of emails are still failed, want 0", got)
	}
	if got := count(t, e.client, "emails", pgqueue.StatusAvailable); got != 4 {
		t.Errorf("%d jobs of emails are available, want 4 (3 retried, 1 waiting)", got)
	}
	if got := count(t, e.client, "reports", pgqueue.StatusFailed); got != 1 {
		t.Errorf("%d jobs of reports are failed, want 1: the filter named emails only", got)
	}
}

// count returns how many jobs of queue have status, from the database.
func count(t *testing.T, client *pgqueue.Client, queue string, status pgqueue.Status) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), dbTimeout)
	defer cancel()
	stats, err := client.Stats(ctx)
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	for _, q := range stats.Queues {
		if q.Queue != queue {
			continue
		}
		switch status {
		case pgqueue.StatusAvailable:
			return q.Available
		case pgqueue.StatusFailed:
			return q.Failed
		default:
			t.Fatalf("count: status %s is not counted here", status)
		}
	}
	return 0
}
