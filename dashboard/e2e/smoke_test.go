package e2e

import (
	"bytes"
	"net/http"
	"testing"
)

// TestBrowserSmoke loads a page whose script changes the DOM after a delay, waits for the change,
// and takes a screenshot: the harness works before there is a dashboard to test.
func TestBrowserSmoke(t *testing.T) {
	t.Parallel()
	base := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><title>smoke</title>
<p data-testid="greeting">loading</p>
<script>setTimeout(() => { document.querySelector("[data-testid=greeting]").textContent = "hello " + location.pathname }, 300)</script>`))
	}))
	p := newPage(t, base)
	p.open("/x")
	if got := p.waitText(testid("greeting"), "hello /x"); got != "hello /x" {
		t.Errorf("greeting = %q, want %q", got, "hello /x")
	}
	if png := p.screenshot(); !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("the screenshot is not a PNG: % x", png[:min(8, len(png))])
	}
}
