package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/pgqueue/pgqueue"
)

// release is a workflow of six steps in the queues build and ship, run until it stands still:
// compile, then test and lint, then deploy; publish, then docs. The build queue's jobs run (lint
// fails, once and for all), the ship queue's do not, so deploy is cancelled (lint failed),
// publish is available and docs waits for it.
type release struct {
	id    ulid.ULID
	steps map[string]ulid.ULID
}

// enqueueRelease enqueues the release workflow and runs the build queue's jobs, with a client's
// resolver, until the workflow stands as the type's comment says. That client keeps completed
// jobs for an hour: what the view shows of them does not hang on when its prune runs.
func (e *env) enqueueRelease() release {
	e.t.Helper()
	ctx := e.t.Context()
	keeping, err := pgqueue.NewClient(e.pool, &pgqueue.Config{Retention: pgqueue.Retention{Completed: time.Hour}})
	if err != nil {
		e.t.Fatal(err)
	}
	defer keeping.Close()
	build, err := pgqueue.NewQueue[json.RawMessage](keeping, "build")
	if err != nil {
		e.t.Fatal(err)
	}
	ship, err := pgqueue.NewQueue[json.RawMessage](keeping, "ship")
	if err != nil {
		e.t.Fatal(err)
	}
	wf := keeping.NewWorkflow("release")
	wf.Metadata = map[string]string{"version": "1.4.2"}
	r := release{id: wf.ID, steps: map[string]ulid.ULID{}}
	add := func(q *pgqueue.Queue[json.RawMessage], name string, o pgqueue.StepOptions, after ...string) {
		o.Name = name
		for _, a := range after {
			o.After = append(o.After, pgqueue.Dependency{Job: r.steps[a]})
		}
		r.steps[name] = q.AddStep(wf, json.RawMessage(fmt.Sprintf(`{"step": %q}`, name)), &o).ID
	}
	add(build, "compile", pgqueue.StepOptions{})
	add(build, "test", pgqueue.StepOptions{}, "compile")
	add(build, "lint", pgqueue.StepOptions{EnqueueOptions: pgqueue.EnqueueOptions{MaxAttempts: 1}}, "compile")
	add(ship, "deploy", pgqueue.StepOptions{}, "test", "lint")
	add(ship, "publish", pgqueue.StepOptions{})
	add(ship, "docs", pgqueue.StepOptions{}, "publish")
	if err := wf.Enqueue(ctx); err != nil {
		e.t.Fatal(err)
	}
	w, err := build.NewWorker(func(_ context.Context, j *pgqueue.Job[json.RawMessage]) error {
		if strings.Contains(string(j.Payload), "lint") {
			return errors.New("lint: 3 problems\nin main.go")
		}
		return nil
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.runUntil(keeping, w, "the release to stand still", func() bool {
		info, err := e.client.Workflow(ctx, r.id)
		return err == nil && info.Unfinished == 2 && info.Counts[pgqueue.StatusCancelled] == 1
	})
	return r
}

// runUntil runs client with w (and so its resolver) until done reports true.
func (e *env) runUntil(client *pgqueue.Client, w *pgqueue.Worker[json.RawMessage], what string, done func() bool) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	ran := make(chan error, 1)
	go func() { ran <- client.Run(ctx, w) }()
	waitFor(e.t, what, done)
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			e.t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		e.t.Fatal("Run did not return")
	}
}

