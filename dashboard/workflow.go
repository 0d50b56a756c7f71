package dashboard

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/oklog/ulid/v2"
	"github.com/pgqueue/pgqueue"
)

// The workflow pages: a list of workflows, newest first, and a page per workflow with its steps
// in the order they were added, each with what it waits for. Both are live as the other pages
// are (a workflow's page on the changes of its steps' queues); they also refresh on the
// sampler's samples while a workflow they show runs, because not all that the resolver does
// after a job's end is announced to a watch: a dependency met while its step still waits for
// another, the end of the workflow itself.

// workflowShows are the list's filters, the default first.
var workflowShows = []choice{{"all", "All"}, {"unfinished", "Unfinished"}}

// workflowListData is what the list of workflows shows.
type workflowListData struct {
	Shows     []choice
	Show      string // the current filter's value
	Workflows []workflowRow
	Before    string // this page's start (the last id of the previous page); empty on the first
	Next      string // the next page's start; empty on the last
	Running   bool   // a workflow of the page runs: the page refreshes on samples too
}

// workflowRow is one workflow of the list. A listing tells a running workflow from a finished
// one, not a completed one from a failed one (that reads every job): State is running or
// finished.
type workflowRow struct {
	W     *pgqueue.WorkflowInfo
	State string
}

// workflowsPage serves the list of workflows, a page at a time (?before=), all of them or only
// the unfinished ones (?show=). One read of one index range.
func (h *Handler) workflowsPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := &workflowListData{Shows: workflowShows, Show: q.Get("show"), Before: q.Get("before")}
	if d.Show == "" {
		d.Show = workflowShows[0].Value
	}
	if !slices.ContainsFunc(workflowShows, func(c choice) bool { return c.Value == d.Show }) {
		h.fail(w, r, http.StatusBadRequest, "Unknown workflow filter.")
		return
	}
	opts := &pgqueue.WorkflowListOptions{Unfinished: d.Show == "unfinished", Limit: h.opts.PageSize + 1}
	if d.Before != "" {
		id, err := pgqueue.ParseID(d.Before)
		if err != nil {
			h.fail(w, r, http.StatusBadRequest, "This page's start is not a workflow id; start from the first page.")
			return
		}
		opts.Before = id
	}
	list, err := h.client.Workflows(r.Context(), opts)
	if err != nil {
		h.serverError(w, r, "list the workflows", err)
		return
	}
	if len(list) > h.opts.PageSize {
		list = list[:h.opts.PageSize]
		d.Next = list[len(list)-1].ID.String()
	}
	for i := range list {
		row := workflowRow{W: &list[i], State: "finished"}
		if list[i].Status == pgqueue.WorkflowRunning {
			row.State, d.Running = string(pgqueue.WorkflowRunning), true
		}
		d.Workflows = append(d.Workflows, row)
	}
	h.render(w, r, http.StatusOK, "workflows", &view{Title: "Workflows", Nav: "workflows",
		Flash: flashOf(r), Can: h.permissionsOf(r), Data: d})
}

// workflowStepsMax is how many steps a workflow's page shows at once; ?from= pages on.
const workflowStepsMax = 1000

// maxIndent is the deepest level a step's name is indented to.
const maxIndent = 8

// workflowData is what a workflow's page shows.
type workflowData struct {
	*pgqueue.WorkflowInfo
	Counts     []countOf // its jobs by status, in the order a job goes through them
	Steps      []stepRow // the steps of this page: from From on
	From, Next int       // the first step shown and the first of the next page (0: none), from 0
	Levels     int       // the number of levels: the longest path from a root, plus one
	Cancelable int       // its jobs that have not finished, which Cancel workflow cancels
	Retryable  int       // its failed and cancelled jobs, which Retry workflow retries
	Hidden     bool      // metadata is hidden from this viewer
	MetaKeys   []string  // Metadata's keys, sorted
}

// countOf is how many jobs of a workflow have a status; "" counts the deleted ones.
type countOf struct {
	Status pgqueue.Status
	N      int
}

// stepRow is one step of a workflow's page.
type stepRow struct {
	*pgqueue.WorkflowStep
	N      int // its place in the workflow, from 1
	Level  int // the longest path to it from a step that waits for no other step of the workflow
	Indent int // Level, at most maxIndent
	After  []depRow
}

// depRow is one dependency of a step.
type depRow struct {
	pgqueue.StepDependency
	N    int    // the place of the step depended on in the workflow, from 1; 0 for a job outside it
	Name string // that step's name
	Here bool   // that step is shown on this page: the link goes to its row
}

// statusOrder is the order a workflow's counts are shown in; "" (deleted) last.
var statusOrder = []pgqueue.Status{pgqueue.StatusPending, pgqueue.StatusScheduled, pgqueue.StatusAvailable,
	pgqueue.StatusRunning, pgqueue.StatusCompleted, pgqueue.StatusFailed, pgqueue.StatusCancelled, ""}

