package main

import (
	"strings"
	"testing"
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
