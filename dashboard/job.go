package dashboard

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/oklog/ulid/v2"
	"github.com/pgqueue/pgqueue"
)

// jobData is what a job's page shows.
type jobData struct {
	*pgqueue.JobEntry[json.RawMessage]
	Payload  string   // pretty-printed; empty when hidden
	Hidden   bool     // payload, metadata and trace id are hidden from this viewer
	MetaKeys []string // Metadata's keys, sorted
	TraceID  string   // the trace id of a W3C traceparent in the metadata, if any
}

// findJob serves the search box of every page: ?id= redirects to the job's page if there is
// one, else answers a page saying there is none — 200, a search's answer, where the job's page
// answers 404 (a browser writes that status to its console).
func (h *Handler) findJob(w http.ResponseWriter, r *http.Request) {
	id, ok := h.parseID(w, r, r.URL.Query().Get("id"))
	if !ok {
		return
	}
	_, err := h.client.Job(r.Context(), id)
	switch {
	case errors.Is(err, pgqueue.ErrNotFound):
		h.render(w, r, http.StatusOK, "error", &view{Title: "No such job", Data: noJob(id)})
	case err != nil:
		h.serverError(w, r, "look the job up", err)
	default:
		seeOther(w, r, "jobs/"+id.String(), "", 0)
	}
}

// noJob says that there is no job id.
func noJob(id ulid.ULID) string {
	return "No job " + id.String() + ": it never existed, or it was deleted (a completed job is, at once, unless retention keeps it)."
}

// parseID parses a job id given by the user, or answers 400.
func (h *Handler) parseID(w http.ResponseWriter, r *http.Request, s string) (ulid.ULID, bool) {
	id, err := pgqueue.ParseID(strings.TrimSpace(s))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Not a job id: "+err.Error())
		return id, false
	}
	return id, true
}

// pathJob reads the job the path's id names, answering the request itself (and returning false)
// when the id is malformed (400), no job has it (404) or the read fails (500).
func (h *Handler) pathJob(w http.ResponseWriter, r *http.Request) (*pgqueue.JobEntry[json.RawMessage], bool) {
	id, ok := h.parseID(w, r, r.PathValue("id"))
	if !ok {
		return nil, false
	}
	e, err := h.client.Job(r.Context(), id)
	if errors.Is(err, pgqueue.ErrNotFound) {
		h.fail(w, r, http.StatusNotFound, noJob(id))
		return nil, false
	} else if err != nil {
		h.serverError(w, r, "read the job", err)
		return nil, false
	}
	return e, true
}

// jobPage serves one job: payload, status, every attempt's error, timings and actions.
func (h *Handler) jobPage(w http.ResponseWriter, r *http.Request) {
	e, ok := h.pathJob(w, r)
	if !ok {
		return
	}
	can := h.permissionsOf(r)
	d := &jobData{JobEntry: e, Hidden: !can.Payload}
	if can.Payload {
		d.Payload = prettyJSON(e.RawPayload)
		for k := range e.Metadata {
			d.MetaKeys = append(d.MetaKeys, k)
		}
		slices.Sort(d.MetaKeys)
		d.TraceID = traceID(e.Metadata["traceparent"])
	} else {
		d.Metadata = nil
	}
	d.RawPayload = nil // only Payload is shown, and only if allowed
	h.render(w, r, http.StatusOK, "job", &view{Title: "Job " + e.ID.String(), Queue: e.Queue,
		Flash: flashOf(r), Can: can, Data: d})
}

// prettyJSON indents a stored payload; one that is not valid JSON is shown as it is.
func prettyJSON(raw []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// traceID returns the trace id of a W3C traceparent ("00-<32 hex>-<16 hex>-<2 hex>"), or "" if
// tp is not one or its trace id is all zeros (invalid by the specification).
func traceID(tp string) string {
	parts := strings.Split(strings.TrimSpace(tp), "-")
	if len(parts) < 4 || len(parts[0]) != 2 || parts[0] == "ff" || len(parts[1]) != 32 || len(parts[2]) != 16 {
		return ""
	}
	if parts[0] == "00" && len(parts) != 4 {
		return ""
	}
	id := parts[1]
	if _, err := hex.DecodeString(id); err != nil || id != strings.ToLower(id) || id == strings.Repeat("0", 32) {
		return ""
	}
	return id
}
