package e2e

import (
	"testing"
)

// markPage sets a mark on the page's window: it is gone if the page reloads.
func markPage(p *page) {
	p.t.Helper()
	p.eval(`window.e2eMark = "not reloaded"`, "the mark")
}

// checkNotReloaded fails the test if the page reloaded since markPage.
func checkNotReloaded(p *page) {
	p.t.Helper()
	if got := p.eval(`String(window.e2eMark)`, "the mark"); got != "not reloaded" {
		p.t.Errorf("the page reloaded (the mark is %q): updates must come live", got)
	}
}

// TestOverviewLive: with the overview open, another process and another client enqueue jobs:
// the counts change, and a new queue's row appears, without a reload.
func TestOverviewLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	enqueue(t, queue(t, e.client, "emails"), "ada@example.com", nil)

	p := e.page
	p.open("/")
	p.waitExact(in(row("emails"), testid("count-available")), "1")
	waitLive(p)
	markPage(p)

	e.enqueueFromProcess("emails", "grace@example.com")
	other := e.otherClient()
	enqueue(t, queue(t, other, "emails"), "barbara@example.com", nil)
	e.enqueueFromProcess("reports", "ops@example.com")

	p.waitExact(in(row("emails"), testid("count-available")), "3")
	p.waitExact(in(row("reports"), testid("count-available")), "1")
	checkNotReloaded(p)
}

// TestQueuePageLive: with a queue's page open, another process enqueues a job: its row appears,
// and the tab's count changes, without a reload.
func TestQueuePageLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	first := enqueue(t, queue(t, e.client, "emails"), "ada@example.com", nil)

	p := e.page
	p.open("/queues/emails")
	p.waitVisible(jobRow(first))
	waitLive(p)
	markPage(p)

	second := e.enqueueFromProcess("emails", "grace@example.com")
	p.waitVisible(jobRow(second))
	p.waitExact(in(jobRow(second), testid("job-status")), "available")
	p.waitExact(in(testid("tab-available"), testid("count-available")), "2")
	checkNotReloaded(p)
}

// TestChangeWhileConnecting: a change made after a page was rendered but before its event
// stream connected (a fraction of a second on every page load) still reaches the page: the
// stream's first events bring the page up to date. The test holds the page's request for the
// stream back until the change is committed, so the window is wide open.
func TestChangeWhileConnecting(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	first := enqueue(t, queue(t, e.client, "emails"), "ada@example.com", nil)

	p := e.page
	p.open("/")
	waitLive(p) // the dashboard's watch runs, as it does while anyone has a page open
	release := p.holdRequest("*/events", func() { p.open("/queues/emails") })
	p.waitVisible(jobRow(first))
	markPage(p)
	second := e.enqueueFromProcess("emails", "grace@example.com")
	release()
	waitLive(p)
	p.waitVisible(jobRow(second))
	checkNotReloaded(p)
}
