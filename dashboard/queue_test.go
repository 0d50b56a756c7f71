package dashboard

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// jobIDs returns the data-job-id of every job row of body, in order.
func jobIDs(body string) []string {
	var ids []string
	for _, m := range regexp.MustCompile(`data-testid="job-row" data-job-id="([0-9A-Z]+)"`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// nextPage returns the next-page link of body (unescaped), or "".
func nextPage(body string) string {
	m := regexp.MustCompile(`href="([^"]*)" id="next-page"`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

func TestQueuePagePaging(t *testing.T) {
	t.Parallel()
	b := setup(t, &Options{PageSize: 3})
	q := queue(t, b.client, "emails")
	payloads := make([]json.RawMessage, 7)
	for i := range payloads {
		payloads[i] = json.RawMessage(`{"n":` + string(rune('0'+i)) + `}`)
	}
	ids, err := q.EnqueueMany(t.Context(), payloads, nil)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	path := "/queues/emails"
	for page := 0; path != ""; page++ {
		status, body := b.get(t, path)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, status, body)
		}
		got := jobIDs(body)
		if page < 2 && len(got) != 3 || page == 2 && len(got) != 1 || page > 2 {
			t.Fatalf("page %d lists %d jobs", page, len(got))
		}
		if page == 0 && !strings.Contains(body, `data-testid="job-place">#1<`) {
			t.Error("the first job is not shown first in line")
		}
		seen = append(seen, got...)
		next := nextPage(body)
		if next == "" {
			break
		}
		// The link is relative to the page: ../queues/emails?status=live&cursor=…
		if !strings.HasPrefix(next, "../queues/emails?") {
			t.Fatalf("next-page link %q", next)
		}
		path = "/" + strings.TrimPrefix(next, "../")
	}
	want := make([]string, len(ids))
	for i, id := range ids {
		want[i] = id.String()
	}
	if !slices.Equal(seen, want) {
		t.Errorf("pages listed %v, want %v", seen, want)
	}
	// Tabs filter: nothing failed.
	status, body := b.get(t, "/queues/emails?status=failed")
	if status != http.StatusOK || count(body, "job-row") != 0 || count(body, "jobs-empty") != 1 {
		t.Errorf("failed tab: %d, %d rows", status, count(body, "job-row"))
	}
	if status, _ := b.get(t, "/queues/emails?status=bogus"); status != http.StatusBadRequest {
		t.Errorf("unknown tab: %d, want 400", status)
	}
	if status, _ := b.get(t, "/queues/emails?cursor=bogus"); status != http.StatusBadRequest {
		t.Errorf("bad cursor: %d, want 400", status)
	}
	if status, _ := b.get(t, "/queues/bad%20name"); status != http.StatusNotFound {
		t.Errorf("invalid queue name: %d, want 404", status)
	}
}

func TestSearchByID(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q, other := queue(t, b.client, "emails"), queue(t, b.client, "other")
	j := enqueue(t, q, `{}`, nil)
	o := enqueue(t, other, `{}`, nil)
	want := "../jobs/" + j.ID.String()
	for _, id := range []string{j.ID.String(), strings.ToLower(j.ID.String()), pgqueue.FormatUUID(j.ID)} {
		if status, loc := b.get(t, "/queues/emails?id="+id); status != http.StatusSeeOther || loc != want {
			t.Errorf("search %s: %d %q, want 303 %q", id, status, loc, want)
		}
	}
	// A search that finds nothing is the queue's page saying so, 200: a browser would write an
	// error status to its console, and again at every live refresh of the page.
	status, body := b.get(t, "/queues/emails?id="+o.ID.String())
	if status != http.StatusOK || count(body, "search-missing") != 1 {
		t.Errorf("search of another queue's job: %d, missing %d; want 200, 1", status, count(body, "search-missing"))
	}
	if status, _ := b.get(t, "/queues/emails?id=nope"); status != http.StatusBadRequest {
		t.Errorf("search of a bad id: %d, want 400", status)
	}
	// The header's search finds a job of any queue.
	if status, loc := b.get(t, "/jobs?id="+pgqueue.FormatUUID(o.ID)); status != http.StatusSeeOther || loc != "./jobs/"+o.ID.String() {
		t.Errorf("global search: %d %q", status, loc)
	}
	never := "01JDQ7Z3N2X8W5V0K4R6T9M1CE"
	if status, body := b.get(t, "/jobs?id="+never); status != http.StatusOK || !strings.Contains(body, "No job "+never) {
		t.Errorf("global search of no job: %d %q, want 200 saying there is none", status, body)
	}
	if status, _ := b.get(t, "/jobs?id=%3Cscript%3E"); status != http.StatusBadRequest {
		t.Errorf("global search of a bad id: %d, want 400", status)
	}
}

func TestJobPage(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "emails")
	j := enqueue(t, q, `{"to":"ada@example.com","html":"<b>hi</b>"}`, &pgqueue.EnqueueOptions{
		Key: "tenant-1", UniqueKey: "u-1",
		Metadata: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	})
	failJobs(t, b.client, q, 1, "smtp: <refused>")
	status, body := b.get(t, "/jobs/"+j.ID.String())
	if status != http.StatusOK {
		t.Fatalf("job page: %d\n%s", status, body)
	}
	for _, want := range []string{
		`data-testid="job-status">failed<`,
		`data-testid="job-trace-id">4bf92f3577b34da6a3ce929d0e0e4736<`,
		`&#34;to&#34;: &#34;ada@example.com&#34;`, // pretty, escaped
		`&lt;b&gt;hi&lt;/b&gt;`,
		`smtp: &lt;refused&gt;`,
		`data-testid="retry-button"`, `data-testid="delete-button"`,
		"tenant-1", "u-1", pgqueue.FormatUUID(j.ID),
	} {
		if !strings.Contains(body, want) {
			t.Errorf("job page lacks %s", want)
		}
	}
	if strings.Contains(body, "<b>hi</b>") {
		t.Error("the payload is not escaped")
	}
	if count(body, "cancel-button") != 0 {
		t.Error("a failed job offers cancel")
	}
	if status, _ := b.get(t, "/jobs/01JDQ7Z3N2X8W5V0K4R6T9M1CE"); status != http.StatusNotFound {
		t.Errorf("unknown job: %d, want 404", status)
	}
	// The page's script refetching a job deleted meanwhile gets 200 and the message to show,
	// the page's status in a header: a browser writes every error status to its console.
	resp, err := b.http.Get(b.url("/jobs/01JDQ7Z3N2X8W5V0K4R6T9M1CE?fragment=1"))
	if err != nil {
		t.Fatal(err)
	}
	frag, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Pgqueue-Status") != "404" || count(string(frag), "error-message") != 1 {
		t.Errorf("fragment of an unknown job: %d, Pgqueue-Status %q, %q; want 200, 404 and the message",
			resp.StatusCode, resp.Header.Get("Pgqueue-Status"), frag)
	}
	if status, _ := b.get(t, "/jobs/nope"); status != http.StatusBadRequest {
		t.Errorf("bad id: %d, want 400", status)
	}
}

func TestTraceID(t *testing.T) {
	t.Parallel()
	for tp, want := range map[string]string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "4bf92f3577b34da6a3ce929d0e0e4736",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": "",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": "",
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": "",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7":    "",
		"": "", "garbage": "",
	} {
		if got := traceID(tp); got != want {
			t.Errorf("traceID(%q) = %q, want %q", tp, got, want)
		}
	}
}
