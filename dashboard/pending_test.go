package dashboard

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// enqueueChain enqueues a workflow of two steps of q, the second waiting for the first, and
// returns them: the first available, the second pending.
func enqueueChain(t testing.TB, c *pgqueue.Client, q *pgqueue.Queue[json.RawMessage]) (first, second pgqueue.Step) {
	t.Helper()
	wf := c.NewWorkflow("chain")
	first = q.AddStep(wf, json.RawMessage(`{}`), &pgqueue.StepOptions{Name: "first"})
	second = q.AddStep(wf, json.RawMessage(`{}`), &pgqueue.StepOptions{Name: "second", After: pgqueue.After(first)})
	if err := wf.Enqueue(t.Context()); err != nil {
		t.Fatal(err)
	}
	return first, second
}

// TestPendingJobs: a job waiting for the jobs it depends on is counted on the overview, listed
// under its queue's Live and Pending tabs, and offered Cancel but not Retry (which would leave
// it as it is); the bulk form selects it.
func TestPendingJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "emails")
	first, second := enqueueChain(t, b.client, q)

	_, body := b.get(t, "/")
	if got := cellOf(t, body, "emails", "count-pending"); got != "1" {
		t.Errorf("overview: pending %q, want 1", got)
	}
	if got := cellOf(t, body, "emails", "count-available"); got != "1" {
		t.Errorf("overview: available %q, want 1", got)
	}

	_, body = b.get(t, "/queues/emails")
	for tab, want := range map[string]string{"live": "2", "pending": "1", "available": "1"} {
		if !strings.Contains(body, `data-testid="count-`+tab+`">`+want+`<`) {
			t.Errorf("the %s tab does not count %s", tab, want)
		}
	}
	t.Run("listed", func(t *testing.T) {
		if page, err := q.Jobs(t.Context(), &pgqueue.ListOptions{Statuses: []pgqueue.Status{pgqueue.StatusPending}}); err != nil {
			t.Fatal(err)
		} else if len(page.Jobs) == 0 {
			t.Fatal("Queue.Jobs lists no pending job")
		}
		_, body := b.get(t, "/queues/emails")
		if ids := jobIDs(body); len(ids) != 2 || ids[0] != first.ID.String() || ids[1] != second.ID.String() {
			t.Errorf("live tab lists %v, want the available job, then the pending one", ids)
		}
		status, body := b.get(t, "/queues/emails?status=pending")
		if ids := jobIDs(body); status != http.StatusOK || len(ids) != 1 || ids[0] != second.ID.String() {
			t.Errorf("pending tab: %d, lists %v; want only %s", status, ids, second.ID)
		}
		if !strings.Contains(body, `data-testid="tab-pending" aria-current="page"`) ||
			!strings.Contains(body, `data-status="pending"`) || !strings.Contains(body, `class="status pending"`) {
			t.Error("the pending tab is not current, or its row is not marked pending")
		}
	})

	_, body = b.get(t, "/jobs/"+second.ID.String())
	if !strings.Contains(body, `data-testid="job-status">pending<`) || count(body, "retry-button") != 0 || count(body, "cancel-button") != 1 {
		t.Errorf("a pending job's page: want its status, Cancel and no Retry\n%s", body)
	}
	if !strings.Contains(body, "waits for the jobs it depends on") {
		t.Error("a pending job's page does not say what it waits for")
	}
	_, body = b.get(t, "/jobs/"+second.ID.String()+"/cancel")
	if count(body, "confirm-button") != 1 || !strings.Contains(body, "the jobs that depend on it follow their policies") {
		t.Errorf("the question of cancelling a pending job does not say what follows\n%s", body)
	}

	_, body = b.get(t, "/bulk?queue=emails&status=pending&action=cancel&review=1")
	if !strings.Contains(body, `data-testid="bulk-count">1<`) {
		t.Fatalf("bulk count of pending jobs: want 1\n%s", body)
	}
	if status, loc := b.post(t, "/bulk", confirmForm(t, body), nil); status != http.StatusSeeOther || !strings.Contains(loc, "n=1") {
		t.Fatalf("bulk cancel of pending jobs: %d %q", status, loc)
	}
	if e, err := b.client.Job(t.Context(), second.ID); err != nil || e.Status != pgqueue.StatusCancelled {
		t.Errorf("after the bulk cancel: %v, %v; want the pending job cancelled", e, err)
	}
}
