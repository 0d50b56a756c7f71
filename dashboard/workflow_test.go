package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pgqueue/pgqueue"
)

// diamond is a workflow of four steps of one queue: a, then b and c after a, then d after both.
type diamond struct {
	wf         *pgqueue.Workflow
	a, b, c, d pgqueue.Step
}

// enqueueDiamond enqueues a diamond whose step b fails for good at its first attempt (its
// payload says so to runSteps) and whose d is cancelled then, by the default policy.
func enqueueDiamond(t testing.TB, c *pgqueue.Client, q *pgqueue.Queue[json.RawMessage], name string) diamond {
	t.Helper()
	wf := c.NewWorkflow(name)
	wf.Metadata = map[string]string{"tenant": "t-9"}
	d := diamond{wf: wf}
	d.a = q.AddStep(wf, json.RawMessage(`{}`), &pgqueue.StepOptions{Name: "a"})
	d.b = q.AddStep(wf, json.RawMessage(`{"fail":"card declined"}`), &pgqueue.StepOptions{Name: "b", After: pgqueue.After(d.a),
		EnqueueOptions: pgqueue.EnqueueOptions{MaxAttempts: 1}})
	d.c = q.AddStep(wf, json.RawMessage(`{}`), &pgqueue.StepOptions{Name: "c", After: pgqueue.After(d.a)})
	d.d = q.AddStep(wf, json.RawMessage(`{}`), &pgqueue.StepOptions{Name: "d", After: pgqueue.After(d.b, d.c)})
	if err := wf.Enqueue(t.Context()); err != nil {
		t.Fatal(err)
	}
	return d
}

// runSteps runs a worker of q, whose jobs fail with the error their payload's "fail" names (and
// succeed without one), until the workflow id has finished: the client's resolver releases and
// cancels the dependents meanwhile.
func runSteps(t testing.TB, c *pgqueue.Client, q *pgqueue.Queue[json.RawMessage], wf *pgqueue.Workflow) {
	t.Helper()
	w, err := q.NewWorker(func(ctx context.Context, j *pgqueue.Job[json.RawMessage]) error {
		var p struct{ Fail string }
		if err := json.Unmarshal(j.Payload, &p); err != nil || p.Fail == "" {
			return err
		}
		return errors.New(p.Fail)
	}, &pgqueue.WorkerOptions{Concurrency: 2, PollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx, w) }()
	// Its completed jobs are kept until it has finished, then deleted by the next prune (the
	// client keeps no completed job).
	waitFor(t, "the workflow to finish and its completed jobs to be pruned", func() bool {
		info, err := c.Workflow(t.Context(), wf.ID)
		return err == nil && info.Status != pgqueue.WorkflowRunning && info.Counts[pgqueue.StatusCompleted] == 0
	})
	cancel()
	if err := <-ran; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// stepRows returns the step rows of a workflow's page: name, status, level and dependencies
// (each "name:state:policy"), in order.
func stepRows(body string) []string {
	var rows []string
	rowRE := regexp.MustCompile(`(?s)<tr id="step-[0-9A-Z]+" data-testid="step-row" data-step-id="[0-9A-Z]+" data-name="([^"]*)" data-status="([a-z]+)">(.*?)</tr>`)
	levelRE := regexp.MustCompile(`data-testid="step-level">(\d+)<`)
	depRE := regexp.MustCompile(`(?s)data-testid="step-dep" data-job-id="[0-9A-Z]+" data-state="([a-z]+)" data-policy="([a-z]+)"><a [^>]*>#\d+ ([^<]*)</a>`)
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		level := levelRE.FindStringSubmatch(m[3])
		row := m[1] + " " + m[2] + " level " + level[1]
		for _, d := range depRE.FindAllStringSubmatch(m[3], -1) {
			row += " " + d[3] + ":" + d[1] + ":" + d[2]
		}
		rows = append(rows, row)
	}
	return rows
}

