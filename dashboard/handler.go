package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"sync"

	"github.com/pgqueue/pgqueue"
)

//go:embed assets templates
var files embed.FS

// Handler serves the dashboard. It is safe for concurrent use. Make one with New and Close it
// when it is no longer served. Its event streams end when the request ends, when Close is
// called, or when the http.Server they came through begins Shutdown: an open page never holds
// a graceful shutdown.
type Handler struct {
	client  *pgqueue.Client
	opts    Options
	mux     *http.ServeMux
	pages   *pages
	hub     *hub
	sampler *sampler
	csrf    *http.CrossOriginProtection
	hosts   map[string]bool // Options.AllowedHosts by hostName; nil: every host

	shutdowns shutdowns // the servers the event streams came through

	ctx    context.Context // ends at Close: ends the event streams and background goroutines
	cancel context.CancelFunc
	wg     sync.WaitGroup // the sampler's and the hub's goroutines
	once   sync.Once
}

// New returns a Handler showing client's schema. A nil opts means defaults; New checks opts and
// parses the templates, and does no I/O. It starts one goroutine, which reads every queue's stats
// each Options.SampleEvery for the charts, until Close. The client must stay open while the
// Handler is served; live updates need the client to LISTEN (no Config.TransactionPooler without
// Config.ListenConnString). Serve it with http.StripPrefix under a prefix (see the package
// documentation); an http.Server serving it may Shutdown with pages open: their event streams
// end as the shutdown begins.
func New(client *pgqueue.Client, opts *Options) (*Handler, error) {
	if client == nil {
		return nil, errors.New("dashboard: New needs a client")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	csrf := http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if err := csrf.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("dashboard: Options.TrustedOrigins: %w", err)
		}
	}
	p, err := parsePages()
	if err != nil {
		return nil, err
	}
	h := &Handler{client: client, opts: o, pages: p, csrf: csrf}
	for _, host := range o.AllowedHosts {
		if h.hosts == nil {
			h.hosts = map[string]bool{}
		}
		h.hosts[hostName(host)] = true
	}
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusForbidden, "Refused: a request from another site cannot change anything here.")
	}))
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.hub = newHub(h.ctx, watchAll(client), o.Logger, &h.wg)
	h.sampler = newSampler(client, h.hub, o)
	h.routes()
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		h.sampler.run(h.ctx)
	}()
	return h, nil
}

// Close stops the Handler's goroutines — the sampler, the watch and the event streams it feeds,
// which end their responses — and returns once they have ended. Pages served after Close still
// render, without charts or live updates. Close is idempotent.
func (h *Handler) Close() {
	h.once.Do(func() {
		h.cancel()
		h.hub.close()
		h.wg.Wait()
	})
}

// ServeHTTP serves the dashboard's pages, assets, event stream and actions. It returns at once
// but for the event stream, which lasts until the browser goes, Close, or the Shutdown of the
// http.Server the request came through (found in the request's context by
// http.ServerContextKey).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	// The pages load only their own assets and run no inline script or style; no site may frame
	// them (clickjacking).
	hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; "+
		"img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Frame-Options", "DENY")
	hdr.Set("Referrer-Policy", "same-origin")
	if !h.hostAllowed(w, r) {
		return
	}
	if r.URL.Path == "" {
		// Mounted with StripPrefix and asked for the prefix itself ("/pgqueue"): on to
		// "/pgqueue/", relative to the request, so that the pages' relative links resolve under
		// the prefix (ServeMux would redirect to "/", outside it).
		target := path.Base(strings.SplitN(r.RequestURI, "?", 2)[0]) + "/"
		w.Header().Set("Location", target)
		w.WriteHeader(http.StatusMovedPermanently)
		return
	}
	if _, pattern := h.mux.Handler(r); pattern == "" && !h.routed(r.URL.Path) {
		h.notFound(w, r) // ServeMux would say 404 and no more: see notFound
		return
	}
	h.mux.ServeHTTP(w, r)
}

// routes registers every route on h.mux. State changes are POST only and pass the cross-origin
// check; in read-only mode they are refused whatever they are. Cancelling and deleting a job,
// and cancelling and retrying a workflow, ask first, on a page of their own (see confirm.go and
// workflow_actions.go).
func (h *Handler) routes() {
	h.mux = http.NewServeMux()
	assets, _ := fs.Sub(files, "assets")
	h.mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(assets)))
	h.mux.HandleFunc("GET /{$}", h.viewing(h.overview))
	h.mux.HandleFunc("GET /queues/{queue}", h.viewing(h.queuePage))
	h.mux.HandleFunc("GET /jobs", h.viewing(h.findJob))
	h.mux.HandleFunc("GET /jobs/{id}", h.viewing(h.jobPage))
	h.mux.HandleFunc("GET /bulk", h.viewing(h.bulkPage))
	h.mux.HandleFunc("GET /events", h.viewing(h.events))
	h.mux.HandleFunc("GET /jobs/{id}/cancel", h.viewing(h.confirmJob(ActionCancel))) // the question first
	h.mux.HandleFunc("GET /jobs/{id}/delete", h.viewing(h.confirmJob(ActionDelete)))
	h.mux.HandleFunc("GET /workflows", h.viewing(h.workflowsPage))
	h.mux.HandleFunc("GET /workflows/{id}", h.viewing(h.workflowPage))
	h.mux.HandleFunc("GET /workflows/{id}/cancel", h.viewing(h.confirmWorkflow(workflowCancel)))
	h.mux.HandleFunc("GET /workflows/{id}/retry", h.viewing(h.confirmWorkflow(workflowRetry)))

	h.mux.Handle("POST /queues/{queue}/pause", h.changing(ActionPause, h.pause))
	h.mux.Handle("POST /queues/{queue}/resume", h.changing(ActionResume, h.resume))
	h.mux.Handle("POST /queues/{queue}/limits", h.changing(ActionSetLimits, h.setLimits))
	h.mux.Handle("POST /jobs/{id}/retry", h.changing(ActionRetry, h.jobAction(ActionRetry)))
	h.mux.Handle("POST /jobs/{id}/cancel", h.changing(ActionCancel, h.jobAction(ActionCancel)))
	h.mux.Handle("POST /jobs/{id}/delete", h.changing(ActionDelete, h.jobAction(ActionDelete)))
	h.mux.Handle("POST /bulk", h.changing("", h.bulkRun)) // the action is in the form: bulkRun asks
	h.mux.Handle("POST /workflows/{id}/cancel", h.changing(ActionBulkCancel, h.runWorkflowAction(workflowCancel)))
	h.mux.Handle("POST /workflows/{id}/retry", h.changing(ActionBulkRetry, h.runWorkflowAction(workflowRetry)))
}
