package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/pgqueue/pgqueue/dashboard"
)

// TestCrossSiteFormRefused: a page of another site with a form that posts to the dashboard's
// Pause (a person tricked into clicking its button) gets a refusal, and the queue stays active.
// The browser's own Origin and Sec-Fetch-Site headers are what the dashboard checks, so only a
// real browser shows this.
func TestCrossSiteFormRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	emails := queue(t, e.client, "emails")
	enqueue(t, emails, "ada@example.com", nil)
	p := e.page
	// Another origin: another port of the same host, which browsers count as another origin.
	evil := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>Win a prize</title>
<form method="post" action="%s/queues/emails/pause"><button type="submit" id="prize">Claim your prize</button></form>`, p.base)
	}))
	p.do("opening the other site", chromedp.Navigate(evil))
	p.allowConsole("status of 403")
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS("#prize"), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("submitting the other site's form: %v", err)
	}
	if resp.Status != http.StatusForbidden {
		t.Errorf("the cross-site pause was answered %d, want 403", resp.Status)
	}
	p.waitText(testid("error-message"), "another site")
	if paused(t, emails) {
		t.Error("a form on another site paused the queue")
	}
}

// TestReadOnly: in read-only mode the pages show everything but offer no action: no Pause, no
// Retry, no Delete, no bulk action to run.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dashboard: &dashboard.Options{ReadOnly: true}})
	emails := queue(t, e.client, "emails")
	id := enqueue(t, emails, "ada@example.com", nil)
	failJobs(t, emails, errors.New("smtp: 550 mailbox unavailable"))

	p := e.page
	absent := func(where string, ids ...string) {
		t.Helper()
		for _, id := range ids {
			if n := p.eval(fmt.Sprintf(`String(document.querySelectorAll(%q).length)`, testid(id)), id); n != "0" {
				t.Errorf("read-only %s shows %s", where, id)
			}
		}
	}
	p.open("/queues/emails")
	p.waitExact(testid("queue-state"), "active")
	absent("queue page", "pause-button", "resume-button", "limits-form")
	p.open("/jobs/" + id.String())
	p.waitExact(testid("job-status"), "failed")
	p.waitText(testid("job-attempt-error"), "550")
	absent("job page", "retry-button", "cancel-button", "delete-button")
	p.open("/bulk?queue=emails&status=failed&action=retry&review=1")
	p.waitExact(testid("bulk-count"), "1")
	absent("bulk confirmation", "bulk-run")
}

// TestPayloadHidden: when the application's Authorize hook refuses ActionViewPayload, no page
// shows a payload (nor metadata), and the job page says they are hidden.
func TestPayloadHidden(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{dashboard: &dashboard.Options{
		Authorize: func(r *http.Request, a dashboard.Action) error {
			if a == dashboard.ActionViewPayload {
				return errors.New("payloads are for administrators")
			}
			return nil
		},
	}})
	const secret = "ada.secret@example.com"
	id := enqueue(t, queue(t, e.client, "emails"), secret, nil)

	p := e.page
	for _, path := range []string{"/", "/queues/emails", "/jobs/" + id.String()} {
		p.open(path)
		p.waitVisible("main")
		if html := p.eval(`document.documentElement.outerHTML`, "the page"); strings.Contains(html, secret) {
			t.Errorf("%s shows the payload to a viewer who may not see it", path)
		}
	}
	p.waitVisible(testid("payload-hidden"))
}