// TestWorkflowPage: a workflow's page shows its status, its counts, and its steps in the order
// they were added, each with its level and what it waits for, before and after it ran; its
// fragment is its live part.
func TestWorkflowPage(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "checkout")
	d := enqueueDiamond(t, b.client, q, "order-42")
	path := "/workflows/" + d.wf.ID.String()

	status, body := b.get(t, path)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, status, body)
	}
	want := []string{
		"a available level 0",
		"b pending level 1 a:waiting:cancel",
		"c pending level 1 a:waiting:cancel",
		"d pending level 2 b:waiting:cancel c:waiting:cancel",
	}
	if got := stepRows(body); !slices.Equal(got, want) {
		t.Errorf("steps before running:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range []string{`data-testid="workflow-status" data-samples>running<`, `data-testid="workflow-name">order-42<`,
		`<body data-events="../events" data-queue="checkout">`,
		`data-testid="workflow-unfinished">4<`, `data-testid="workflow-count" data-status="pending">3 `, "t-9",
		`data-testid="workflow-cancel-button"`, `href="../jobs/` + d.a.ID.String() + `" data-testid="step-link"`} {
		if !strings.Contains(body, s) {
			t.Errorf("the page of a workflow that has not run lacks %s", s)
		}
	}
	if count(body, "workflow-retry-button") != 0 {
		t.Error("a workflow with nothing failed offers Retry")
	}

	runSteps(t, b.client, q, d.wf)
	_, body = b.get(t, path)
	// Once the workflow has finished, its completed jobs are deleted (the client keeps no
	// completed job): their rows say so.
	want = []string{
		"a deleted level 0",
		"b failed level 1 a:met:cancel",
		"c deleted level 1 a:met:cancel",
		"d cancelled level 2 b:broken:cancel c:met:cancel",
	}
	if got := stepRows(body); !slices.Equal(got, want) {
		t.Errorf("steps after running:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range []string{`data-testid="workflow-status">failed<`, `data-testid="workflow-unfinished">0<`,
		`data-testid="step-error">card declined<`, "cancelled: it depends on job " + d.b.ID.String() + ", which failed",
		`data-testid="workflow-retry-button"`, `href="#step-` + d.b.ID.String() + `"`} {
		if !strings.Contains(body, s) {
			t.Errorf("the page of the failed workflow lacks %s", s)
		}
	}
	if count(body, "workflow-cancel-button") != 0 {
		t.Error("a finished workflow offers Cancel")
	}

	status, frag := b.get(t, path+"?fragment=1")
	if status != http.StatusOK || strings.Contains(frag, "<html") || count(frag, "step-row") != 4 {
		t.Errorf("fragment: %d, %d step rows, full page %v", status, count(frag, "step-row"), strings.Contains(frag, "<html"))
	}
	if status, _ := b.get(t, "/workflows/01JDQ7Z3N2X8W5V0K4R6T9M1CE"); status != http.StatusNotFound {
		t.Errorf("unknown workflow: %d, want 404", status)
	}
	if status, _ := b.get(t, "/workflows/nope"); status != http.StatusBadRequest {
		t.Errorf("bad id: %d, want 400", status)
	}
	if status, _ := b.get(t, path+"?from=4"); status != http.StatusBadRequest {
		t.Errorf("steps from beyond the last: %d, want 400", status)
	}
}

// TestStepLevels: a step's level is the longest chain of steps of the workflow that leads to
// it; a job outside the workflow adds none.
func TestStepLevels(t *testing.T) {
	t.Parallel()
	ids := make([]pgqueue.WorkflowStep, 5)
	for i := range ids {
		ids[i].ID[15] = byte(i + 1)
	}
	after := func(ks ...int) []pgqueue.StepDependency {
		var deps []pgqueue.StepDependency
		for _, k := range ks {
			dep := pgqueue.StepDependency{}
			dep.Job[15] = byte(k + 1)
			deps = append(deps, dep)
		}
		return deps
	}
	// 0 → 1 → 2, 0 → 3 → … 2 and 3 → 4, and 3 also waits for a job outside (id 99).
	ids[1].After, ids[2].After, ids[3].After, ids[4].After = after(0), after(1), append(after(0), after(98)...), after(2, 3)
	levels, _ := stepLevels(ids)
	if want := []int{0, 1, 2, 1, 3}; !slices.Equal(levels, want) {
		t.Errorf("levels %v, want %v", levels, want)
	}
}

// TestStepQueues: a workflow's page refreshes on the changes of its steps' queues, each named
// once; a deleted job's step has none.
func TestStepQueues(t *testing.T) {
	t.Parallel()
	steps := []pgqueue.WorkflowStep{{Queue: "emails"}, {Queue: "billing"}, {}, {Queue: "emails"}}
	if got := stepQueues(steps); got != "billing emails" {
		t.Errorf("stepQueues = %q, want %q", got, "billing emails")
	}
}

// TestWorkflowsPage: the list of workflows, newest first, all of them or the unfinished ones, a
// page at a time.
func TestWorkflowsPage(t *testing.T) {
	t.Parallel()
	b := setup(t, &Options{PageSize: 2})
	q := queue(t, b.client, "checkout")
	_, body := b.get(t, "/workflows")
	if count(body, "workflows-empty") != 1 || !strings.Contains(body, `data-testid="nav-workflows" aria-current="page"`) {
		t.Errorf("an empty list: want it to say so, under the Workflows navigation\n%s", body)
	}
	done := enqueueDiamond(t, b.client, q, "done")
	runSteps(t, b.client, q, done.wf)
	var waiting []*pgqueue.Workflow
	for i := range 3 {
		waiting = append(waiting, enqueueDiamond(t, b.client, q, fmt.Sprintf("waiting-%d", i)).wf)
	}
	rowRE := regexp.MustCompile(`data-testid="workflow-row" data-workflow-id="([0-9A-Z]+)" data-status="([a-z]+)"`)
	rows := func(body string) []string {
		var out []string
		for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1]+" "+m[2])
		}
		return out
	}
	var seen []string
	for path := "/workflows"; path != ""; {
		status, body := b.get(t, path)
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, status, body)
		}
		seen = append(seen, rows(body)...)
		path = ""
		if next := nextPage(body); next != "" {
			if !strings.HasPrefix(next, "./workflows?show=all&before=") {
				t.Fatalf("next-page link %q", next)
			}
			path = "/" + strings.TrimPrefix(next, "./")
		}
	}
	want := []string{waiting[2].ID.String() + " running", waiting[1].ID.String() + " running",
		waiting[0].ID.String() + " running", done.wf.ID.String() + " finished"}
	if !slices.Equal(seen, want) {
		t.Errorf("the pages list\n%v\nwant\n%v", seen, want)
	}
	_, body = b.get(t, "/workflows?show=unfinished&before="+waiting[1].ID.String())
	if got := rows(body); !slices.Equal(got, want[2:3]) || !strings.Contains(body, `data-testid="tab-unfinished" aria-current="page"`) {
		t.Errorf("unfinished, before the second: %v, want %v", got, want[2:3])
	}
	if !strings.Contains(body, `data-samples`) {
		t.Error("a list with a running workflow does not refresh on samples")
	}
	if status, _ := b.get(t, "/workflows?show=bogus"); status != http.StatusBadRequest {
		t.Errorf("unknown filter: %d, want 400", status)
	}
	if status, _ := b.get(t, "/workflows?before=nope"); status != http.StatusBadRequest {
		t.Errorf("bad page start: %d, want 400", status)
	}
}

