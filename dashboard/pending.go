package dashboard

import (
	"net/http"
)

// TEMPORARY until the bulk API lands.

func (h *Handler) bulkPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, 200, "bulk", &view{Title: "Bulk actions", Nav: "bulk", Data: &bulkData{}})
}
func (h *Handler) bulkRun(w http.ResponseWriter, r *http.Request) {}

type bulkData struct {
	Queues, Statuses, Withins, Actions []string
	Form                               struct{ Queue, Status, Within, Action string }
	Error                              string
	Review                             *struct{ Count int }
}
