package dashboard

import (
	"context"
	"net/http"

	"github.com/oklog/ulid/v2"
	"github.com/pgqueue/pgqueue"
)

// Cancel workflow and Retry workflow act on every job of a workflow that they concern, as a bulk
// action does on the jobs of a filter; Options.Authorize is asked ActionBulkCancel and
// ActionBulkRetry for them. Both ask first, as a job's Cancel does (see confirm.go): the
// workflow's page links (a GET form) to the action's URL, whose GET answers a page that names the
// workflow and counts the jobs the action concerns, and whose form POSTs to the same URL.

// workflowAction is an action on a workflow's jobs.
type workflowAction struct {
	Value, Label string
	action       Action
	flash        string
	run          func(c *pgqueue.Client, ctx context.Context, id ulid.ULID) (int, error)
}

var (
	workflowCancel = workflowAction{"cancel", "Cancel", ActionBulkCancel, "workflow_cancel", (*pgqueue.Client).CancelWorkflow}
	workflowRetry  = workflowAction{"retry", "Retry", ActionBulkRetry, "workflow_retry", (*pgqueue.Client).RetryWorkflow}
)

// workflowConfirmData is what the confirmation of an action on a workflow shows.
type workflowConfirmData struct {
	ID          ulid.ULID
	Name        string
	Status      pgqueue.WorkflowStatus
	Action      string // the last segment of the action's URL: "cancel", "retry"
	Label       string // "Cancel", "Retry"
	Count       int    // the jobs the action concerns now
	Consequence string // what the action does to them
}

// confirmWorkflow returns the handler of the confirmation page of a on the workflow the path
// names. It answers 403 where the action would be refused (read-only mode, Authorize), 404 for
// no such workflow.
func (h *Handler) confirmWorkflow(a workflowAction) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.opts.ReadOnly {
			h.fail(w, r, http.StatusForbidden, "This dashboard is read-only: it makes no changes.")
			return
		}
		if !h.allowed(w, r, a.action) {
			return
		}
		info, ok := h.pathWorkflow(w, r)
		if !ok {
			return
		}
		d := &workflowConfirmData{ID: info.ID, Name: info.Name, Status: info.Status, Action: a.Value, Label: a.Label}
		cancelable, retryable := actionable(info)
		if a.Value == workflowCancel.Value {
			d.Count = cancelable
			d.Consequence = "Every job of the workflow that has not finished is cancelled: those that wait do not " +
				"run, the handlers of those running are told to stop (their contexts are cancelled). Jobs outside " +
				"the workflow that depend on them follow their policies. Retry workflow makes them run again."
		} else {
			d.Count = retryable
			d.Consequence = "Every failed or cancelled job of the workflow runs again, with a fresh set of " +
				"attempts, each once the jobs it depends on have completed; the jobs that completed do not run again."
		}
		h.render(w, r, http.StatusOK, "workflow_confirm", &view{Title: a.Label + " " + workflowTitle(info) + "?",
			Can: h.permissionsOf(r), Data: d})
	}
}

// runWorkflowAction returns the handler that runs a confirmed a on the workflow the path names
// and goes back to the workflow's page, saying how many jobs it changed.
func (h *Handler) runWorkflowAction(a workflowAction) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		info, ok := h.pathWorkflow(w, r)
		if !ok {
			return
		}
		// A workflow's jobs are changed in batches, as a bulk action's are: it goes on if the
		// browser leaves meanwhile.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), bulkTimeout)
		defer cancel()
		n, err := a.run(h.client, ctx, info.ID)
		if err != nil {
			h.serverError(w, r, a.Value+" the workflow", err)
			return
		}
		seeOther(w, r, "workflows/"+info.ID.String(), a.flash, n)
	}
}
