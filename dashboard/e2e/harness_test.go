package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
)

// The harness: one Chromium per test binary, a tab of its own (in a browser context of its own,
// so cookies never cross tests) for each test, a test server for each test, and waits that
// poll the page until a condition holds or a bound passes.

const (
	// pageTimeout bounds everything one test does in its tab.
	pageTimeout = 2 * time.Minute
	// waitTimeout bounds one wait for the page to show something. The dashboard updates within
	// a second; the rest is slack for a loaded machine.
	waitTimeout = 15 * time.Second
	// browserStartTimeout bounds the start of Chromium.
	browserStartTimeout = time.Minute
	// viewportWidth and viewportHeight are the size of every tab unless a test changes it, and
	// of the screenshots.
	viewportWidth, viewportHeight = 1280, 800
)

// browser is the test binary's one Chromium, started by the first test that needs it and
// stopped by TestMain.
var browser struct {
	once sync.Once
	ctx  context.Context // the first tab's context: each test's tab is made from it
	stop func()          // closes Chromium and removes its profile
	err  error
}

// sharedBrowser returns the context of the test binary's Chromium, starting it (and installing it,
// see chromiumPath) the first time. It fails the test if Chromium cannot start.
func sharedBrowser(t *testing.T) context.Context {
	t.Helper()
	browser.once.Do(func() {
		browser.ctx, browser.stop, browser.err = startBrowser(t.Logf)
	})
	if browser.err != nil {
		t.Fatal(browser.err)
	}
	return browser.ctx
}

// startBrowser starts headless Chromium with a fresh profile in a temporary directory, and
// returns the context of its first tab and a function that closes it and removes the profile.
func startBrowser(logf func(string, ...any)) (context.Context, func(), error) {
	path, err := chromiumPath(logf)
	if err != nil {
		return nil, nil, err
	}
	profile, err := os.MkdirTemp("", "pgqueue-e2e-chromium-")
	if err != nil {
		return nil, nil, fmt.Errorf("a profile directory for Chromium: %w", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], // headless, no first run, no background work
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(viewportWidth, viewportHeight),
	)
	if os.Geteuid() == 0 {
		// Chromium refuses to run as root with its sandbox on (it cannot drop privileges it
		// should not have). The tests load only the pages of their own test server.
		opts = append(opts, chromedp.NoSandbox)
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocCtx)
	stop := func() {
		// Close Chromium gracefully, then make sure its process and chromedp's goroutines end.
		closing, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_ = chromedp.Cancel(closing)
		cancelBrowser()
		cancelAlloc()
		_ = os.RemoveAll(profile)
	}
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }() // the first Do starts the browser, bound to ctx
	select {
	case err = <-started:
	case <-time.After(browserStartTimeout):
		err = fmt.Errorf("it did not start within %s", browserStartTimeout)
	}
	if err != nil {
		stop()
		<-started
		return nil, nil, fmt.Errorf("starting Chromium (%s): %w", path, err)
	}
	return ctx, stop, nil
}

// stopBrowser closes the test binary's Chromium, if a test started it.
func stopBrowser() {
	if browser.stop != nil {
		browser.stop()
	}
}

// page is one test's browser tab, open on that test's server.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string // the server's URL, without a trailing slash

	mu      sync.Mutex
	console []string // the console errors and uncaught exceptions of the tab so far
}

// newPage opens a tab for t, in a browser context of its own, with a 1280×800 viewport, whose
// paths are relative to base. When the test ends the tab is closed, and the test fails if the
// page wrote an error to the console or threw an exception that nothing caught. Call it after
// starting the server, so that the tab closes before the server does.
func newPage(t *testing.T, base string) *page {
	t.Helper()
	tab, cancelTab := chromedp.NewContext(sharedBrowser(t), chromedp.WithNewBrowserContext())
	ctx, cancel := context.WithTimeout(tab, pageTimeout)
	p := &page{t: t, ctx: ctx, base: strings.TrimSuffix(base, "/")}
	messages := chromedp.Console(ctx)
	read := make(chan struct{})
	go func() {
		defer close(read)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				p.mu.Lock()
				p.console = append(p.console, fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
				p.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelTab()
		<-read
		for _, m := range p.consoleErrors() {
			t.Errorf("the page wrote to the console: %s", m)
		}
	})
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(viewportWidth, viewportHeight)); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return p
}

