package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The dashboard's routes start at its own root ("/", "/queues/emails"), and every link it
// renders is relative, so it must see its paths without the prefix the application mounts it
// under: mux.Handle("/pgqueue/", http.StripPrefix("/pgqueue", h)). Mounted without StripPrefix
// it sees "/pgqueue/queues/emails", which no route takes; what ServeMux would answer, a bare
// "404 page not found", tells nobody why. So a request no route takes, for any method, is
// answered by notFound, which says how to mount the Handler, with the prefix the path shows when
// the rest of the path is one of the dashboard's routes.

// routed reports whether one of the dashboard's routes, for some method, takes path.
func (h *Handler) routed(path string) bool {
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		if _, pattern := h.mux.Handler(&http.Request{Method: method, URL: &url.URL{Path: path}}); pattern != "" {
			return true
		}
	}
	return false
}

// notFound answers a request no route takes: a page saying so when the Handler is mounted
// with StripPrefix (or another handler took a prefix off), else a text saying how to mount it.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	if stripped(r) {
		h.fail(w, r, http.StatusNotFound, "The dashboard has no such page.")
		return
	}
	msg := "404 page not found: the pgqueue dashboard has no page " + r.URL.Path + ".\n"
	prefix := h.prefixOf(r.URL.Path)
	if prefix != "" {
		msg += fmt.Sprintf("It has %s: if it is mounted under %s, it must see its paths without that prefix:\n\n"+
			"\tmux.Handle(%q, http.StripPrefix(%q, h))\n", strings.TrimPrefix(r.URL.Path, prefix), prefix, prefix+"/", prefix)
	} else {
		msg += "If it is mounted under a prefix, it must see its paths without it: " +
			`mux.Handle(prefix+"/", http.StripPrefix(prefix, h))` + "\n"
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, msg, http.StatusNotFound)
}

// prefixOf returns the shortest leading part of path ("/pgqueue") whose rest is a route of the
// dashboard; "" if none is.
func (h *Handler) prefixOf(path string) string {
	for i := 1; i < len(path); i++ {
		if path[i] == '/' && h.routed(path[i:]) {
			return path[:i]
		}
	}
	return ""
}

// stripped reports whether the path r carries differs from the one its client asked for: a
// handler in front (http.StripPrefix) took a prefix off. Without the request line (a request
// made in the program), it reports false.
func stripped(r *http.Request) bool {
	u, err := url.ParseRequestURI(r.RequestURI)
	return err == nil && u.Path != r.URL.Path
}
