package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/fetch"
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
		// Chromium's sandbox does not support running as root: as root it will not start
		// without --no-sandbox. That is safe here: the tabs load only the tests' own servers.
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

	marks chan string // the marks of flushConsole, as the console's reader reaches them

	mu      sync.Mutex
	console []string // the console errors and uncaught exceptions of the tab so far
	allowed []string // console errors containing one of these are expected
	flushes int      // flushConsole's marks so far
}

// consoleMark starts the console.debug messages flushConsole writes.
const consoleMark = "e2e: console flushed to here"

// newPage opens a tab for t, in a browser context of its own, with a 1280×800 viewport, whose
// paths are relative to base. When the test ends the tab is closed, and the test fails if any
// page it showed wrote an error to the console (a call of console.error, a resource answered
// with an error status, a blocked request) or threw an exception or rejected a promise that
// nothing caught, or if the console could not be read. Call it after starting the server, so
// that the tab closes before the server does.
func newPage(t *testing.T, base string) *page {
	t.Helper()
	tab, cancelTab := chromedp.NewContext(sharedBrowser(t), chromedp.WithNewBrowserContext())
	ctx, cancel := context.WithTimeout(tab, pageTimeout)
	p := &page{t: t, ctx: ctx, base: strings.TrimSuffix(base, "/"), marks: make(chan string, 1)}
	messages := chromedp.Console(ctx)
	read := make(chan struct{})
	go func() {
		defer close(read)
		for m, err := range messages {
			switch {
			case err != nil && ctx.Err() == nil:
				p.record(fmt.Sprintf("(the console could not be read: %v)", err))
				return
			case err != nil:
				return
			case m.Type == chromedp.ConsoleDebug && strings.HasPrefix(m.Text, consoleMark):
				select {
				case p.marks <- m.Text:
				default:
				}
			case m.Type == chromedp.ConsoleError || m.IsException():
				p.record(fmt.Sprintf("%s (%s:%d)", m, m.URL, m.Line+1))
			}
		}
	}()
	t.Cleanup(func() {
		p.flushConsole() // what the page wrote last, a refresh's error say, is read too
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

// record records a console error of the tab.
func (p *page) record(msg string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.console = append(p.console, msg)
}

// flushConsole writes a mark to the tab's console and waits, up to 5 seconds, for the reader
// to reach it: every message the tab wrote before is recorded then. It returns the console
// errors so far, as consoleErrors does. A tab that no longer answers is not waited for.
func (p *page) flushConsole() []string {
	p.mu.Lock()
	p.flushes++
	mark := fmt.Sprintf("%s %d", consoleMark, p.flushes)
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, 5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](fmt.Sprintf("console.debug(%q)", mark))); err == nil {
		for done := false; !done; {
			select {
			case m := <-p.marks:
				done = m == mark
			case <-ctx.Done():
				done = true
			}
		}
	}
	return p.consoleErrors()
}

// consoleErrors returns the console errors and uncaught exceptions of the tab so far, except
// those allowConsole expects.
func (p *page) consoleErrors() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.console {
		if !slices.ContainsFunc(p.allowed, func(a string) bool { return strings.Contains(m, a) }) {
			out = append(out, m)
		}
	}
	return out
}

// allowConsole makes console errors that contain text expected: a test that makes the browser
// load a page answered with an error status, say.
func (p *page) allowConsole(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allowed = append(p.allowed, text)
}

// do runs actions in the tab, failing the test if one fails.
func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// open navigates the tab to path (relative to the server's URL), waits for the page to load,
// and fails the test unless it was answered 200 OK.
func (p *page) open(path string) {
	p.t.Helper()
	resp, err := chromedp.Run(p.ctx, chromedp.NavigateResponse(p.base+path))
	if err != nil {
		p.t.Fatalf("opening %s: %v", path, err)
	}
	if resp.Status != http.StatusOK {
		p.t.Fatalf("opening %s: status %d %s\n%s", path, resp.Status, resp.StatusText, p.describe())
	}
}