// consoleErrors returns the console errors and uncaught exceptions of the tab so far.
func (p *page) consoleErrors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.console...)
}

// do runs actions in the tab, failing the test if one fails.
func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// open navigates the tab to path (relative to the server's URL) and waits for the load event.
func (p *page) open(path string) {
	p.t.Helper()
	p.do("opening "+path, chromedp.Navigate(p.base+path))
}

// testid returns the CSS selector of the elements whose data-testid is id.
func testid(id string) string { return fmt.Sprintf("[data-testid=%q]", id) }

// waitVisible waits up to waitTimeout for an element matching the CSS selector to be visible.
func (p *page) waitVisible(sel string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		p.t.Fatalf("waiting for %s to be visible: %v\n%s", sel, err, p.describe())
	}
}

// click waits for the first element matching the CSS selector to be visible and clicks it.
func (p *page) click(sel string) {
	p.t.Helper()
	p.waitVisible(sel)
	p.do("clicking "+sel, chromedp.Click(chromedp.CSS(sel)))
}

// text returns the text of the first element matching the CSS selector, waiting for one to
// exist.
func (p *page) text(sel string) string {
	p.t.Helper()
	return p.eval(fmt.Sprintf("document.querySelector(%q).innerText", sel), sel)
}

// waitText waits up to waitTimeout for the text of an element matching the CSS selector to
// contain want, and returns that text.
func (p *page) waitText(sel, want string) string {
	p.t.Helper()
	return p.waitJS(fmt.Sprintf("text %q in %s", want, sel), `(sel, want) => {
		for (const e of document.querySelectorAll(sel)) {
			if (e.innerText.includes(want)) return e.innerText;
		}
		return null;
	}`, sel, want)
}

// waitJS waits up to waitTimeout for the JavaScript function fn, called with args, to return a
// truthy value, and returns it as a string. what names the condition in the failure.
func (p *page) waitJS(what, fn string, args ...any) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.PollFunction[any](fn,
		chromedp.WithPollingArgs(args...),
		chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(waitTimeout)))
	if err != nil {
		p.t.Fatalf("waiting for %s: %v\n%s", what, err, p.describe())
	}
	return fmt.Sprint(v)
}

// eval evaluates a JavaScript expression whose value is a string; what names it in a failure.
func (p *page) eval(expr, what string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		p.t.Fatalf("reading %s: %v\n%s", what, err, p.describe())
	}
	return v
}

// describe returns the page's URL and the start of its text, for failure messages.
func (p *page) describe() string {
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`location.href + "\n" + document.body.innerText.slice(0, 2000)`))
	if err != nil {
		return fmt.Sprintf("(the page could not be read: %v)", err)
	}
	return "the page was: " + v
}

// darkMode makes the tab prefer a dark color scheme, as a system in dark mode does.
func (p *page) darkMode() {
	p.t.Helper()
	p.do("emulating dark mode", chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		})
		return err
	}))
}

// resize sets the tab's viewport to width×height CSS pixels; mobile emulates a phone's screen
// (a meta viewport applies, touch events on).
func (p *page) resize(width, height int64, mobile bool) {
	p.t.Helper()
	var opts []chromedp.EmulateViewportOption
	if mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait)
	}
	p.do("resizing the viewport", chromedp.EmulateViewport(width, height, opts...))
}

// screenshot returns the tab's viewport as a PNG.
func (p *page) screenshot() []byte {
	p.t.Helper()
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatalf("taking a screenshot: %v", err)
	}
	return png
}

// saveScreenshot writes the tab's viewport as a PNG to dir/name.
func (p *page) saveScreenshot(dir, name string) {
	p.t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, p.screenshot(), 0o644); err != nil {
		p.t.Fatalf("writing the screenshot: %v", err)
	}
	p.t.Logf("wrote %s", path)
}

// startServer serves h on a test server until the test ends, and returns its URL. At the end
// it drops the connections still open (the dashboard's event streams) before closing.
func startServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv.URL
}
