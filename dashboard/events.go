package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Event-stream timing.
const (
	// eventGap is the least time between two change events to one browser: a burst of changes
	// becomes one event (one refetch) every eventGap.
	eventGap = 250 * time.Millisecond
	// heartbeatEvery is how often an idle stream sends a comment, so proxies keep it open and a
	// closed browser is noticed.
	heartbeatEvery = 15 * time.Second
	// writeTimeout bounds each write to a browser: one that does not read is dropped.
	writeTimeout = 10 * time.Second
)

// events serves the Server-Sent Events stream the pages' script listens to. It sends "status"
// events ({"state":"live","text":"live"}) when the watch's state changes, "change" events
// ({"queues":["emails"]} or {"resync":true}) and, after each of the sampler's samples, "sample"
// events ({}), whether or not a job changed, at most every eventGap, until the browser goes, the
// Handler closes, the server the request came through begins to shut down (see shutdowns), or a
// write fails.
func (h *Handler) events(w http.ResponseWriter, r *http.Request) {
	s, ok := h.hub.join()
	if !ok {
		h.fail(w, r, http.StatusServiceUnavailable, "The dashboard is closed.")
		return
	}
	defer h.hub.leave(s)
	shutdown := h.shutdowns.of(r)
	rc := http.NewResponseController(w)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	send := func(format string, args ...any) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false
		}
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: 2000\n\n") {
		return
	}
	heartbeat := time.NewTicker(heartbeatEvery)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-h.ctx.Done():
			return
		case <-shutdown:
			return
		case <-heartbeat.C:
			if !send(": heartbeat\n\n") {
				return
			}
		case <-s.wake:
			if !send("%s", h.owed(s)) || !h.wait(r, shutdown, eventGap) {
				return
			}
		}
	}
}

// owed renders what s is owed as events.
func (h *Handler) owed(s *stream) string {
	o := s.take()
	queues, resync := o.queues, o.resync
	var out string
	if o.status {
		state, text := h.hub.status()
		b, _ := json.Marshal(map[string]string{"state": string(state), "text": text})
		out += "event: status\ndata: " + string(b) + "\n\n"
	}
	if resync || len(queues) > 0 {
		slices.Sort(queues)
		b, _ := json.Marshal(struct {
			Queues []string `json:"queues,omitempty"`
			Resync bool     `json:"resync,omitempty"`
		}{queues, resync})
		out += "event: change\ndata: " + string(b) + "\n\n"
	}
	if o.sample {
		out += "event: sample\ndata: {}\n\n"
	}
	return out
}

// wait waits d, and reports false if the request or the Handler ended, or shutdown was closed,
// meanwhile.
func (h *Handler) wait(r *http.Request, shutdown <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return false
	case <-h.ctx.Done():
		return false
	case <-shutdown:
		return false
	case <-t.C:
		return true
	}
}
