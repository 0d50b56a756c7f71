package e2e

import (
	"errors"
	"fmt"
	"github.com/pgqueue/pgqueue"
	"strings"
	"testing"
)

// row returns the CSS selector of the overview's row of queue.
func row(queue string) string {
	return fmt.Sprintf(`%s[data-queue=%q]`, testid("queue-row"), queue)
}

// jobRow returns the CSS selector of a queue page's row of the job id.
func jobRow(id fmt.Stringer) string {
	return fmt.Sprintf(`%s[data-job-id=%q]`, testid("job-row"), id.String())
}

// in returns the CSS selector of the elements matching inner inside those matching outer.
func in(outer, inner string) string { return outer + " " + inner }

// TestPages walks the dashboard as an operator does, by its links: the overview, a queue, its
// failed jobs, a failed job with its error, and back. Every page loads (200 OK) and writes no
// error to the console (newPage checks).
func TestPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	emails := queue(t, e.client, "emails")
	failed := enqueue(t, emails, "ada@example.com", nil)
	failJobs(t, emails, errors.New("smtp: 550 mailbox unavailable"))
	waiting := enqueue(t, emails, "grace@example.com", nil)

	p := e.page
	p.open("/")
	p.waitExact(in(row("emails"), testid("count-available")), "1")
	p.waitExact(in(row("emails"), testid("count-failed")), "1")

	p.follow(in(row("emails"), testid("queue-link")))
	p.waitText(testid("queue-title"), "emails")
	p.waitExact(testid("queue-state"), "active")
	p.waitVisible(jobRow(waiting))

	p.follow(testid("tab-failed"))
	p.waitText(in(jobRow(failed), testid("job-error")), "550 mailbox unavailable")

	p.follow(in(jobRow(failed), testid("job-link")))
	p.waitText(testid("job-id"), failed.String())
	p.waitExact(testid("job-status"), "failed")
	p.waitText(testid("job-payload"), "ada@example.com")
	p.waitText(in(testid("job-attempt-error")+`[data-attempt="1"]`, "pre"), "550 mailbox unavailable")
	p.waitVisible(testid("retry-button"))

	p.follow(testid("job-queue"))
	p.waitText(testid("queue-title"), "emails")
	p.follow(testid("nav-overview"))
	p.waitVisible(row("emails"))
}

// TestPanicStack: a job whose handler panicked shows its stack on its page, and the stack,
// once opened, stays open when the page updates live.
func TestPanicStack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	reports := queue(t, e.client, "reports")
	id := enqueue(t, reports, "ops@example.com", &pgqueue.EnqueueOptions{MaxAttempts: 1})
	failJobs(t, reports, nil)

	p := e.page
	p.open("/jobs/" + id.String())
	p.waitText(testid("job-attempt-error"), "template")
	p.unfold(in(testid("job-attempt-error"), "details")) // the stack is folded away
	stack := p.waitText(testid("job-attempt-stack"), "goroutine")
	if !strings.Contains(stack, "failJobs") {
		t.Errorf("the stack does not show the handler (failJobs):\n%s", stack)
	}

	// A live update of the page keeps the stack the reader opened open.
	waitLive(p)
	before := p.eval(`document.querySelector("[data-live]").dataset.refreshes || "0"`, "the refresh count")
	enqueue(t, queue(t, e.otherClient(), "reports"), "grace@example.com", nil)
	p.waitJS("the page to refresh", `(before) => (document.querySelector("[data-live]").dataset.refreshes || "0") !== before`, before)
	p.waitText(testid("job-attempt-stack"), "goroutine")
}

// TestPathPrefix mounts the dashboard under /pgqueue, as an application does with
// http.StripPrefix, and follows every kind of link and form: navigation stays under the prefix,
// the assets and the event stream load from under it.
func TestPathPrefix(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{prefix: "/pgqueue"})
	emails := queue(t, e.client, "emails")
	id := enqueue(t, emails, "ada@example.com", nil)

	p := e.page
	checkUnder := func(where string) {
		t.Helper()
		if path := p.eval("location.pathname", "the path"); !strings.HasPrefix(path, "/pgqueue/") {
			t.Errorf("%s: the page is at %s, outside /pgqueue/", where, path)
		}
		outside := p.eval(`[...document.querySelectorAll("a[href], form[action], link[href], script[src]")]
			.map(e => new URL(e.href || e.action || e.src, location.href))
			.filter(u => u.origin === location.origin && !u.pathname.startsWith("/pgqueue/"))
			.map(u => u.pathname).join(" ")`, "the links")
		if outside != "" {
			t.Errorf("%s: links outside /pgqueue/: %s", where, outside)
		}
	}
	p.open("/")
	waitLive(p)
	checkUnder("overview")
	p.follow(in(row("emails"), testid("queue-link")))
	waitLive(p)
	checkUnder("queue page")
	p.follow(testid("pause-button"))
	p.waitExact(testid("queue-state"), "paused")
	checkUnder("queue page after pausing")
	p.follow(in(jobRow(id), testid("job-link")))
	checkUnder("job page")
	p.follow(testid("nav-bulk"))
	checkUnder("bulk page")
	p.follow(testid("nav-overview"))
	checkUnder("overview, again")
	p.waitVisible(in(row("emails"), testid("queue-paused")))
}

// waitLive waits for the page's live updates to be connected.
func waitLive(p *page) {
	p.t.Helper()
	p.waitJS("live updates to connect", `() => {
		const s = document.querySelector('[data-testid="live-status"]');
		return s && s.dataset.state === "live";
	}`)
}
