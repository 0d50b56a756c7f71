package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/oklog/ulid/v2"
	"github.com/pgqueue/pgqueue"
)

// TestConsoleListener checks the harness itself: the listener every tab has records a call of
// console.error, an exception nothing caught, a rejected promise and a resource answered with
// an error status, each of which fails the test that the page belongs to.
func TestConsoleListener(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	p := e.page
	p.open("/")
	p.eval(`(() => {
		console.error("e2e: console.error");
		setTimeout(() => { throw new Error("e2e: thrown"); }, 0);
		Promise.reject(new Error("e2e: rejected"));
		fetch("e2e-no-such-page");
		return "";
	})()`, "the errors")
	want := []string{"e2e: console.error", "e2e: thrown", "e2e: rejected", "status of 404"}
	recorded := func(got []string, w string) bool {
		return slices.ContainsFunc(got, func(m string) bool { return strings.Contains(m, w) })
	}
	missing := func(got []string) bool {
		return slices.ContainsFunc(want, func(w string) bool { return !recorded(got, w) })
	}
	// The fetch and the timer end after the script returns: read until all are in, or a bound.
	deadline := time.Now().Add(waitTimeout)
	got := p.flushConsole()
	for missing(got) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		got = p.flushConsole()
	}
	for _, w := range want {
		if !recorded(got, w) {
			t.Errorf("the listener did not record %q; it recorded %q", w, got)
		}
		p.allowConsole(w) // expected here: the test passes if the listener saw them
	}
}

// TestSearchMissingSilent: searching a queue for a job it does not hold shows that it was not
// found, and the page stays live without writing errors to the console as it refreshes; the
// header's search for a job that does not exist says so, on a page of its own.
func TestSearchMissingSilent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	emails := queue(t, e.client, "emails")
	enqueue(t, emails, "ada@example.com", nil)
	elsewhere := enqueue(t, queue(t, e.client, "reports"), "ops@example.com", nil)

	p := e.page
	p.open("/queues/emails")
	p.do("typing the id", chromedp.SendKeys(chromedp.CSS(testid("queue-search-input")), elsewhere.String(), chromedp.NodeVisible))
	p.follow(testid("queue-search") + ` button[type="submit"]`)
	p.waitText(testid("search-missing"), elsewhere.String())
	waitLive(p)
	refreshes := refreshCount(p)
	other := queue(t, e.otherClient(), "emails")
	for range 2 {
		enqueue(t, other, "grace@example.com", nil)
		p.waitJS("the page to refresh", `(before) => Number(document.querySelector("[data-live]").dataset.refreshes || "0") > before`, refreshes)
		refreshes = refreshCount(p)
	}
	p.waitExact(in(testid("tab-available"), testid("count-available")), "3")

	never := ulid.Make()
	p.do("typing the id", chromedp.SendKeys(chromedp.CSS(testid("job-search-input")), never.String(), chromedp.NodeVisible))
	p.follow(testid("job-search-submit"))
	p.waitText(testid("error-message"), "No job "+never.String())
}

// TestJobDeletedWhileOpen: a job deleted elsewhere while its page is open: the page says it is
// gone, live, and writes no error to the console.
func TestJobDeletedWhileOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	id := enqueue(t, queue(t, e.client, "emails"), "ada@example.com", &pgqueue.EnqueueOptions{Delay: 3600e9})

	p := e.page
	p.open("/jobs/" + id.String())
	p.waitExact(testid("job-status"), "scheduled")
	waitLive(p)
	ctx, cancel := context.WithTimeout(t.Context(), dbTimeout)
	defer cancel()
	if err := e.otherClient().DeleteJob(ctx, id, nil); err != nil {
		t.Fatalf("DeleteJob: %v", err)
	}
	p.waitText(testid("error-message"), "No job "+id.String())
}

// refreshCount returns how many times the page's live region was swapped.
func refreshCount(p *page) int {
	p.t.Helper()
	n := 0
	for _, c := range p.eval(`document.querySelector("[data-live]").dataset.refreshes || "0"`, "the refreshes") {
		n = n*10 + int(c-'0')
	}
	return n
}
