package main

import (
	"strings"
	"testing"

	"github.com/pgqueue/pgqueue"
)

func TestRetryCancelDeleteByID(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	failed := e.failJobs("emails", 2, false)
	if out := e.ok("", "retry", failed[0]); out != "retried "+failed[0]+"\n" {
		t.Errorf("retry by id said %q", out)
	}
	var results []bulkResultJSON
	e.okJSON(&results, "cancel", failed[0])
	if len(results) != 1 || results[0] != (bulkResultJSON{ID: failed[0], Result: "cancelled"}) {
		t.Errorf("cancel --json: %+v", results)
	}
	if s := e.stats()["emails"]; s.Failed != 1 || s.Cancelled != 1 {
		t.Errorf("after retry and cancel: %+v", s)
	}

	// One unknown id among known ones: the known ones are done, and the exit code says not found;
	// the failure is on standard error.
	const unknown = "01JDQ7Z3N2X8W5V0K4R6T9M1CE"
	r := e.run("", "delete", failed[0], unknown, failed[1])
	if r.code != exitNotFound || !strings.Contains(r.stdout, "deleted "+failed[1]) || !strings.Contains(r.stderr, unknown+": job not found") {
		t.Fatalf("delete with an unknown id: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if n := len(e.stats()); n != 0 {
		t.Errorf("%d queues left after deleting every job", n)
	}

	// A job that has finished cannot be cancelled: an error, not a not-found.
	done := e.failJobs("emails", 1, false)
	e.exits(exitError, "cancel", done[0])
}

func TestRetryByFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.failJobs("emails", 5, false)
	e.failJobs("reports", 2, false)

	// Without --yes, on a standard input that is not a terminal: the count, then a refusal.
	r := e.exits(exitRefused, "retry", "--queue", "emails", "--status", "failed", "--since", "1h")
	if !strings.Contains(r.stderr, "5 jobs match: queue emails; status failed; enqueued since ") || !strings.Contains(r.stderr, "--yes") {
		t.Errorf("refusal:\n%s", r.stderr)
	}
	if s := e.stats()["emails"]; s.Failed != 5 {
		t.Fatalf("a refused retry changed jobs: %+v", s)
	}

	var dry map[string]int
	e.okJSON(&dry, "retry", "--queue", "emails", "--status", "failed", "--dry-run")
	if len(dry) != 1 || dry["matched"] != 5 {
		t.Errorf("--dry-run --json: %v", dry)
	}

	r = e.exits(0, "retry", "--queue", "emails", "--status", "failed", "--since", "1h", "--yes", "--batch", "2")
	if r.stdout != "5 jobs retried\n" || !strings.Contains(r.stderr, "5 jobs match") {
		t.Errorf("retry --yes: stdout %q, stderr %q", r.stdout, r.stderr)
	}
	stats := e.stats()
	if stats["emails"].Available != 5 || stats["emails"].Failed != 0 || stats["reports"].Failed != 2 {
		t.Errorf("after retry by filter: %+v", stats)
	}

	// A window that holds none of the jobs matches nothing, and asks nothing; the JSON still
	// says how many were retried.
	var none map[string]int
	e.okJSON(&none, "retry", "--status", "failed", "--until", "2000-01-01T00:00:00Z")
	if n, ok := none["retried"]; len(none) != 2 || none["matched"] != 0 || !ok || n != 0 {
		t.Errorf("retry of jobs enqueued before 2000: %v", none)
	}
	if out := e.ok("", "retry", "--status", "failed", "--until", "2000-01-01T00:00:00Z"); out != "0 jobs retried\n" {
		t.Errorf("retry of jobs enqueued before 2000 said %q", out)
	}
}

func TestCancelAndDeleteByFilter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, true)
	e.ok(strings.Repeat("{}\n", 4), "enqueue", "emails", "--file", "-")
	var res map[string]int
	e.okJSON(&res, "cancel", "--queue", "emails", "--status", "available", "--yes")
	if res["matched"] != 4 || res["cancelled"] != 4 {
		t.Errorf("cancel by filter: %v", res)
	}
	e.okJSON(&res, "delete", "--status", "cancelled", "--finished-since", "1h", "--yes")
	if res["matched"] != 4 || res["deleted"] != 4 {
		t.Errorf("delete by filter: %v", res)
	}
	if n := len(e.stats()); n != 0 {
		t.Errorf("%d queues left after deleting every job", n)
	}
	var j pgqueue.JobPage[rawJSON]
	e.okJSON(&j, "jobs", "--status", "cancelled")
	if len(j.Jobs) != 0 {
		t.Errorf("cancelled jobs left: %d", len(j.Jobs))
	}
}