// maskRelease replaces what changes from run to run in the output about r: its ids, by names
// (a ULID by one of its width, so that the columns stay aligned), and its times.
func maskRelease(s string, r release) string {
	ids := map[string]ulid.ULID{"WORKFLOW": r.id}
	for name, id := range r.steps {
		ids[strings.ToUpper(name)] = id
	}
	for name, id := range ids {
		s = strings.ReplaceAll(s, id.String(), fmt.Sprintf("%-26s", "<"+name+">"))
		s = strings.ReplaceAll(s, pgqueue.FormatUUID(id), "<"+name+" uuid>")
	}
	return regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \([^)]*\)`).ReplaceAllString(s, "TIME")
}

// workflow shows the header and one line per step: what each waits for, by step name and
// state, and its latest error on one line; --json gives the library's WorkflowInfo.
func TestWorkflowShowsSteps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	r := e.enqueueRelease()
	golden(t, "workflow", maskRelease(e.ok("", "workflow", r.id.String()), r))

	var info pgqueue.WorkflowInfo
	e.okJSON(&info, "workflow", pgqueue.FormatUUID(r.id))
	if info.ID != r.id || info.Name != "release" || info.Status != pgqueue.WorkflowRunning || len(info.Steps) != 6 ||
		info.Counts[pgqueue.StatusPending] != 1 || info.Metadata["version"] != "1.4.2" {
		t.Errorf("workflow --json: %+v", info)
	}
	docs := info.Steps[5]
	if docs.Name != "docs" || len(docs.After) != 1 || docs.After[0].Job != r.steps["publish"] ||
		docs.After[0].State != pgqueue.DependencyWaiting {
		t.Errorf("workflow --json: step docs %+v", docs)
	}
}

// workflows lists workflows newest first, pages with --before, and --unfinished leaves the
// finished ones out.
func TestWorkflowsList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	if out := e.ok("", "workflows"); out != "no workflows\n" {
		t.Errorf("workflows of a new schema: %q", out)
	}
	if out := e.ok("", "workflows", "--json"); out != "[]\n" {
		t.Errorf("workflows --json of a new schema: %q", out)
	}
	r := e.enqueueRelease()
	done := e.client.NewWorkflow("done")
	e.rawQueue("build").AddStep(done, json.RawMessage(`{}`), nil)
	if err := done.Enqueue(t.Context()); err != nil {
		t.Fatal(err)
	}
	w, err := e.rawQueue("build").NewWorker(func(context.Context, *pgqueue.Job[json.RawMessage]) error { return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.runUntil(e.client, w, "the workflow done to finish", func() bool {
		info, err := e.client.Workflow(t.Context(), done.ID)
		return err == nil && info.Unfinished == 0 && !info.FinishedAt.IsZero()
	})

	out := e.ok("", "workflows")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], done.ID.String()) || !strings.Contains(lines[1], " finished ") ||
		!strings.HasPrefix(lines[2], r.id.String()) || !regexp.MustCompile(`release +running +6 +2 `).MatchString(lines[2]) {
		t.Errorf("workflows:\n%s", out)
	}
	var list []pgqueue.WorkflowInfo
	e.okJSON(&list, "workflows", "--unfinished")
	if len(list) != 1 || list[0].ID != r.id || list[0].Jobs != 6 || list[0].Unfinished != 2 {
		t.Errorf("workflows --unfinished --json: %+v", list)
	}
	page := e.ok("", "workflows", "--limit", "1")
	if !strings.Contains(page, done.ID.String()) || !strings.Contains(page, "more: --before "+done.ID.String()) {
		t.Errorf("workflows --limit 1:\n%s", page)
	}
	if next := e.ok("", "workflows", "--limit", "1", "--before", done.ID.String()); !strings.Contains(next, r.id.String()) {
		t.Errorf("workflows --before:\n%s", next)
	}
	if out := e.ok("", "workflows", "--unfinished", "--before", r.id.String()); out != "no unfinished workflows\n" {
		t.Errorf("workflows --unfinished before the only one: %q", out)
	}
}

// workflow retry and workflow cancel count the jobs they would change, ask as the bulk commands
// do, and change them.
func TestWorkflowRetryAndCancel(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	r := e.enqueueRelease()
	id := r.id.String()

	// Without --yes, on a standard input that is not a terminal: the count, then a refusal.
	res := e.exits(exitRefused, "workflow", "retry", id)
	if !strings.Contains(res.stderr, "2 jobs match: every queue; status failed, cancelled; workflow "+id) ||
		!strings.Contains(res.stderr, "--yes") {
		t.Errorf("refusal:\n%s", res.stderr)
	}
	var dry map[string]int
	e.okJSON(&dry, "workflow", "retry", id, "--dry-run")
	if len(dry) != 1 || dry["matched"] != 2 {
		t.Errorf("workflow retry --dry-run --json: %v", dry)
	}
	if out := e.ok("", "workflow", "retry", id, "--yes"); out != "2 jobs retried\n" {
		t.Errorf("workflow retry --yes said %q", out)
	}
	// lint runs again; deploy waits for it again.
	info, err := e.client.Workflow(t.Context(), r.id)
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[string]pgqueue.Status{}
	for _, s := range info.Steps {
		statuses[s.Name] = s.Status
	}
	if statuses["lint"] != pgqueue.StatusAvailable || statuses["deploy"] != pgqueue.StatusPending {
		t.Errorf("after workflow retry: %v", statuses)
	}

	var res2 map[string]int
	e.okJSON(&res2, "workflow", "cancel", id, "--yes")
	if len(res2) != 2 || res2["matched"] != 4 || res2["cancelled"] != 4 {
		t.Errorf("workflow cancel --yes --json: %v", res2)
	}
	if out := e.ok("", "workflow", "cancel", id, "--yes"); out != "0 jobs cancelled\n" {
		t.Errorf("a second workflow cancel said %q", out)
	}
}

// An unknown workflow exits 3 with advice; a malformed id or option is a usage error.
func TestWorkflowNotFoundAndUsage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	const unknown = "01JDQ7Z3N2X8W5V0K4R6T9M1CE"
	for _, args := range [][]string{{"workflow", unknown}, {"workflow", "cancel", unknown, "--yes"}, {"workflow", "retry", unknown}} {
		r := e.exits(exitNotFound, args...)
		if !strings.Contains(r.stderr, "workflow not found") || !strings.Contains(r.stderr, "id was made ") {
			t.Errorf("pgqueue %v: stderr:\n%s", args, r.stderr)
		}
	}
	for _, args := range [][]string{
		{"workflow"},
		{"workflow", "not-an-id"},
		{"workflow", "cancel"},
		{"workflows", "--limit", "0"},
		{"workflows", "--before", "yesterday"},
		{"cancel", "--status", "pending", "--workflow", "nope"},
	} {
		r := e.exits(exitUsage, args...)
		if !strings.Contains(r.stderr, "pgqueue: ") {
			t.Errorf("pgqueue %v: stderr does not say what is wrong:\n%s", args, r.stderr)
		}
	}
}

// The bulk commands' filters take --workflow: the jobs of one workflow.
func TestBulkFilterByWorkflow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	r := e.enqueueRelease()
	e.ok("", "enqueue", "ship", "{}")
	var res map[string]int
	e.okJSON(&res, "cancel", "--status", "pending,available", "--workflow", r.id.String(), "--yes")
	if res["matched"] != 2 || res["cancelled"] != 2 {
		t.Errorf("cancel --status pending,available --workflow: %v", res)
	}
	if s := e.stats()["ship"]; s.Available != 1 || s.Pending != 0 || s.Cancelled != 3 {
		t.Errorf("after cancel by workflow: %+v", s)
	}
}

// A step whose job has been deleted is shown as deleted, and counted so.
func TestWriteDeletedStep(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	gone, waiting := ulid.Make(), ulid.Make()
	steps := []pgqueue.WorkflowStep{
		{ID: gone, Name: "compile"},
		{ID: waiting, Name: "test", Queue: "build", Status: pgqueue.StatusPending, MaxAttempts: 25,
			After: []pgqueue.StepDependency{{Job: gone, State: pgqueue.DependencyWaiting}}},
	}
	if err := writeSteps(&b, steps); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^compile +`+gone.String()+` +- +deleted +- +- +-$`).MatchString(b.String()) ||
		!strings.Contains(b.String(), "compile (waiting)") {
		t.Errorf("steps:\n%s", b.String())
	}
	if got := countsLine(map[pgqueue.Status]int{"": 1, pgqueue.StatusPending: 1}); got != "1 pending, 1 deleted" {
		t.Errorf("counts: %q", got)
	}
}
