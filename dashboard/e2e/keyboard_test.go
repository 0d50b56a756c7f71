package e2e

import (
	"context"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestKeyboard: a person without a mouse reaches the skip link first, then the queue's Pause
// button by Tab alone, sees where the focus is, and pauses the queue with Enter.
func TestKeyboard(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	emails := queue(t, e.client, "emails")
	enqueue(t, emails, "ada@example.com", nil)

	p := e.page
	p.open("/queues/emails")
	p.waitVisible(testid("pause-button"))
	focused := func() string {
		return p.eval(`(() => {
			const a = document.activeElement;
			return a ? (a.dataset.testid || a.textContent.trim()) : "";
		})()`, "the focused element")
	}
	p.do("pressing Tab", chromedp.KeyEvent(kb.Tab))
	if got := focused(); got != "Skip to content" {
		t.Errorf("the first Tab focuses %q, want the skip link", got)
	}
	const maxTabs = 40
	for i := 0; focused() != "pause-button"; i++ {
		if i == maxTabs {
			t.Fatalf("%d presses of Tab did not reach the Pause button", maxTabs)
		}
		p.do("pressing Tab", chromedp.KeyEvent(kb.Tab))
	}
	if indicator := p.eval(`(() => {
		const s = getComputedStyle(document.activeElement);
		return s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0 ? "outline" : s.boxShadow !== "none" ? "shadow" : "";
	})()`, "the focus indicator"); indicator == "" {
		t.Error("the focused Pause button shows no focus indicator (no outline, no shadow)")
	}

	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.KeyEvent(kb.Enter))
	if err != nil {
		t.Fatalf("pressing Enter on the Pause button: %v", err)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("pressing Enter on the Pause button: status %d", resp.Status)
	}
	p.waitExact(testid("queue-state"), "paused")
	if !paused(t, emails) {
		t.Error("the page says paused, but the queue is not paused in the database")
	}
}
