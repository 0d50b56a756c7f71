package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/pgqueue/pgqueue"
)

// Bulk actions are two requests: a GET that counts what a filter selects and shows a
// confirmation stating the count, then a POST that runs the action on the same filter. The
// confirmation fixes the filter's end (finished or enqueued before the moment of counting), so
// jobs that arrive between the two are left alone.

// bulkAction is an action on every job a filter selects.
type bulkAction struct {
	Value, Label string
	action       Action
	flash        string
	run          func(c *pgqueue.Client, ctx context.Context, f pgqueue.JobFilter, o *pgqueue.BulkOptions) (int, error)
}

var bulkActions = []bulkAction{
	{"retry", "Retry", ActionBulkRetry, "bulk_retry", (*pgqueue.Client).RetryJobs},
	{"cancel", "Cancel", ActionBulkCancel, "bulk_cancel", (*pgqueue.Client).CancelJobs},
	{"delete", "Delete", ActionBulkDelete, "bulk_delete", (*pgqueue.Client).DeleteJobs},
}

// bulkStatuses are the statuses a bulk action may select, the default first.
var bulkStatuses = []pgqueue.Status{pgqueue.StatusFailed, pgqueue.StatusCancelled, pgqueue.StatusCompleted,
	pgqueue.StatusAvailable, pgqueue.StatusScheduled, pgqueue.StatusPending, pgqueue.StatusRunning}

// choice is an option of a select.
type choice struct{ Value, Label string }

// withins are the "finished within the last" choices.
var withins = []choice{{"", "any time"}, {"15m", "15 minutes"}, {"1h", "hour"}, {"6h", "6 hours"},
	{"24h", "day"}, {"168h", "week"}}

// bulkTimeout bounds a bulk action; it goes on if the browser leaves meanwhile.
const bulkTimeout = 10 * time.Minute

// bulkForm is the filter and action as the form gives them.
type bulkForm struct{ Queue, Status, Within, Action string }

// bulkReview is the confirmation of a counted filter.
type bulkReview struct {
	Count       int
	Label       string    // the action's label
	Describe    string    // the filter, in words
	Before      time.Time // the filter's end: the moment of counting
	BeforeValue string    // Before as the form carries it
	Allowed     bool      // the viewer may run the action
}

// bulkData is what the bulk page shows.
type bulkData struct {
	Queues   []string
	Statuses []pgqueue.Status
	Withins  []choice
	Actions  []bulkAction
	Form     bulkForm
	Error    string
	Review   *bulkReview
}

// bulkPage serves the bulk form and, with ?review=1, the confirmation with the count.
func (h *Handler) bulkPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := &bulkData{Statuses: bulkStatuses, Withins: withins, Actions: bulkActions,
		Form: bulkForm{Queue: q.Get("queue"), Status: q.Get("status"), Within: q.Get("within"), Action: q.Get("action")}}
	st, err := h.client.Stats(r.Context())
	if err != nil {
		h.serverError(w, r, "read the queues", err)
		return
	}
	for _, s := range st.Queues {
		d.Queues = append(d.Queues, s.Queue)
	}
	status := http.StatusOK
	if q.Get("review") == "1" {
		// The filter ends now by the database's clock, which writes the jobs' times.
		before, err := h.client.Now(r.Context())
		if err != nil {
			h.serverError(w, r, "read the database clock", err)
			return
		}
		f, a, err := d.Form.filter(before)
		if err != nil {
			d.Error, status = err.Error(), http.StatusBadRequest
		} else if n, err := h.client.CountJobs(r.Context(), f); err != nil {
			h.serverError(w, r, "count the jobs", err)
			return
		} else {
			d.Review = &bulkReview{Count: n, Label: a.Label, Describe: d.Form.describe(), Before: before,
				BeforeValue: before.UTC().Format(time.RFC3339Nano), Allowed: h.may(r, a.action)}
		}
	}
	h.render(w, r, status, "bulk", &view{Title: "Bulk actions", Nav: "bulk", Flash: flashOf(r), Can: h.permissionsOf(r), Data: d})
}

// bulkRun runs a confirmed bulk action and goes to the page of the jobs it concerned.
func (h *Handler) bulkRun(w http.ResponseWriter, r *http.Request) {
	form := bulkForm{Queue: r.PostFormValue("queue"), Status: r.PostFormValue("status"),
		Within: r.PostFormValue("within"), Action: r.PostFormValue("action")}
	before, err := time.Parse(time.RFC3339Nano, r.PostFormValue("before"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "The confirmation is missing its time of counting: count the jobs again.")
		return
	}
	f, a, err := form.filter(before)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if !h.allowed(w, r, a.action) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkTimeout)
	defer cancel()
	n, err := a.run(h.client, ctx, f, nil)
	if err != nil {
		h.serverError(w, r, "run the bulk action", err)
		return
	}
	target := ""
	if form.Queue != "" {
		target = "queues/" + pathEscape(form.Queue) + "?status=" + url.QueryEscape(form.Status)
	}
	seeOther(w, r, target, a.flash, n)
}

// filter checks the form and returns its filter, ending at before, and its action.
func (f bulkForm) filter(before time.Time) (pgqueue.JobFilter, bulkAction, error) {
	var jf pgqueue.JobFilter
	i := slices.IndexFunc(bulkActions, func(a bulkAction) bool { return a.Value == f.Action })
	if i < 0 {
		return jf, bulkAction{}, errors.New("choose an action: retry, cancel or delete")
	}
	if f.Queue != "" {
		if err := pgqueue.ValidateQueueName(f.Queue); err != nil {
			return jf, bulkAction{}, err
		}
		jf.Queues = []string{f.Queue}
	}
	status := pgqueue.Status(f.Status)
	if !slices.Contains(bulkStatuses, status) {
		return jf, bulkAction{}, errors.New("choose a status")
	}
	jf.Statuses = []pgqueue.Status{status}
	finished := status == pgqueue.StatusFailed || status == pgqueue.StatusCancelled || status == pgqueue.StatusCompleted
	if finished {
		jf.FinishedBefore = before
	} else {
		jf.EnqueuedBefore = before
	}
	if f.Within != "" {
		d, err := time.ParseDuration(f.Within)
		switch {
		case err != nil || d <= 0:
			return jf, bulkAction{}, fmt.Errorf("“finished within” %q is not a duration such as 1h", f.Within)
		case !finished:
			return jf, bulkAction{}, errors.New("“finished within” selects finished jobs: failed, cancelled or completed")
		}
		jf.FinishedAfter = before.Add(-d)
	}
	return jf, bulkActions[i], nil
}

// describe says in words which jobs the form selects.
func (f bulkForm) describe() string {
	s := f.Status + " jobs of "
	if f.Queue == "" {
		s += "every queue"
	} else {
		s += "queue " + f.Queue
	}
	for _, w := range withins {
		if w.Value == f.Within && w.Value != "" {
			return s + ", finished within the last " + w.Label
		}
	}
	if f.Within != "" {
		return s + ", finished within the last " + f.Within
	}
	return s
}
