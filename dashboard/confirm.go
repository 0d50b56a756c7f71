package dashboard

import (
	"net/http"

	"github.com/oklog/ulid/v2"
	"github.com/pgqueue/pgqueue"
)

// A destructive action on one job — cancel, delete — is two steps, and works without the
// script: the job's page links (a GET form) to the action's own URL, whose GET answers a page
// that names the job, its status and what the action will do, and whose form POSTs to the same
// URL, where the action is done (guarded as every change is: see guard.go). A GET changes
// nothing, so a stray click, a prefetch or a crawler only ever reaches the question. Retry stays
// one click: it destroys nothing, and Cancel takes it back until the job runs.

// confirmData is what the confirmation of an action on a job shows.
type confirmData struct {
	ID          ulid.ULID
	Queue       string
	Status      pgqueue.Status
	Action      Action // the last segment of the action's URL: "cancel", "delete"
	Label       string // "Cancel", "Delete"
	Consequence string // what the action does to this job
}

// confirmJob returns the handler of the confirmation page of a, ActionCancel or ActionDelete,
// on the job the path names. It answers 403 where the action would be refused (read-only mode,
// Authorize), 404 for no such job.
func (h *Handler) confirmJob(a Action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.opts.ReadOnly {
			h.fail(w, r, http.StatusForbidden, "This dashboard is read-only: it makes no changes.")
			return
		}
		if !h.allowed(w, r, a) {
			return
		}
		e, ok := h.pathJob(w, r)
		if !ok {
			return
		}
		d := &confirmData{ID: e.ID, Queue: e.Queue, Status: e.Status, Action: a}
		d.Label, d.Consequence = consequence(a, e.Status)
		h.render(w, r, http.StatusOK, "confirm", &view{Title: d.Label + " job " + e.ID.String() + "?",
			Can: h.permissionsOf(r), Data: d})
	}
}

// consequence returns the label of a and what it does to a job of status st.
func consequence(a Action, st pgqueue.Status) (label, text string) {
	running := st == pgqueue.StatusRunning
	switch {
	case a == ActionDelete && running:
		return "Delete", "It is running: its handler is told to stop (its context is cancelled), and the job is " +
			"deleted with its payload and its errors. This cannot be undone."
	case a == ActionDelete:
		return "Delete", "The job is deleted with its payload and its errors. This cannot be undone."
	case running:
		return "Cancel", "It is running: its handler is told to stop (its context is cancelled), and the job ends " +
			"cancelled. Retry runs it again from the start."
	case st == pgqueue.StatusCompleted || st == pgqueue.StatusFailed:
		return "Cancel", "It has finished: there is nothing to cancel."
	case st == pgqueue.StatusPending:
		return "Cancel", "It waits for the jobs it depends on; cancelled, it will not run, and the jobs that depend " +
			"on it follow their policies (by default they are cancelled too). Retry makes it run again once the " +
			"jobs it depends on have completed."
	}
	return "Cancel", "It will not run. Retry makes it run again."
}
