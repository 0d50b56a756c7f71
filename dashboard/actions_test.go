package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

func TestPauseResume(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "emails")
	enqueue(t, q, `{}`, nil)
	status, loc := b.post(t, "/queues/emails/pause", url.Values{}, nil)
	if status != http.StatusSeeOther || loc != "../../queues/emails?flash=paused" {
		t.Fatalf("pause: %d %q", status, loc)
	}
	st, err := q.Stats(t.Context())
	if err != nil || !st.Paused {
		t.Fatalf("after pause: paused %v, %v", st != nil && st.Paused, err)
	}
	_, body := b.get(t, "/queues/emails?flash=paused")
	if !strings.Contains(body, `data-testid="queue-state" class="paused">paused<`) || count(body, "resume-button") != 1 ||
		!strings.Contains(body, "Queue paused.") {
		t.Error("the queue's page does not show it paused, with a resume button and the flash")
	}
	if status, _ := b.post(t, "/queues/emails/resume", url.Values{}, nil); status != http.StatusSeeOther {
		t.Fatalf("resume: %d", status)
	}
	if st, _ := q.Stats(t.Context()); st.Paused {
		t.Error("still paused after resume")
	}
	// GET never changes anything.
	if status, _ := b.get(t, "/queues/emails/pause"); status != http.StatusMethodNotAllowed {
		t.Errorf("GET pause: %d, want 405", status)
	}
}

func TestSetLimits(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "emails")
	form := url.Values{"max_running": {"5"}, "rate_starts": {"10"}, "rate_per": {"1m"}}
	if status, body := b.post(t, "/queues/emails/limits", form, nil); status != http.StatusSeeOther {
		t.Fatalf("set limits: %d %s", status, body)
	}
	l, err := q.Limits(t.Context())
	if err != nil || l != (pgqueue.Limits{MaxRunning: 5, Rate: pgqueue.Rate{Starts: 10, Per: time.Minute}}) {
		t.Fatalf("limits %+v, %v", l, err)
	}
	_, body := b.get(t, "/queues/emails")
	if !strings.Contains(body, `data-testid="limits-current">≤5 running, 10/1m0s<`) {
		t.Error("the queue's page does not show the limits")
	}
	for _, bad := range []url.Values{{"max_running": {"x"}}, {"rate_starts": {"1"}, "rate_per": {"soon"}}, {"max_running": {"-1"}}} {
		if status, _ := b.post(t, "/queues/emails/limits", bad, nil); status != http.StatusBadRequest {
			t.Errorf("limits %v: %d, want 400", bad, status)
		}
	}
}

func TestJobActions(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "emails")
	failed := enqueue(t, q, `{}`, nil)
	failJobs(t, b.client, q, 1, "boom")
	status, loc := b.post(t, "/jobs/"+failed.ID.String()+"/retry", url.Values{}, nil)
	if status != http.StatusSeeOther || loc != "../../jobs/"+failed.ID.String()+"?flash=retried" {
		t.Fatalf("retry: %d %q", status, loc)
	}
	if e, err := b.client.Job(t.Context(), failed.ID); err != nil || e.Status != pgqueue.StatusAvailable {
		t.Fatalf("after retry: %v", err)
	}
	waiting := enqueue(t, q, `{}`, &pgqueue.EnqueueOptions{Delay: time.Hour})
	if status, _ := b.post(t, "/jobs/"+waiting.ID.String()+"/cancel", url.Values{}, nil); status != http.StatusSeeOther {
		t.Fatalf("cancel: %d", status)
	}
	if e, _ := b.client.Job(t.Context(), waiting.ID); e.Status != pgqueue.StatusCancelled {
		t.Errorf("after cancel: %s", e.Status)
	}
	if status, _ := b.post(t, "/jobs/"+waiting.ID.String()+"/cancel", url.Values{}, nil); status != http.StatusSeeOther {
		t.Errorf("cancelling a cancelled job: %d, want 303 (nothing to do)", status)
	}
	status, loc = b.post(t, "/jobs/"+waiting.ID.String()+"/delete", url.Values{"queue": {"emails"}}, nil)
	if status != http.StatusSeeOther || loc != "../../queues/emails?flash=deleted" {
		t.Fatalf("delete: %d %q", status, loc)
	}
	if _, err := b.client.Job(t.Context(), waiting.ID); !errors.Is(err, pgqueue.ErrNotFound) {
		t.Errorf("after delete: %v", err)
	}
	if status, _ := b.post(t, "/jobs/"+waiting.ID.String()+"/retry", url.Values{}, nil); status != http.StatusNotFound {
		t.Errorf("retry of a deleted job: %d, want 404", status)
	}
	if status, _ := b.post(t, "/jobs/"+failed.ID.String()+"/cancel", url.Values{}, nil); status != http.StatusSeeOther {
		t.Errorf("cancel of an available job: %d", status)
	}
}

func TestReadOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, &Options{ReadOnly: true})
	q := queue(t, b.client, "emails")
	j := enqueue(t, q, `{}`, nil)
	first, _ := enqueueChain(t, b.client, q)
	flows, err := b.client.Workflows(t.Context(), nil)
	if err != nil || len(flows) != 1 {
		t.Fatalf("workflows: %v, %v", flows, err)
	}
	wf := "/workflows/" + flows[0].ID.String()
	for _, path := range []string{"/queues/emails/pause", "/queues/emails/limits", "/jobs/" + j.ID.String() + "/cancel",
		"/jobs/" + j.ID.String() + "/delete", "/bulk", wf + "/cancel", wf + "/retry"} {
		status, body := b.post(t, path, url.Values{"queue": {"emails"}, "status": {"failed"}, "action": {"retry"}}, nil)
		if status != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Errorf("POST %s: %d, want 403 read-only", path, status)
		}
	}
	if st, _ := q.Stats(t.Context()); st.Paused {
		t.Error("a read-only dashboard paused the queue")
	}
	if e, _ := b.client.Job(t.Context(), j.ID); e.Status != pgqueue.StatusAvailable {
		t.Error("a read-only dashboard changed the job")
	}
	if e, _ := b.client.Job(t.Context(), first.ID); e.Status != pgqueue.StatusAvailable {
		t.Error("a read-only dashboard changed the workflow")
	}
	for _, path := range []string{"/", "/queues/emails", "/jobs/" + j.ID.String(), "/bulk", "/workflows", wf} {
		status, body := b.get(t, path)
		if status != http.StatusOK {
			t.Errorf("GET %s: %d", path, status)
		}
		if strings.Contains(body, `method="post"`) {
			t.Errorf("GET %s renders a form that changes state", path)
		}
	}
}

func TestAuthorize(t *testing.T) {
	t.Parallel()
	refuse := map[Action]bool{ActionViewPayload: true, ActionPause: true}
	b := setup(t, &Options{Authorize: func(r *http.Request, a Action) error {
		if r.Header.Get("X-User") == "nobody" {
			return errors.New("who are you?")
		}
		if refuse[a] {
			return errors.New("operators only")
		}
		return nil
	}})
	q := queue(t, b.client, "emails")
	j := enqueue(t, q, `{"secret":"s3cr3t"}`, &pgqueue.EnqueueOptions{Metadata: map[string]string{"tenant": "t-9"}})

	status, body := b.do(t, http.MethodGet, b.url("/"), nil, http.Header{"X-User": {"nobody"}})
	if status != http.StatusForbidden || !strings.Contains(body, "who are you?") {
		t.Errorf("refused view: %d", status)
	}
	status, body = b.do(t, http.MethodGet, b.url("/events"), nil, http.Header{"X-User": {"nobody"}})
	if status != http.StatusForbidden {
		t.Errorf("refused events: %d", status)
	}
	for _, path := range []string{"/jobs/" + j.ID.String(), "/queues/emails"} {
		status, body = b.get(t, path)
		if status != http.StatusOK || strings.Contains(body, "s3cr3t") || strings.Contains(body, "t-9") {
			t.Errorf("GET %s: %d; payload or metadata shown to a viewer refused them", path, status)
		}
	}
	if count(body, "pause-button") != 0 {
		t.Error("a refused action's button is shown")
	}
	_, body = b.get(t, "/jobs/"+j.ID.String())
	if count(body, "payload-hidden") != 1 || count(body, "job-trace-id") != 0 {
		t.Error("the job page does not say the payload is hidden")
	}
	status, body = b.post(t, "/queues/emails/pause", url.Values{}, nil)
	if status != http.StatusForbidden || !strings.Contains(body, "operators only") {
		t.Errorf("refused pause: %d", status)
	}
	if st, _ := q.Stats(t.Context()); st.Paused {
		t.Error("a refused pause paused the queue")
	}
	if status, _ := b.post(t, "/jobs/"+j.ID.String()+"/cancel", url.Values{}, nil); status != http.StatusSeeOther {
		t.Errorf("allowed cancel: %d", status)
	}
}

func TestCrossOriginRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "emails")
	for _, h := range []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Origin": {"https://evil.example"}},
	} {
		status, body := b.post(t, "/queues/emails/pause", url.Values{}, h)
		if status != http.StatusForbidden || !strings.Contains(body, "another site") {
			t.Errorf("cross-origin POST %v: %d, want 403", h, status)
		}
	}
	if st, _ := q.Stats(t.Context()); st.Paused {
		t.Fatal("a cross-origin request paused the queue")
	}
	// The same request from the dashboard's own page passes.
	same := http.Header{"Sec-Fetch-Site": {"same-origin"}, "Origin": {b.srv.URL}}
	if status, _ := b.post(t, "/queues/emails/pause", url.Values{}, same); status != http.StatusSeeOther {
		t.Errorf("same-origin POST: %d, want 303", status)
	}
}

