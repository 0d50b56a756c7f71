package dashboard

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Action is what a request asks to do; Options.Authorize decides whether it may.
type Action string

// The actions Options.Authorize is asked about.
const (
	// ActionView: see a page of the dashboard (counts, job lists, a job's errors and timings).
	// Asked on every request but those of the embedded assets.
	ActionView Action = "view"
	// ActionViewPayload: see jobs' payloads and metadata (and the trace id metadata carries).
	// Refused, the pages show that they are hidden.
	ActionViewPayload Action = "view_payload"
	// ActionPause and ActionResume: pause or resume a queue.
	ActionPause  Action = "pause"
	ActionResume Action = "resume"
	// ActionSetLimits: change a queue's limits.
	ActionSetLimits Action = "set_limits"
	// ActionRetry, ActionCancel and ActionDelete: retry, cancel or delete one job.
	ActionRetry  Action = "retry"
	ActionCancel Action = "cancel"
	ActionDelete Action = "delete"
	// ActionBulkRetry, ActionBulkCancel and ActionBulkDelete: retry, cancel or delete every job
	// a filter selects. ActionBulkRetry and ActionBulkCancel are also asked for Retry workflow
	// and Cancel workflow, which act on every failed or cancelled, or every unfinished, job of a
	// workflow.
	ActionBulkRetry  Action = "bulk_retry"
	ActionBulkCancel Action = "bulk_cancel"
	ActionBulkDelete Action = "bulk_delete"
)

// changes are the actions that change state: refused in read-only mode.
var changes = []Action{ActionPause, ActionResume, ActionSetLimits, ActionRetry, ActionCancel,
	ActionDelete, ActionBulkRetry, ActionBulkCancel, ActionBulkDelete}

// Defaults of Options.
const (
	// PageSizeDefault is the default of Options.PageSize.
	PageSizeDefault = 50
	// PageSizeMax is the largest Options.PageSize.
	PageSizeMax = 1000
	// SampleEveryDefault is the default of Options.SampleEvery.
	SampleEveryDefault = 2 * time.Second
	// HistoryDefault is the default of Options.History.
	HistoryDefault = 15 * time.Minute
	// maxSamples bounds History / SampleEvery: the memory the charts keep per queue.
	maxSamples = 10_000
)

// Options configure a Handler. A nil *Options means defaults; a zero Options is valid.
type Options struct {
	// ReadOnly removes every state-changing route (a POST is answered 403) and every action
	// button. Defaults to false.
	ReadOnly bool

	// Authorize, if set, is asked before anything is shown or done: with ActionView for every
	// page and event stream, ActionViewPayload before payloads and metadata are shown, and the
	// action's own Action before each change. A non-nil error refuses: the request is answered
	// 403 with the error's message (payloads are hidden instead, the rest of the page shown).
	// It is also asked, while a page renders, which action buttons to show. It runs on the
	// request's goroutine and may read the request (its user, its path). It is not
	// authentication: mount the Handler behind the application's own. Defaults to nil: allow
	// everything.
	Authorize func(r *http.Request, a Action) error

	// TrustedOrigins are origins (e.g. "https://admin.example.com") allowed to send
	// state-changing requests besides the dashboard's own, for a deployment where a proxy
	// rewrites the Host header: see http.CrossOriginProtection.AddTrustedOrigin. Defaults to
	// none.
	TrustedOrigins []string

	// AllowedHosts, if set, are the only hosts the Handler answers to: a request whose Host
	// header names another, whatever its port, is refused with 421 Misdirected Request before
	// anything is read or done. Names are compared without regard to case; an IPv6 address may
	// be written with or without brackets; no port. For a dashboard served without login on a
	// loopback address, e.g. {"localhost", "127.0.0.1", "::1"}: a site whose name is rebound to
	// that address (DNS rebinding) is same-origin with the dashboard for the browser, and only
	// the Host header tells it apart. Defaults to none: every host.
	AllowedHosts []string

	// PageSize is how many jobs a page of a queue lists. Defaults to PageSizeDefault; at most
	// PageSizeMax.
	PageSize int

	// SampleEvery is how often the Handler reads every queue's stats for the overview's charts,
	// and so how often an open overview, or a page showing a running workflow, refreshes while
	// visible, whether or not a job changed (other pages refresh on changes; their times and
	// waits count on in the browser).
	// Defaults to SampleEveryDefault; at least 100ms.
	SampleEvery time.Duration

	// History is how far back the overview's charts go. Defaults to HistoryDefault; at least
	// SampleEvery, at most 10,000 samples.
	History time.Duration

	// Logger receives the Handler's diagnostics (failed samples, a watch that cannot start);
	// never payloads. Defaults to slog.Default().
	Logger *slog.Logger
}

// withDefaults returns o with every unset field set to its default.
func (o Options) withDefaults() Options {
	o.PageSize = cmp.Or(o.PageSize, PageSizeDefault)
	o.SampleEvery = cmp.Or(o.SampleEvery, SampleEveryDefault)
	o.History = cmp.Or(o.History, HistoryDefault)
	o.Logger = cmp.Or(o.Logger, slog.Default())
	return o
}

// validate checks o, with its defaults applied.
func (o Options) validate() error {
	switch {
	case o.PageSize < 1 || o.PageSize > PageSizeMax:
		return fmt.Errorf("dashboard: Options.PageSize %d is out of range (1 to %d)", o.PageSize, PageSizeMax)
	case o.SampleEvery < 100*time.Millisecond:
		return fmt.Errorf("dashboard: Options.SampleEvery %s is below 100ms", o.SampleEvery)
	case o.History < o.SampleEvery:
		return fmt.Errorf("dashboard: Options.History %s is shorter than Options.SampleEvery %s", o.History, o.SampleEvery)
	case o.History/o.SampleEvery > maxSamples:
		return fmt.Errorf("dashboard: Options.History %s holds more than %d samples of %s", o.History, maxSamples, o.SampleEvery)
	}
	for _, host := range o.AllowedHosts {
		if _, _, err := net.SplitHostPort(host); err == nil || hostName(host) == "" {
			return fmt.Errorf("dashboard: Options.AllowedHosts: %q is not a host without a port", host)
		}
	}
	return nil
}
