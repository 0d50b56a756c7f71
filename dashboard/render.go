package dashboard

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// pageNames are the page templates; each is parsed with layout.html into a set of its own.
var pageNames = []string{"overview", "queue", "job", "bulk", "confirm", "workflows", "workflow", "workflow_confirm", "error"}

// pages are the parsed templates, by page.
type pages struct {
	sets map[string]*template.Template
}

// parsePages parses every page's template set.
func parsePages() (*pages, error) {
	p := &pages{sets: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dashboard: parse templates: %w", err)
		}
		p.sets[name] = t
	}
	return p, nil
}

// view is what every page's template gets: the page's own data in Data.
type view struct {
	// Base is the relative path from the request's URL to the dashboard's root ("./", "../"),
	// so that every link stays under whatever prefix the dashboard is mounted at.
	Base string
	// Title is the page's title; Nav names the page for the navigation ("overview", "bulk").
	Title, Nav string
	// Queue is the queue the page shows, if any, or the queues, separated by spaces: live
	// updates of other queues do not refresh it.
	Queue string
	// Flash is a message about the action just done.
	Flash string
	// Can says which actions to offer.
	Can  permissions
	Data any
}

// baseOf returns the relative path from r's URL to the dashboard's root: one "../" for every
// directory the path (as the dashboard sees it, after any StripPrefix) goes down.
func baseOf(r *http.Request) string {
	depth := strings.Count(r.URL.Path, "/") - 1
	if depth <= 0 {
		return "./"
	}
	return strings.Repeat("../", depth)
}

// render writes page with v, or only its live part (the "live" template) when the request asks
// for the fragment (?fragment=1), which the page's script swaps in on a change. The page is
// rendered into a buffer first, so a template error becomes a 500, not half a page.
//
// A fragment is answered 200 whatever status the page has, the page's own status in the
// Pgqueue-Status header: it is the page's script that asks for it, to show what the page now
// says (the job was deleted, access was withdrawn), and a browser writes every response with an
// error status to the console, once per refresh of a page that stays open.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, page string, v *view) {
	v.Base = baseOf(r)
	name := "layout"
	if r.URL.Query().Get("fragment") == "1" {
		name = "live"
		w.Header().Set("Pgqueue-Status", strconv.Itoa(status))
		status = http.StatusOK
	}
	var buf bytes.Buffer
	if err := h.pages.sets[page].ExecuteTemplate(&buf, name, v); err != nil {
		h.opts.Logger.Error("dashboard: render", "page", page, "error", err)
		http.Error(w, "dashboard: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
}

// fail answers with an error page saying msg (escaped by the template).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h.render(w, r, status, "error", &view{Title: http.StatusText(status), Data: msg})
}

// flashes are the messages a page shows after an action, by the code the redirect carries: a
// fixed text, never one from the URL, so a crafted link cannot make the dashboard say anything.
// %d is the number of jobs the action changed.
var flashes = map[string]string{
	"paused": "Queue paused.", "resumed": "Queue resumed.", "limits": "Limits saved.",
	"retried": "Job retried: it is available to run now.", "cancelled": "Job cancelled.", "deleted": "Job deleted.",
	"bulk_retry": "Retried %d jobs.", "bulk_cancel": "Cancelled %d jobs.", "bulk_delete": "Deleted %d jobs.",
	"workflow_cancel": "Cancelled %d jobs of the workflow.",
	"workflow_retry":  "Retried %d jobs of the workflow: each runs once the jobs it depends on have completed.",
}

// flashOf returns the message of r's flash code, if any.
func flashOf(r *http.Request) string {
	q := r.URL.Query()
	msg, ok := flashes[q.Get("flash")]
	if !ok {
		return ""
	}
	if strings.Contains(msg, "%d") {
		n, err := strconv.Atoi(q.Get("n"))
		if err != nil {
			return ""
		}
		return fmt.Sprintf(msg, n)
	}
	return msg
}

// seeOther redirects, after a change, to target, a path relative to the dashboard's root, with
// a flash code and, for the actions whose message counts jobs (bulk and workflow actions), a
// count n. The Location is relative to the request's URL,
// so the browser resolves it under the prefix it used (http.Redirect would resolve it against
// the path as StripPrefix left it).
func seeOther(w http.ResponseWriter, r *http.Request, target, flash string, n int) {
	if flash != "" {
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + "flash=" + url.QueryEscape(flash)
		if strings.Contains(flashes[flash], "%d") {
			target += "&n=" + strconv.Itoa(n)
		}
	}
	w.Header().Set("Location", baseOf(r)+target)
	w.WriteHeader(http.StatusSeeOther)
}

// pathEscape escapes a path segment: a queue name, in a URL.
func pathEscape(s string) string { return url.PathEscape(s) }