// follow clicks the first visible element matching the CSS selector (a link, a form's button),
// waits for the page it leads to (after any redirect) to load, and fails the test unless that
// page was answered 200 OK.
func (p *page) follow(sel string) {
	p.t.Helper()
	p.waitVisible(sel)
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	for {
		resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
		if isStaleNode(err) {
			continue // a live update swapped the element for a fresh copy between query and click
		}
		if err != nil {
			p.t.Fatalf("clicking %s and waiting for the next page: %v\n%s", sel, err, p.describe())
		}
		if resp.Status != http.StatusOK {
			p.t.Fatalf("clicking %s: status %d %s\n%s", sel, resp.Status, resp.StatusText, p.describe())
		}
		return
	}
}

// isStaleNode reports whether err says that the element an action found left the page before
// the action was done with it: a live update replaced it.
func isStaleNode(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "Could not find node with given id") ||
		strings.Contains(err.Error(), "No node with given id found"))
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
	ctx, cancel := context.WithTimeout(p.ctx, waitTimeout)
	defer cancel()
	for {
		err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
		if isStaleNode(err) {
			continue // a live update swapped the element for a fresh copy between query and click
		}
		if err != nil {
			p.t.Fatalf("clicking %s: %v\n%s", sel, err, p.describe())
		}
		return
	}
}

// unfold opens the <details> element matching the CSS selector by clicking its summary. A live
// update that swaps the region between the click's press and release loses the click (the press
// and the release land on different elements), so it clicks again until the element is open.
func (p *page) unfold(sel string) {
	p.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		p.click(sel + " summary")
		ctx, cancel := context.WithTimeout(p.ctx, time.Second)
		_, err := chromedp.Run(ctx, chromedp.PollFunction[any](`(sel) => {
			const d = document.querySelector(sel);
			return d && d.open ? true : null;
		}`, chromedp.WithPollingArgs(sel), chromedp.WithPollingInterval(50*time.Millisecond)))
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s did not open: %v\n%s", sel, err, p.describe())
		}
	}
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

// waitExact waits up to waitTimeout for the text of an element matching the CSS selector to be
// want, leading and trailing spaces aside.
func (p *page) waitExact(sel, want string) {
	p.t.Helper()
	p.waitJS(fmt.Sprintf("text %q in %s", want, sel), `(sel, want) => {
		for (const e of document.querySelectorAll(sel)) {
			if (e.innerText.trim() === want) return true;
		}
		return false;
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

// holdRequest makes the tab hold back the next request whose URL matches pattern (wildcards *
// and ?): it waits up to waitTimeout for the page to make it, and returns a function that lets
// it go on. Requests after that one are not held.
func (p *page) holdRequest(pattern string, trigger func()) (release func()) {
	p.t.Helper()
	ctx, cancel := context.WithCancel(p.ctx)
	held := make(chan fetch.RequestID, 1)
	done := make(chan struct{})
	paused := chromedp.Events(ctx, fetch.RequestPaused)
	go func() {
		defer close(done)
		for ev, err := range paused {
			if err != nil {
				return
			}
			held <- ev.RequestID
			return
		}
	}()
	p.t.Cleanup(func() {
		cancel()
		<-done
	})
	p.do("holding requests to "+pattern, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, fetch.Enable, fetch.EnableParams{
			Patterns: []*fetch.RequestPattern{{URLPattern: pattern}},
		})
		return err
	}))
	trigger()
	var id fetch.RequestID
	select {
	case id = <-held:
	case <-time.After(waitTimeout):
		p.t.Fatalf("the page made no request to %s within %s\n%s", pattern, waitTimeout, p.describe())
	}
	return func() {
		p.t.Helper()
		p.do("releasing the request to "+pattern, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			if _, err := cdp.Call(ctx, t, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: id}); err != nil {
				return err
			}
			_, err := cdp.Call(ctx, t, fetch.Disable, cdp.Empty{})
			return err
		}))
	}
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
