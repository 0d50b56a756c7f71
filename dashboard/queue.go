package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/pgqueue/pgqueue"
)

// tab is one status filter of a queue's page.
type tab struct {
	Name     string // as in ?status=
	Label    string
	Statuses []pgqueue.Status
}

// tabs are a queue page's filters; the first is the default. "Live" is every job that has not
// finished, pending ones (waiting for the jobs they depend on) included.
var tabs = []tab{
	{"live", "Live", []pgqueue.Status{pgqueue.StatusRunning, pgqueue.StatusAvailable, pgqueue.StatusScheduled, pgqueue.StatusPending}},
	{"running", "Running", []pgqueue.Status{pgqueue.StatusRunning}},
	{"available", "Available", []pgqueue.Status{pgqueue.StatusAvailable}},
	{"scheduled", "Scheduled", []pgqueue.Status{pgqueue.StatusScheduled}},
	{"pending", "Pending", []pgqueue.Status{pgqueue.StatusPending}},
	{"failed", "Failed", []pgqueue.Status{pgqueue.StatusFailed}},
	{"cancelled", "Cancelled", []pgqueue.Status{pgqueue.StatusCancelled}},
	{"completed", "Completed", []pgqueue.Status{pgqueue.StatusCompleted}},
}

// tabOf returns the tab ?status= names; the default for none, ok false for an unknown one.
func tabOf(r *http.Request) (tab, bool) {
	name := r.URL.Query().Get("status")
	if name == "" {
		return tabs[0], true
	}
	for _, t := range tabs {
		if t.Name == name {
			return t, true
		}
	}
	return tab{}, false
}

// queueData is what a queue's page shows.
type queueData struct {
	Name    string
	Stats   *pgqueue.QueueStats
	Tabs    []tab
	Tab     tab
	Jobs    []jobRow
	Cursor  string // this page's cursor; empty on the first page
	Next    string // the next page's cursor; empty on the last
	Search  string // the id searched for, when it was not found
	Missing bool   // the id searched for is not a job of this queue
}

// jobRow is one job of a listing.
type jobRow struct {
	*pgqueue.JobEntry[json.RawMessage]
	Preview   string // the payload's start; empty when payloads are hidden
	LastError string // the latest attempt's error, if any
}

// previewBytes is how much of a payload a listing shows.
const previewBytes = 120

// queuePage serves a queue's jobs, a page at a time, filtered by status; ?id= looks a job up.
func (h *Handler) queuePage(w http.ResponseWriter, r *http.Request) {
	q, ok := h.queueOf(w, r)
	if !ok {
		return
	}
	t, ok := tabOf(r)
	if !ok {
		h.fail(w, r, http.StatusBadRequest, "Unknown status filter.")
		return
	}
	d := &queueData{Name: q.Name(), Tabs: tabs, Tab: t, Cursor: r.URL.Query().Get("cursor")}
	if id := r.URL.Query().Get("id"); id != "" {
		if h.searchJob(w, r, q.Name(), id) {
			return
		}
		// A search that finds nothing is a page of the queue saying so: 200, as its refreshes
		// are (an error status would be written to the browser's console at each).
		d.Search, d.Missing = id, true
	}
	stats, err := q.Stats(r.Context())
	if err != nil {
		h.serverError(w, r, "read the queue's stats", err)
		return
	}
	d.Stats = stats
	page, err := q.Jobs(r.Context(), &pgqueue.ListOptions{Statuses: t.Statuses, Limit: h.opts.PageSize, Cursor: d.Cursor})
	if errors.Is(err, pgqueue.ErrInvalidOption) {
		h.fail(w, r, http.StatusBadRequest, "This page's cursor is not valid for this listing; start from the first page.")
		return
	} else if err != nil {
		h.serverError(w, r, "list the queue's jobs", err)
		return
	}
	can := h.permissionsOf(r)
	d.Next = page.Next
	for _, e := range page.Jobs {
		d.Jobs = append(d.Jobs, newJobRow(e, can.Payload))
	}
	h.render(w, r, http.StatusOK, "queue", &view{Title: q.Name(), Queue: q.Name(), Flash: flashOf(r), Can: can, Data: d})
}

// queueOf returns the queue the path names, or answers 404 if the name is not a valid one.
func (h *Handler) queueOf(w http.ResponseWriter, r *http.Request) (*pgqueue.Queue[json.RawMessage], bool) {
	q, err := pgqueue.NewQueue[json.RawMessage](h.client, r.PathValue("queue"))
	if err != nil {
		h.fail(w, r, http.StatusNotFound, "No such queue: "+err.Error())
		return nil, false
	}
	return q, true
}

// searchJob looks up job id of queue and, if there is one, redirects to its page and reports
// true. An id that does not parse is answered 400 (and reported true: the answer is sent).
func (h *Handler) searchJob(w http.ResponseWriter, r *http.Request, queue, id string) bool {
	u, err := pgqueue.ParseID(id)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Not a job id: "+err.Error())
		return true
	}
	e, err := h.client.Job(r.Context(), u)
	switch {
	case errors.Is(err, pgqueue.ErrNotFound) || (err == nil && e.Queue != queue):
		return false
	case err != nil:
		h.serverError(w, r, "look the job up", err)
		return true
	}
	seeOther(w, r, "jobs/"+u.String(), "", 0)
	return true
}

// newJobRow makes a listing's row of e, with a payload preview if payloads may be shown.
func newJobRow(e *pgqueue.JobEntry[json.RawMessage], payload bool) jobRow {
	row := jobRow{JobEntry: e}
	if payload {
		row.Preview = preview(e.RawPayload)
	}
	if n := len(e.Errors); n > 0 {
		row.LastError = e.Errors[n-1].Error
	}
	return row
}

// preview returns the start of a payload, cut at a character boundary.
func preview(raw []byte) string {
	if len(raw) <= previewBytes {
		return string(raw)
	}
	cut := previewBytes
	for cut > 0 && !utf8.RuneStart(raw[cut]) {
		cut--
	}
	return string(raw[:cut]) + "…"
}
