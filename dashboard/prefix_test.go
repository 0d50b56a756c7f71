package dashboard

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// TestPrefix mounts the dashboard under /pgqueue and checks that every link, form, asset and
// event-stream URL of every page, and every redirect, resolves under the prefix.
func TestPrefix(t *testing.T) {
	t.Parallel()
	b := setupAt(t, "/pgqueue", nil)
	q := queue(t, b.client, "emails")
	j := enqueue(t, q, `{}`, nil)
	enqueue(t, q, `{}`, nil)
	enqueueChain(t, b.client, q)
	flows, err := b.client.Workflows(t.Context(), nil)
	if err != nil || len(flows) != 1 {
		t.Fatalf("workflows: %v, %v", flows, err)
	}
	wf := "/workflows/" + flows[0].ID.String()
	attr := regexp.MustCompile(`(?:href|action|src|data-events)="([^"]*)"`)
	for _, path := range []string{"/", "/queues/emails", "/queues/emails?status=failed", "/jobs/" + j.ID.String(), "/jobs/" + j.ID.String() + "/delete", "/bulk",
		"/workflows", wf, wf + "/cancel"} {
		page, _ := url.Parse(b.url(path))
		status, body := b.get(t, path)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d", page, status)
		}
		for _, m := range attr.FindAllStringSubmatch(body, -1) {
			ref, err := url.Parse(strings.ReplaceAll(m[1], "&amp;", "&"))
			if err != nil {
				t.Errorf("%s: bad URL %q", page, m[1])
				continue
			}
			abs := page.ResolveReference(ref)
			if abs.Host != page.Host || !strings.HasPrefix(abs.Path, "/pgqueue/") {
				t.Errorf("%s: %q resolves to %s, outside the prefix", page.Path, m[1], abs)
			}
		}
		// The assets and the event stream the page names are served.
		for _, a := range []string{"assets/app.css", "assets/app.js"} {
			if status, _ := b.do(t, http.MethodGet, page.ResolveReference(&url.URL{Path: baseOf(&http.Request{URL: &url.URL{Path: strings.SplitN(path, "?", 2)[0]}}) + a}).String(), nil, nil); status != http.StatusOK {
				t.Errorf("%s: asset %s: %d", page.Path, a, status)
			}
		}
	}
	// Mounted for the prefix itself too, the prefix leads to the overview under it.
	rec := httptest.NewRecorder()
	http.StripPrefix("/pgqueue", b.h).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/pgqueue", nil))
	if rec.Code != http.StatusMovedPermanently || rec.Header().Get("Location") != "pgqueue/" {
		t.Errorf("GET /pgqueue: %d to %q, want 301 to pgqueue/", rec.Code, rec.Header().Get("Location"))
	}
	// A redirect after an action lands under the prefix.
	status, loc := b.post(t, "/queues/emails/pause", url.Values{}, nil)
	page, _ := url.Parse(b.url("/queues/emails/pause"))
	ref, _ := url.Parse(loc)
	if abs := page.ResolveReference(ref); status != http.StatusSeeOther || abs.Path != "/pgqueue/queues/emails" {
		t.Errorf("redirect after pause: %d to %s", status, abs)
	}
	status, loc = b.get(t, "/jobs?id="+pgqueue.FormatUUID(j.ID))
	page, _ = url.Parse(b.url("/jobs"))
	ref, _ = url.Parse(loc)
	if abs := page.ResolveReference(ref); status != http.StatusSeeOther || abs.Path != "/pgqueue/jobs/"+j.ID.String() {
		t.Errorf("redirect of the search: %d to %s", status, abs)
	}
}

// TestMountedWithoutStripPrefix: mounted under /pgqueue/ without http.StripPrefix, every page
// is answered 404 with a text that says how to mount it, naming the prefix its path shows.
// Mounted right, a path the dashboard does not have is a plain 404 page, without that advice.
func TestMountedWithoutStripPrefix(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	mux := http.NewServeMux()
	mux.Handle("/pgqueue/", b.h)
	mux.Handle("/admin/tools/queues/", b.h)
	for path, prefix := range map[string]string{
		"/pgqueue/":                           "/pgqueue",
		"/pgqueue/queues/emails":              "/pgqueue",
		"/pgqueue/assets/app.css":             "/pgqueue",
		"/pgqueue/events":                     "/pgqueue",
		"/admin/tools/queues/jobs/01JDQ7Z3N2": "/admin/tools/queues",
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		want := `http.StripPrefix("` + prefix + `", h)`
		if body := rec.Body.String(); rec.Code != http.StatusNotFound || !strings.Contains(body, want) {
			t.Errorf("GET %s mounted without StripPrefix: %d %q, want 404 saying %s", path, rec.Code, body, want)
		}
	}

	b = setupAt(t, "/pgqueue", nil)
	status, body := b.get(t, "/no/such/page")
	if status != http.StatusNotFound || count(body, "error-message") != 1 || strings.Contains(body, "StripPrefix") {
		t.Errorf("GET /pgqueue/no/such/page mounted right: %d %q, want a 404 page without advice on mounting", status, body)
	}
	// The routes that answer another method still say so.
	if status, _ := b.get(t, "/queues/emails/pause"); status != http.StatusMethodNotAllowed {
		t.Errorf("GET pause: %d, want 405", status)
	}
}