// TestWorkflowActions: Cancel workflow and Retry workflow ask first, on a page that counts the
// jobs they concern and changes nothing, then act on the workflow's jobs; they are refused where
// bulk actions are.
func TestWorkflowActions(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	q := queue(t, b.client, "checkout")
	d := enqueueDiamond(t, b.client, q, "order-42")
	runSteps(t, b.client, q, d.wf)
	id := d.wf.ID.String()
	statusOf := func(s pgqueue.Step) pgqueue.Status {
		t.Helper()
		e, err := b.client.Job(t.Context(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		return e.Status
	}

	_, page := b.get(t, "/workflows/"+id)
	form := regexp.MustCompile(`<form method="(\w+)" action="([^"]*)"><button[^>]*data-testid="workflow-retry-button"`).FindStringSubmatch(page)
	if form == nil || form[1] != "get" || form[2] != "../workflows/"+id+"/retry" {
		t.Fatalf("the workflow's Retry: %q, want a GET form to ../workflows/%s/retry", form, id)
	}
	status, body := b.get(t, "/workflows/"+id+"/retry")
	if status != http.StatusOK || !strings.Contains(body, `data-testid="workflow-confirm-count">2<`) ||
		!strings.Contains(body, `<form method="post" action="../../workflows/`+id+`/retry">`) || count(body, "confirm-back") != 1 {
		t.Fatalf("the question of retrying: %d, want 2 jobs, a form and a way back\n%s", status, body)
	}
	if statusOf(d.b) != pgqueue.StatusFailed {
		t.Fatal("the question changed the workflow")
	}
	status, loc := b.post(t, "/workflows/"+id+"/retry", url.Values{}, nil)
	if status != http.StatusSeeOther || loc != "../../workflows/"+id+"?flash=workflow_retry&n=2" {
		t.Fatalf("retry: %d %q", status, loc)
	}
	if statusOf(d.b) != pgqueue.StatusAvailable || statusOf(d.d) != pgqueue.StatusPending {
		t.Errorf("after the retry: b %s, d %s; want available, pending", statusOf(d.b), statusOf(d.d))
	}
	if _, body := b.get(t, "/workflows/"+id+"?flash=workflow_retry&n=2"); !strings.Contains(body, "Retried 2 jobs of the workflow") {
		t.Error("no flash after the retry")
	}

	status, body = b.get(t, "/workflows/"+id+"/cancel")
	if status != http.StatusOK || !strings.Contains(body, `data-testid="workflow-confirm-count">2<`) {
		t.Fatalf("the question of cancelling: %d, want 2 jobs\n%s", status, body)
	}
	if status, loc := b.post(t, "/workflows/"+id+"/cancel", url.Values{}, nil); status != http.StatusSeeOther || !strings.HasSuffix(loc, "flash=workflow_cancel&n=2") {
		t.Fatalf("cancel: %d %q", status, loc)
	}
	if statusOf(d.b) != pgqueue.StatusCancelled || statusOf(d.d) != pgqueue.StatusCancelled {
		t.Errorf("after the cancel: b %s, d %s; want both cancelled", statusOf(d.b), statusOf(d.d))
	}
	// Nothing left to cancel: the question says so and offers no button.
	if _, body := b.get(t, "/workflows/"+id+"/cancel"); count(body, "confirm-button") != 0 || strings.Contains(body, `method="post"`) {
		t.Error("the question of cancelling a finished workflow offers to do it")
	}
	if status, _ := b.post(t, "/workflows/01JDQ7Z3N2X8W5V0K4R6T9M1CE/retry", url.Values{}, nil); status != http.StatusNotFound {
		t.Errorf("retry of no workflow: %d, want 404", status)
	}

	ro := setup(t, &Options{ReadOnly: true})
	k := enqueueDiamond(t, ro.client, queue(t, ro.client, "checkout"), "ro")
	for _, a := range []string{"cancel", "retry"} {
		if status, body := ro.get(t, "/workflows/"+k.wf.ID.String()+"/"+a); status != http.StatusForbidden || !strings.Contains(body, "read-only") {
			t.Errorf("read-only question of %s: %d, want 403", a, status)
		}
	}
	if _, body := ro.get(t, "/workflows/"+k.wf.ID.String()); strings.Contains(body, `data-testid="workflow-cancel-button"`) {
		t.Error("a read-only dashboard offers Cancel workflow")
	}
	no := setup(t, &Options{Authorize: func(r *http.Request, a Action) error {
		if a == ActionBulkCancel {
			return errors.New("not you")
		}
		return nil
	}})
	k = enqueueDiamond(t, no.client, queue(t, no.client, "checkout"), "no")
	if _, body := no.get(t, "/workflows/"+k.wf.ID.String()); count(body, "workflow-cancel-button") != 0 {
		t.Error("Cancel workflow is offered to a viewer refused bulk cancels")
	}
	if status, _ := no.get(t, "/workflows/"+k.wf.ID.String()+"/cancel"); status != http.StatusForbidden {
		t.Errorf("question of a refused cancel: %d, want 403", status)
	}
	if status, _ := no.post(t, "/workflows/"+k.wf.ID.String()+"/cancel", url.Values{}, nil); status != http.StatusForbidden {
		t.Errorf("refused cancel: %d, want 403", status)
	}
}
