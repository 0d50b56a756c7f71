package dashboard

import (
	"errors"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/pgqueue/pgqueue"
)

// confirmForm returns the hidden fields of the confirmation's form in body.
func confirmForm(t *testing.T, body string) url.Values {
	t.Helper()
	form := url.Values{}
	for _, m := range regexp.MustCompile(`<input type="hidden" name="([a-z]+)" value="([^"]*)">`).FindAllStringSubmatch(body, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	if form.Get("before") == "" {
		t.Fatalf("no confirmation form in:\n%s", body)
	}
	return form
}

func TestBulkRetry(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q, other := queue(t, b.client, "emails"), queue(t, b.client, "other")
	for range 3 {
		enqueue(t, q, `{}`, nil)
	}
	enqueue(t, other, `{}`, nil)
	failJobs(t, b.client, q, 3, "boom")
	failJobs(t, b.client, other, 1, "boom")

	status, body := b.get(t, "/bulk?queue=emails&status=failed&within=1h&action=retry&review=1")
	if status != http.StatusOK {
		t.Fatalf("review: %d\n%s", status, body)
	}
	if !strings.Contains(body, `data-testid="bulk-count">3<`) || count(body, "bulk-run") != 1 {
		t.Fatalf("the confirmation does not state 3 jobs with a run button:\n%s", body)
	}
	// Reviewing changes nothing.
	if st, _ := q.Stats(t.Context()); st.Failed != 3 {
		t.Fatalf("after review: %d failed", st.Failed)
	}
	form := confirmForm(t, body)
	status, loc := b.post(t, "/bulk", form, nil)
	if status != http.StatusSeeOther || loc != "./queues/emails?status=failed&flash=bulk_retry&n=3" {
		t.Fatalf("run: %d %q", status, loc)
	}
	if st, _ := q.Stats(t.Context()); st.Failed != 0 || st.Available != 3 {
		t.Errorf("after the bulk retry: %d failed, %d available; want 0, 3", st.Failed, st.Available)
	}
	if st, _ := other.Stats(t.Context()); st.Failed != 1 {
		t.Errorf("the other queue's failed job was touched")
	}
	if _, body := b.get(t, "/queues/emails?status=failed&flash=bulk_retry&n=3"); !strings.Contains(body, "Retried 3 jobs.") {
		t.Error("no flash after the bulk retry")
	}
}

// TestBulkCountEndsByTheDatabaseClock: the filter of a count ends at the database's now, by which
// the jobs' times are written, not at the application's: here the application's clock reads
// midnight, 1 January 2000 (a synctest bubble's), and the jobs failed just now.
func TestBulkCountEndsByTheDatabaseClock(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "emails")
	for range 3 {
		enqueue(t, q, `{}`, nil)
	}
	failJobs(t, b.client, q, 3, "boom")
	from, err := b.client.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var rec *httptest.ResponseRecorder
	synctest.Test(t, func(t *testing.T) {
		rec = httptest.NewRecorder()
		b.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/bulk?queue=emails&status=failed&action=retry&review=1", nil))
	})
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, `data-testid="bulk-count">3<`) {
		t.Fatalf("review: %d, want 3 jobs counted:\n%s", rec.Code, body)
	}
	to, err := b.client.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	before, err := time.Parse(time.RFC3339Nano, confirmForm(t, body).Get("before"))
	if err != nil || before.Before(from) || before.After(to) {
		t.Errorf("the count's end %v (%v), want between the database's %v and %v", before, err, from, to)
	}
}

func TestBulkLeavesLaterJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "emails")
	enqueue(t, q, `{}`, &pgqueue.EnqueueOptions{Delay: time.Hour})
	_, body := b.get(t, "/bulk?queue=emails&status=scheduled&action=cancel&review=1")
	if !strings.Contains(body, `data-testid="bulk-count">1<`) {
		t.Fatalf("count: %s", body)
	}
	form := confirmForm(t, body)
	later := enqueue(t, q, `{}`, &pgqueue.EnqueueOptions{Delay: time.Hour}) // after the count
	if status, loc := b.post(t, "/bulk", form, nil); status != http.StatusSeeOther || !strings.Contains(loc, "n=1") {
		t.Fatalf("run: %d %q", status, loc)
	}
	if e, _ := b.client.Job(t.Context(), later.ID); e.Status != pgqueue.StatusScheduled {
		t.Errorf("a job enqueued after the count was %s", e.Status)
	}
}

func TestBulkRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, &Options{Authorize: func(r *http.Request, a Action) error {
		if a == ActionBulkDelete {
			return errNope
		}
		return nil
	}})
	q := queue(t, b.client, "emails")
	enqueue(t, q, `{}`, nil)
	for _, bad := range []string{
		"queue=emails&status=available&within=1h&action=retry", // within needs a finished status
		"queue=emails&status=bogus&action=retry",
		"queue=emails&status=failed&action=explode",
		"queue=bad%20name&status=failed&action=retry",
	} {
		status, body := b.get(t, "/bulk?review=1&"+bad)
		if status != http.StatusBadRequest || count(body, "bulk-error") != 1 || count(body, "bulk-run") != 0 {
			t.Errorf("review %s: %d", bad, status)
		}
	}
	// A refused action is counted but not offered, and refused if posted.
	_, body := b.get(t, "/bulk?queue=emails&status=available&action=delete&review=1")
	if !strings.Contains(body, `data-testid="bulk-count">1<`) || count(body, "bulk-run") != 0 {
		t.Error("a refused bulk action is offered")
	}
	form := url.Values{"queue": {"emails"}, "status": {"available"}, "action": {"delete"}, "before": {time.Now().UTC().Format(time.RFC3339Nano)}}
	if status, _ := b.post(t, "/bulk", form, nil); status != http.StatusForbidden {
		t.Errorf("refused bulk delete: %d, want 403", status)
	}
	form.Del("before")
	form.Set("action", "retry")
	if status, _ := b.post(t, "/bulk", form, nil); status != http.StatusBadRequest {
		t.Errorf("a run without its time of counting: %d, want 400", status)
	}
	if st, _ := q.Stats(t.Context()); st.Available != 1 {
		t.Error("a refused bulk action changed jobs")
	}
}

var errNope = errors.New("not you")