// workflowPage serves one workflow: its state, its counts and its steps with what each waits for.
func (h *Handler) workflowPage(w http.ResponseWriter, r *http.Request) {
	info, ok := h.pathWorkflow(w, r)
	if !ok {
		return
	}
	from := 0
	if s := r.URL.Query().Get("from"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n >= max(len(info.Steps), 1) {
			h.fail(w, r, http.StatusBadRequest, "This page of steps is out of range; start from the first.")
			return
		}
		from = n
	}
	can := h.permissionsOf(r)
	d := newWorkflowData(info, from, can.Payload)
	h.render(w, r, http.StatusOK, "workflow", &view{Title: workflowTitle(info), Queue: stepQueues(info.Steps),
		Flash: flashOf(r), Can: can, Data: d})
}

// stepQueues returns the queues of steps, sorted, separated by spaces: the page of their
// workflow refreshes on their changes only.
func stepQueues(steps []pgqueue.WorkflowStep) string {
	seen := map[string]bool{"": true} // a deleted job's step has no queue
	var queues []string
	for _, s := range steps {
		if !seen[s.Queue] {
			seen[s.Queue] = true
			queues = append(queues, s.Queue)
		}
	}
	slices.Sort(queues)
	return strings.Join(queues, " ")
}

// workflowTitle names a workflow for titles: by its name and id.
func workflowTitle(info *pgqueue.WorkflowInfo) string {
	if info.Name == "" {
		return "Workflow " + info.ID.String()
	}
	return "Workflow " + info.Name + " " + info.ID.String()
}

// newWorkflowData makes the page of info's steps from from on; its metadata is shown if meta.
func newWorkflowData(info *pgqueue.WorkflowInfo, from int, meta bool) *workflowData {
	d := &workflowData{WorkflowInfo: info, From: from, Hidden: !meta}
	for _, s := range statusOrder {
		if n := info.Counts[s]; n > 0 {
			d.Counts = append(d.Counts, countOf{s, n})
		}
	}
	d.Cancelable, d.Retryable = actionable(info)
	if meta {
		for k := range info.Metadata {
			d.MetaKeys = append(d.MetaKeys, k)
		}
		slices.Sort(d.MetaKeys)
	} else {
		info.Metadata = nil
	}
	end := min(from+workflowStepsMax, len(info.Steps))
	if end < len(info.Steps) {
		d.Next = end
	}
	levels, index := stepLevels(info.Steps)
	for i := from; i < end; i++ {
		s := &info.Steps[i]
		row := stepRow{WorkflowStep: s, N: i + 1, Level: levels[i], Indent: min(levels[i], maxIndent)}
		for _, dep := range s.After {
			dr := depRow{StepDependency: dep}
			if k, ok := index[dep.Job]; ok {
				dr.N, dr.Name, dr.Here = k+1, info.Steps[k].Name, k >= from && k < end
			}
			row.After = append(row.After, dr)
		}
		d.Steps = append(d.Steps, row)
	}
	for _, l := range levels {
		d.Levels = max(d.Levels, l+1)
	}
	return d
}

// actionable returns how many of info's jobs Cancel workflow (those not finished) and Retry
// workflow (the failed and cancelled ones) concern, by its counts.
func actionable(info *pgqueue.WorkflowInfo) (cancelable, retryable int) {
	c := info.Counts
	cancelable = c[pgqueue.StatusPending] + c[pgqueue.StatusScheduled] + c[pgqueue.StatusAvailable] + c[pgqueue.StatusRunning]
	return cancelable, c[pgqueue.StatusFailed] + c[pgqueue.StatusCancelled]
}

// stepLevels returns each step's level — 0 for one that waits for no step of the workflow, else
// one more than the highest level of those it waits for — and each step's index by job id. A
// step waits only for steps added before it, so one pass in order finds every level.
func stepLevels(steps []pgqueue.WorkflowStep) ([]int, map[ulid.ULID]int) {
	index := make(map[ulid.ULID]int, len(steps))
	levels := make([]int, len(steps))
	for i, s := range steps {
		index[s.ID] = i
		for _, dep := range s.After {
			if k, ok := index[dep.Job]; ok && k < i {
				levels[i] = max(levels[i], levels[k]+1)
			}
		}
	}
	return levels, index
}

// parseWorkflowID parses a workflow id given by the user, or answers 400.
func (h *Handler) parseWorkflowID(w http.ResponseWriter, r *http.Request, s string) (ulid.ULID, bool) {
	id, err := pgqueue.ParseID(strings.TrimSpace(s))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Not a workflow id: it is neither a ULID nor a uuid.")
		return id, false
	}
	return id, true
}

// pathWorkflow reads the workflow the path's id names, answering the request itself (and
// returning false) when the id is malformed (400), no workflow has it (404) or the read fails
// (500).
func (h *Handler) pathWorkflow(w http.ResponseWriter, r *http.Request) (*pgqueue.WorkflowInfo, bool) {
	id, ok := h.parseWorkflowID(w, r, r.PathValue("id"))
	if !ok {
		return nil, false
	}
	info, err := h.client.Workflow(r.Context(), id)
	if errors.Is(err, pgqueue.ErrWorkflowNotFound) {
		h.fail(w, r, http.StatusNotFound, "No workflow "+id.String()+
			": it never existed, or it was removed once all its jobs were gone.")
		return nil, false
	} else if err != nil {
		h.serverError(w, r, "read the workflow", err)
		return nil, false
	}
	return info, true
}
