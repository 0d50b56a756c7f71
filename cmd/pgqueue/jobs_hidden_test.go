package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

// jobs says what its status filter hides, with the --status that shows it, and gives each job's
// key.
func TestJobsSaysWhatTheFilterHides(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.failJobs("emails", 3, false)
	cancelled := strings.Fields(e.ok("", "enqueue", "emails", "{}", "--delay", "1h"))[0]
	e.ok("", "cancel", cancelled)
	e.ok("", "enqueue", "keyed", "{}", "--key", "tenant-7")

	out := e.ok("", "jobs", "--queue", "emails")
	if !strings.Contains(out, "no jobs match; 3 failed and 1 cancelled are hidden: --status failed,cancelled to see them") {
		t.Errorf("jobs of a queue with finished jobs only:\n%s", out)
	}
	out = e.ok("", "jobs")
	if !strings.Contains(out, "KEY") || !strings.Contains(out, "tenant-7") ||
		!strings.Contains(out, "3 failed and 1 cancelled are hidden: --status failed,cancelled to see them") {
		t.Errorf("jobs:\n%s", out)
	}
	out = e.ok("", "jobs", "--status", "failed", "--queue", "emails")
	if !strings.Contains(out, "1 cancelled is hidden: --status cancelled to see it") {
		t.Errorf("jobs --status failed:\n%s", out)
	}
	if out := e.ok("", "jobs", "--queue", "keyed"); strings.Contains(out, "hidden") {
		t.Errorf("jobs of a queue that hides nothing:\n%s", out)
	}
}

// Pending jobs: counted by queues, hidden by the default listing with a footer that says how
// to see them, listed by --status pending with no place.
func TestPendingJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	q := e.rawQueue("reports")
	wf := e.client.NewWorkflow("nightly")
	first := q.AddStep(wf, json.RawMessage(`{}`), &pgqueue.StepOptions{Name: "gather"})
	second := q.AddStep(wf, json.RawMessage(`{}`), &pgqueue.StepOptions{Name: "render", After: pgqueue.After(first)})
	if err := wf.Enqueue(t.Context()); err != nil {
		t.Fatal(err)
	}
	if s := e.stats()["reports"]; s.Pending != 1 || s.Available != 1 {
		t.Errorf("queues --json: %+v", s)
	}
	if out := e.ok("", "queues"); !regexp.MustCompile(`(?m)^QUEUE +STATE +PENDING +SCHEDULED .*\nreports +active +1 +0 +1 `).MatchString(out) {
		t.Errorf("queues:\n%s", out)
	}
	out := e.ok("", "jobs")
	if !strings.Contains(out, first.ID.String()) || strings.Contains(out, second.ID.String()) ||
		!strings.Contains(out, "1 pending is hidden: --status pending to see it") {
		t.Errorf("jobs:\n%s", out)
	}
	out = e.ok("", "jobs", "--status", "pending")
	if !regexp.MustCompile(second.ID.String() + ` +reports +pending +- +0/25 `).MatchString(out) {
		t.Errorf("jobs --status pending:\n%s", out)
	}
	if out := e.ok("", "job", second.ID.String()); !strings.Contains(out, "place       - (waits for the jobs it depends on)") {
		t.Errorf("job of a pending job:\n%s", out)
	}
}