// TestAllowedHosts: a site whose name is rebound to the dashboard's address sends the dashboard
// its own name as Host, and as Origin on a POST; only AllowedHosts keeps it out.
func TestAllowedHosts(t *testing.T) {
	t.Parallel()
	b := setup(t, &Options{AllowedHosts: []string{"localhost", "127.0.0.1", "[::1]"}})
	q := queue(t, b.client, "emails")
	enqueue(t, q, `{}`, nil)
	send := func(method, path, host string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, b.url(path), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := b.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, host := range []string{"evil.example:8080", "evil.example", "localhost.evil.example"} {
		for _, path := range []string{"/", "/queues/emails", "/assets/app.css", "/events"} {
			if status := send(http.MethodGet, path, host); status != http.StatusMisdirectedRequest {
				t.Errorf("GET %s with Host %s: %d, want 421", path, host, status)
			}
		}
		if status := send(http.MethodPost, "/queues/emails/pause", host); status != http.StatusMisdirectedRequest {
			t.Errorf("POST pause with Host %s: %d, want 421", host, status)
		}
	}
	if st, _ := q.Stats(t.Context()); st.Paused {
		t.Fatal("a request to another host paused the queue")
	}
	for _, host := range []string{"localhost:8080", "LOCALHOST", "127.0.0.1", "[::1]:9000"} {
		if status := send(http.MethodGet, "/", host); status != http.StatusOK {
			t.Errorf("GET / with Host %s: %d, want 200", host, status)
		}
	}
	if status := send(http.MethodPost, "/queues/emails/pause", "localhost:8080"); status != http.StatusSeeOther {
		t.Errorf("POST pause with Host localhost:8080: %d, want 303", status)
	}
}

// TestJobActionConfirm: the job page's Cancel and Delete lead to a question, which changes
// nothing and whose form sends the action; where the action would be refused, so is the
// question.
func TestJobActionConfirm(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "emails")
	j := enqueue(t, q, `{}`, nil)
	id := j.ID.String()
	_, page := b.get(t, "/jobs/"+id)
	for _, a := range []string{"cancel", "delete"} {
		form := regexp.MustCompile(`<form method="(\w+)" action="([^"]*)">[^<]*<button[^>]*data-testid="` + a + `-button"`).FindStringSubmatch(page)
		if form == nil || form[1] != "get" || form[2] != "../jobs/"+id+"/"+a {
			t.Errorf("the job page's %s button: %q, want a GET form to ../jobs/%s/%s", a, form, id, a)
		}
		status, body := b.get(t, "/jobs/"+id+"/"+a)
		want := `<form method="post" action="../../jobs/` + id + `/` + a + `">`
		if status != http.StatusOK || !strings.Contains(body, want) || count(body, "confirm-button") != 1 || count(body, "confirm-back") != 1 {
			t.Errorf("GET /jobs/%s/%s: %d, want 200 with %s, a confirm button and a way back\n%s", id, a, status, want, body)
		}
		if e, err := b.client.Job(t.Context(), j.ID); err != nil || e.Status != pgqueue.StatusAvailable {
			t.Fatalf("after the question of %s: %v, %v; want the job available still", a, e, err)
		}
	}
	if status, _ := b.get(t, "/jobs/"+id+"/retry"); status != http.StatusMethodNotAllowed {
		t.Errorf("GET retry: %d, want 405", status)
	}
	if status, _ := b.get(t, "/jobs/01JDQ7Z3N2X8W5V0K4R6T9M1CE/delete"); status != http.StatusNotFound {
		t.Errorf("question of deleting no job: %d, want 404", status)
	}

	ro := setup(t, &Options{ReadOnly: true})
	k := enqueue(t, queue(t, ro.client, "emails"), `{}`, nil)
	if status, body := ro.get(t, "/jobs/"+k.ID.String()+"/delete"); status != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Errorf("read-only question: %d, want 403 read-only", status)
	}
	no := setup(t, &Options{Authorize: func(r *http.Request, a Action) error {
		if a == ActionDelete {
			return errors.New("not you")
		}
		return nil
	}})
	k = enqueue(t, queue(t, no.client, "emails"), `{}`, nil)
	if status, _ := no.get(t, "/jobs/"+k.ID.String()+"/delete"); status != http.StatusForbidden {
		t.Errorf("question of a refused delete: %d, want 403", status)
	}
}
