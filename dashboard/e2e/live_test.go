package e2e

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pgqueue/pgqueue"
	"github.com/pgqueue/pgqueue/dashboard"
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

// TestSwapWaitsForRelease: a live update that arrives while the reader holds the mouse button
// down on the Pause button waits for the release, so the press and the release land on the same
// button and the click pauses the queue; the update comes in right after.
func TestSwapWaitsForRelease(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	emails := queue(t, e.client, "emails")
	enqueue(t, emails, "ada@example.com", nil)

	p := e.page
	p.open("/queues/emails")
	p.waitExact(testid("queue-state"), "active")
	waitLive(p)
	at := func(coord string) float64 {
		v, err := strconv.ParseFloat(p.eval(`(() => { const r = document.querySelector('[data-testid="pause-button"]').getBoundingClientRect();
			return String(r.`+coord+` + r.`+map[string]string{"x": "width", "y": "height"}[coord]+` / 2); })()`, "the button's centre"), 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	x, y := at("x"), at("y")
	p.do("pressing the Pause button", chromedp.MouseEvent(chromedp.MousePressed, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1)))
	refreshes := p.eval(`String(document.querySelector("[data-live]").getAttribute("data-refreshes"))`, "the refreshes")

	second := e.enqueueFromProcess("emails", "grace@example.com")
	time.Sleep(time.Second) // the change's update has arrived and waits
	if got := p.eval(`String(document.querySelector("[data-live]").getAttribute("data-refreshes"))`, "the refreshes"); got != refreshes {
		t.Fatalf("the region was swapped while the button was held down (refreshes %s, then %s)", refreshes, got)
	}

	// The release completes the click: the form is posted and the page it leads to loads.
	if _, err := chromedp.RunResponse(p.ctx, chromedp.MouseEvent(chromedp.MouseReleased, x, y, chromedp.ButtonLeft, chromedp.ClickCount(1))); err != nil {
		t.Fatalf("releasing the Pause button and waiting for the next page: %v\n%s", err, p.describe())
	}
	p.waitExact(testid("queue-state"), "paused")
	if !paused(t, emails) {
		t.Fatal("the page says paused, but the queue is not paused in the database")
	}
	p.waitVisible(jobRow(second))
}

// TestTimesMoveWhileIdle: with no job changing at all (a stuck queue, as an operator watches
// it), the pages keep moving: the queue's wait and a job's "… ago" count up, and the
// overview's wait and charts follow the samples.
func TestTimesMoveWhileIdle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dashboard: &dashboard.Options{SampleEvery: 500 * time.Millisecond, History: time.Minute}})
	id := enqueue(t, queue(t, e.client, "emails"), "ada@example.com", nil)

	p := e.page
	p.open("/queues/emails")
	waitSettled(p)
	waitChanges(p, in(jobRow(id), "time"), "textContent", 3)
	waitChanges(p, testid("oldest-wait"), "textContent", 3)

	// The overview refreshes on the server's samples: it does not settle. A new stream's start
	// refreshes it twice at most, so three changes of each are the page moving on its own.
	p.open("/")
	waitLive(p)
	waitChanges(p, in(row("emails"), testid("oldest-wait")), "textContent", 3)
	waitChanges(p, in(row("emails"), testid("chart-wait")), "innerHTML", 3)
}

// waitSettled waits for the page's live updates to connect and for the refreshes a new stream
// starts with to be over (none for a second): what changes after that, no job made change.
func waitSettled(p *page) {
	p.t.Helper()
	waitLive(p)
	p.waitJS("the refreshes of the stream's start", `() => {
		const n = document.querySelector("[data-live]").dataset.refreshes || "0";
		if (n === "0" || n !== window.e2eRefreshes) {
			window.e2eRefreshes = n;
			window.e2eSince = Date.now();
			return false;
		}
		return Date.now() - window.e2eSince >= 1000;
	}`)
}

// waitChanges waits for the property prop (textContent, innerHTML) of the first element
// matching the CSS selector to change n times, each within 3 seconds.
func waitChanges(p *page, sel, prop string, n int) {
	p.t.Helper()
	read := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return e ? e[%q] : "(no element)"; })()`, sel, prop)
	before := p.eval(read, sel)
	for range n {
		deadline := time.Now().Add(3 * time.Second)
		now := before
		for ; now == before; now = p.eval(read, sel) {
			if time.Now().After(deadline) {
				p.t.Fatalf("the %s of %s stayed %q for 3s with no job changing: the page froze", prop, sel, before)
			}
			time.Sleep(100 * time.Millisecond)
		}
		before = now
	}
}

// TestDueRefreshes: a job's page counts down to the job's run time, and refreshes when it
// comes, with no job changing: what the job is then is on the page.
func TestDueRefreshes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := enqueue(t, queue(t, e.client, "emails"), "ada@example.com", &pgqueue.EnqueueOptions{Delay: 8 * time.Second})

	p := e.page
	p.open("/jobs/" + id.String())
	p.waitExact(testid("job-status"), "scheduled")
	waitSettled(p)
	refreshes := refreshCount(p)
	p.waitText("time[data-ago]", "in ")
	p.waitText("time[data-ago]", " ago")
	p.waitJS("the page to refresh as the job comes due", `(before) => Number(document.querySelector("[data-live]").dataset.refreshes || "0") > before`, refreshes)
}
