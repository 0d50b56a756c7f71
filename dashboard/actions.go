package dashboard

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/pgqueue/pgqueue"
)

// pause pauses the queue the path names and goes back to its page.
func (h *Handler) pause(w http.ResponseWriter, r *http.Request) {
	q, ok := h.queueOf(w, r)
	if !ok {
		return
	}
	if err := q.Pause(r.Context()); err != nil {
		h.serverError(w, r, "pause the queue", err)
		return
	}
	seeOther(w, r, "queues/"+pathEscape(q.Name()), "paused", 0)
}

// resume resumes the queue the path names and goes back to its page.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	q, ok := h.queueOf(w, r)
	if !ok {
		return
	}
	if err := q.Resume(r.Context()); err != nil {
		h.serverError(w, r, "resume the queue", err)
		return
	}
	seeOther(w, r, "queues/"+pathEscape(q.Name()), "resumed", 0)
}

// setLimits sets the queue's limits from the form: whole numbers (empty or 0: no limit) and
// durations ("1m", "500ms").
func (h *Handler) setLimits(w http.ResponseWriter, r *http.Request) {
	q, ok := h.queueOf(w, r)
	if !ok {
		return
	}
	l, err := limitsOf(r)
	if err == nil {
		err = q.SetLimits(r.Context(), l)
	}
	switch {
	case errors.Is(err, pgqueue.ErrInvalidOption) || errors.Is(err, errForm):
		h.fail(w, r, http.StatusBadRequest, "Limits not saved: "+err.Error())
		return
	case err != nil:
		h.serverError(w, r, "set the queue's limits", err)
		return
	}
	seeOther(w, r, "queues/"+pathEscape(q.Name()), "limits", 0)
}

// errForm marks a form field that does not parse.
var errForm = errors.New("invalid form field")

// limitsOf reads Limits from the form.
func limitsOf(r *http.Request) (pgqueue.Limits, error) {
	var l pgqueue.Limits
	var err error
	num := func(name string) int {
		s := strings.TrimSpace(r.PostFormValue(name))
		if s == "" || err != nil {
			return 0
		}
		n, perr := strconv.Atoi(s)
		if perr != nil {
			err = &fieldError{name, "a whole number"}
		}
		return n
	}
	dur := func(name string) time.Duration {
		s := strings.TrimSpace(r.PostFormValue(name))
		if s == "" || err != nil {
			return 0
		}
		d, perr := time.ParseDuration(s)
		if perr != nil {
			err = &fieldError{name, `a duration such as "1s" or "5m"`}
		}
		return d
	}
	l.MaxRunning, l.KeyMaxRunning = num("max_running"), num("key_max_running")
	l.Rate = pgqueue.Rate{Starts: num("rate_starts"), Per: dur("rate_per")}
	l.KeyRate = pgqueue.Rate{Starts: num("key_rate_starts"), Per: dur("key_rate_per")}
	return l, err
}

// fieldError is a form field that does not parse.
type fieldError struct{ field, want string }

func (e *fieldError) Error() string { return e.field + ": want " + e.want }
func (e *fieldError) Unwrap() error { return errForm }

// jobAction returns the handler of a single job's action: a (retry, cancel or delete).
func (h *Handler) jobAction(a Action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, ok := h.parseID(w, r, r.PathValue("id"))
		if !ok {
			return
		}
		var err error
		var flash string
		switch a {
		case ActionRetry:
			err, flash = h.client.RetryJob(r.Context(), id), "retried"
		case ActionCancel:
			err, flash = h.client.CancelJob(r.Context(), id), "cancelled"
		case ActionDelete:
			err, flash = h.client.DeleteJob(r.Context(), id, &pgqueue.DeleteOptions{Cancel: true}), "deleted"
		}
		switch {
		case errors.Is(err, pgqueue.ErrNotFound):
			h.fail(w, r, http.StatusNotFound, "No job "+id.String()+".")
		case errors.Is(err, pgqueue.ErrJobRunning), errors.Is(err, pgqueue.ErrJobFinished), errors.Is(err, pgqueue.ErrDuplicate):
			h.fail(w, r, http.StatusConflict, "Not done: "+err.Error())
		case err != nil:
			h.serverError(w, r, string(a)+" the job", err)
		case a == ActionDelete: // back to the job's queue, which the form names, or the overview
			target := ""
			if q := r.PostFormValue("queue"); pgqueue.ValidateQueueName(q) == nil {
				target = "queues/" + pathEscape(q)
			}
			seeOther(w, r, target, flash, 0)
		default:
			seeOther(w, r, "jobs/"+id.String(), flash, 0)
		}
	}
}
