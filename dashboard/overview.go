package dashboard

import (
	"net/http"

	"github.com/pgqueue/pgqueue"
)

// overviewData is what the overview shows.
type overviewData struct {
	Stats     *pgqueue.Stats
	Queues    []queueRow
	Schedules []pgqueue.Schedule
}

// queueRow is one queue of the overview: its stats and charts. (Not embedded: the templates
// find an embedded struct's fields by a slow search, a hundred queues' worth on every overview.)
type queueRow struct {
	S      *pgqueue.QueueStats
	Charts drawnCharts
}

// overview serves the queues overview: every queue's counts and charts, what holds vacuum back,
// the schedules and the table's row estimates. Four statements, none of which grows with the
// number of jobs.
func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	st, err := h.client.Stats(r.Context())
	if err != nil {
		h.serverError(w, r, "read the stats", err)
		return
	}
	schedules, err := h.client.Schedules(r.Context())
	if err != nil {
		h.serverError(w, r, "read the schedules", err)
		return
	}
	h.renderOverview(w, r, st, schedules)
}

// renderOverview renders the overview of st and schedules: the queues with their charts, what
// holds vacuum back (a banner, when st.Horizon is set), the schedules and the table.
func (h *Handler) renderOverview(w http.ResponseWriter, r *http.Request, st *pgqueue.Stats, schedules []pgqueue.Schedule) {
	d := &overviewData{Stats: st, Schedules: schedules, Queues: make([]queueRow, len(st.Queues))}
	for i := range st.Queues {
		d.Queues[i] = queueRow{S: &st.Queues[i], Charts: h.sampler.drawn(st.Queues[i].Queue)}
	}
	h.render(w, r, http.StatusOK, "overview", &view{Title: "Queues", Nav: "overview",
		Flash: flashOf(r), Can: h.permissionsOf(r), Data: d})
}

// serverError logs err and answers 500 saying what failed (not err itself, which may name
// database details).
func (h *Handler) serverError(w http.ResponseWriter, r *http.Request, what string, err error) {
	if r.Context().Err() != nil {
		return // the browser left
	}
	h.opts.Logger.Error("dashboard: "+what, "path", r.URL.Path, "error", err)
	h.fail(w, r, http.StatusInternalServerError, "Could not "+what+"; the server's log has the details.")
}
