package dashboard

import (
	"net"
	"net/http"
	"slices"
	"strings"
)

// The security model, in one place:
//   - Options.Authorize is asked for every page (ActionView), for payloads (ActionViewPayload)
//     and for each change, before anything is read or done.
//   - Changes are POST only; GETs never change anything, so a link or an image tag cannot.
//   - Every POST passes http.CrossOriginProtection, which refuses a request that a browser marks
//     as sent from another site (Sec-Fetch-Site) or whose Origin is not the dashboard's host.
//     Every browser the dashboard supports sends one of the two on a POST. We add no per-form
//     token: it would guard only browsers that send neither, and a token tied to one Handler
//     breaks forms served by one replica and posted to another, or across a restart.
//     Session cookies are the application's; SameSite=Lax or Strict on them adds a second wall.
//   - In read-only mode every POST is refused before the above, and no action is rendered.
//   - With Options.AllowedHosts, a request whose Host is not one of them is refused before
//     anything else: a site rebound to the dashboard's address (DNS rebinding) is same-origin
//     with it for the browser, Origin and Host alike, and only its name tells it apart.

// hostName returns the host of a Host header or an Options.AllowedHosts entry as AllowedHosts
// compares it: without port and brackets, in lower case.
func hostName(host string) string {
	if name, _, err := net.SplitHostPort(host); err == nil {
		host = name
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}

// hostAllowed reports whether r's Host is one of Options.AllowedHosts, or none are set; if not,
// it answers 421.
func (h *Handler) hostAllowed(w http.ResponseWriter, r *http.Request) bool {
	if h.hosts == nil || h.hosts[hostName(r.Host)] {
		return true
	}
	http.Error(w, "Misdirected request: this dashboard does not answer to that host name.", http.StatusMisdirectedRequest)
	return false
}

// viewing wraps a page's handler: it asks Authorize for ActionView first.
func (h *Handler) viewing(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.allowed(w, r, ActionView) {
			return
		}
		next(w, r)
	}
}

// changing wraps the handler of a state change with the read-only check, the cross-origin check
// and, when a is not empty, Authorize's answer for a.
func (h *Handler) changing(a Action, next http.HandlerFunc) http.Handler {
	checked := h.csrf.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.allowed(w, r, ActionView) || (a != "" && !h.allowed(w, r, a)) {
			return
		}
		next(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.opts.ReadOnly {
			h.fail(w, r, http.StatusForbidden, "This dashboard is read-only: it makes no changes.")
			return
		}
		checked.ServeHTTP(w, r)
	})
}

// allowed asks Authorize whether r may do a, and answers 403 with its reason if not.
func (h *Handler) allowed(w http.ResponseWriter, r *http.Request, a Action) bool {
	if h.opts.Authorize == nil {
		return true
	}
	if err := h.opts.Authorize(r, a); err != nil {
		h.fail(w, r, http.StatusForbidden, "Not allowed ("+string(a)+"): "+err.Error())
		return false
	}
	return true
}

// may reports whether r may do a, without answering: for what a page shows.
func (h *Handler) may(r *http.Request, a Action) bool {
	if h.opts.ReadOnly && slices.Contains(changes, a) {
		return false
	}
	return h.opts.Authorize == nil || h.opts.Authorize(r, a) == nil
}

// permissions are the actions a page may offer its viewer, by name, for the templates.
type permissions struct {
	Payload, Pause, Resume, SetLimits, Retry, Cancel, Delete, BulkRetry, BulkCancel, BulkDelete bool
}

// Any reports whether any change is allowed: whether to render action forms at all.
func (p permissions) Any() bool {
	return p.Pause || p.Resume || p.SetLimits || p.Retry || p.Cancel || p.Delete || p.Bulk()
}

// Bulk reports whether any bulk action is allowed.
func (p permissions) Bulk() bool { return p.BulkRetry || p.BulkCancel || p.BulkDelete }

// permissionsOf asks Authorize about every action for r.
func (h *Handler) permissionsOf(r *http.Request) permissions {
	return permissions{
		Payload: h.may(r, ActionViewPayload), Pause: h.may(r, ActionPause), Resume: h.may(r, ActionResume),
		SetLimits: h.may(r, ActionSetLimits), Retry: h.may(r, ActionRetry), Cancel: h.may(r, ActionCancel),
		Delete: h.may(r, ActionDelete), BulkRetry: h.may(r, ActionBulkRetry),
		BulkCancel: h.may(r, ActionBulkCancel), BulkDelete: h.may(r, ActionBulkDelete),
	}
}
