package pgqueue

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// EventKind says what an Event reports.
type EventKind string

// The kinds of Event a worker reports through WorkerOptions.OnEvent.
const (
	// EventStarted: a handler began an attempt of a job (Attempt, MaxAttempts).
	EventStarted EventKind = "started"
	// EventCompleted: a job succeeded and was settled in the table (Elapsed). A job its handler
	// completed with Job.CompleteTx, in a transaction that committed, is reported completed
	// whatever the handler did after: an error it returned, or a panic, is logged, not reported.
	EventCompleted EventKind = "completed"
	// EventRetrying: an attempt failed (Err, Elapsed) and the job will run again at RunAt.
	EventRetrying EventKind = "retrying"
	// EventFailed: the last attempt failed (Err, Elapsed); the job ended failed and stays in the
	// table.
	EventFailed EventKind = "failed"
	// EventLockLost: the worker lost a job's lock (its lease ran out, or the row was changed or
	// deleted under it). Found while the handler ran, its context was cancelled with ErrLockLost;
	// found when its outcome was to be saved, the handler had returned already. Either way the
	// attempt's outcome is discarded; whoever holds the job now decides it.
	EventLockLost EventKind = "lock_lost"
	// EventDrained: the queue had no runnable job left and every job this worker took was
	// settled. Reported once each time the worker goes from busy to idle, and at start when the
	// queue is empty.
	EventDrained EventKind = "drained"
	// EventSnoozed: the handler returned Snooze (Elapsed); the job runs again at RunAt, attempt
	// not charged.
	EventSnoozed EventKind = "snoozed"
	// EventCancelled: a running job was cancelled (Queue.Cancel, or Queue.Delete with Cancel);
	// the handler's context was cancelled with ErrCancelled and its outcome is discarded.
	EventCancelled EventKind = "cancelled"
	// EventHandedBack: the job went back to the queue before it was done, without charging the
	// attempt: its handler was stopped by shutdown (Elapsed), or it never started (Elapsed zero):
	// it was claimed as shutdown began, or, claimed ahead of a free slot, it waited for one longer
	// than a job claimed ahead may, or its queue was paused meanwhile. It is runnable at RunAt;
	// Attempt is the attempt that did not count, and the job's next run is that attempt again.
	EventHandedBack EventKind = "handed_back"
	// EventError: the worker could not reach the database or a statement failed (Err). The
	// worker keeps going and retries with back-off; no job is lost.
	EventError EventKind = "error"
)

// Event is something that happened in a worker: what a log line or a metric needs. Fields that do
// not apply to its Kind are zero: the job fields for EventDrained and EventError, Elapsed for
// EventStarted, RunAt except for EventRetrying, EventSnoozed and EventHandedBack.
//
// Event marshals to JSON an API can return as is: lower-case snake_case names, zero fields left
// out, Err as its message and Elapsed as a duration string (time.Duration.String, e.g.
// "1.502s"). For example:
//
//	{"kind":"retrying","queue":"emails","job_id":"01JD6Y9QK4B3Z8X1V0W2T5R7NM","attempt":1,
//	 "max_attempts":25,"error":"smtp: 451 try later","run_at":"2026-11-29T14:00:03.2Z",
//	 "elapsed":"212.5ms","worker_id":"web-1-4412-9f3a2c"}
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Queue is the worker's queue.
	Queue string
	// JobID is the job concerned.
	JobID ulid.ULID
	// Attempt is the attempt concerned, counted from 1.
	Attempt int
	// MaxAttempts is how many attempts the job may use in all.
	MaxAttempts int
	// Err is the attempt's error (EventRetrying, EventFailed), or the worker's (EventError).
	Err error
	// RunAt is when the job may run again (EventRetrying, EventSnoozed, EventHandedBack), by
	// the database's clock.
	RunAt time.Time
	// RepeatedAs is the id of the job's next run, enqueued when it completed (EventCompleted of
	// a repeating job); zero otherwise.
	RepeatedAs ulid.ULID
	// Elapsed is how long the handler ran: until it returned (EventCompleted, EventRetrying,
	// EventFailed, EventSnoozed, EventHandedBack, and EventLockLost found when the outcome was
	// to be saved), or until the worker gave it up (EventCancelled, EventLockLost found while it
	// ran).
	Elapsed time.Duration
	// WorkerID is the client's Config.ID: the process that ran the job, as pgqueue_jobs.locked_by
	// names it while the job runs.
	WorkerID string
}

// eventJSON is the JSON form of an Event.
type eventJSON struct {
	Kind        EventKind `json:"kind"`
	Queue       string    `json:"queue,omitempty"`
	JobID       ulid.ULID `json:"job_id,omitzero"`
	Attempt     int       `json:"attempt,omitempty"`
	MaxAttempts int       `json:"max_attempts,omitempty"`
	Error       string    `json:"error,omitempty"`
	RunAt       time.Time `json:"run_at,omitzero"`
	RepeatedAs  ulid.ULID `json:"repeated_as,omitzero"`
	Elapsed     string    `json:"elapsed,omitempty"`
	WorkerID    string    `json:"worker_id,omitempty"`
}

// MarshalJSON encodes the event as the Event documentation shows.
func (e Event) MarshalJSON() ([]byte, error) {
	j := eventJSON{Kind: e.Kind, Queue: e.Queue, JobID: e.JobID, Attempt: e.Attempt,
		MaxAttempts: e.MaxAttempts, RunAt: e.RunAt, RepeatedAs: e.RepeatedAs, WorkerID: e.WorkerID}
	if e.Err != nil {
		j.Error = e.Err.Error()
	}
	if e.Elapsed != 0 {
		j.Elapsed = e.Elapsed.String()
	}
	return json.Marshal(j)
}

// UnmarshalJSON decodes what MarshalJSON encodes. Err becomes an error with the same message,
// which no longer matches the sentinels with errors.Is.
func (e *Event) UnmarshalJSON(data []byte) error {
	var j eventJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return fmt.Errorf("pgqueue: decode event: %w", err)
	}
	ev := Event{Kind: j.Kind, Queue: j.Queue, JobID: j.JobID, Attempt: j.Attempt,
		MaxAttempts: j.MaxAttempts, RunAt: j.RunAt, RepeatedAs: j.RepeatedAs, WorkerID: j.WorkerID}
	if j.Error != "" {
		ev.Err = errors.New(j.Error)
	}
	if j.Elapsed != "" {
		d, err := time.ParseDuration(j.Elapsed)
		if err != nil {
			return fmt.Errorf("pgqueue: decode event: elapsed: %w", err)
		}
		ev.Elapsed = d
	}
	*e = ev
	return nil
}

// emitter hands a worker's events to its OnEvent, in order, from a goroutine of its own. Events
// wait in memory until OnEvent takes them, so no loop of the runtime (nor the listener) ever
// waits for user code: a slow or blocking OnEvent delays only the later events of its worker.
type emitter struct {
	queue    string
	workerID string
	fn       func(Event) // nil: events are dropped at once
	log      *slog.Logger

	mu      sync.Mutex
	pending []Event
	closing bool
	wake    wakeup
	done    chan struct{} // closed when the delivering goroutine has returned
}

func newEmitter(queue, workerID string, fn func(Event), log *slog.Logger) *emitter {
	return &emitter{queue: queue, workerID: workerID, fn: fn, log: log,
		wake: newWakeup(), done: make(chan struct{})}
}

// active reports whether events are delivered: callers build events only if so.
func (e *emitter) active() bool { return e.fn != nil }

// start starts the delivering goroutine.
func (e *emitter) start() {
	if e.fn == nil {
		close(e.done)
		return
	}
	go e.deliver()
}

// emit queues ev for OnEvent. It never blocks.
func (e *emitter) emit(ev Event) {
	if e.fn == nil {
		return
	}
	ev.Queue, ev.WorkerID = e.queue, e.workerID
	e.mu.Lock()
	e.pending = append(e.pending, ev)
	e.mu.Unlock()
	e.wake.signal()
}

// emitAll queues evs for OnEvent, in order, taking the lock once. It never blocks.
func (e *emitter) emitAll(evs []Event) {
	if e.fn == nil || len(evs) == 0 {
		return
	}
	for i := range evs {
		evs[i].Queue, evs[i].WorkerID = e.queue, e.workerID
	}
	e.mu.Lock()
	e.pending = append(e.pending, evs...)
	e.mu.Unlock()
	e.wake.signal()
}

// deliver calls OnEvent with each queued event until close has been called and none is left.
func (e *emitter) deliver() {
	defer close(e.done)
	for {
		e.mu.Lock()
		batch, closing := e.pending, e.closing
		e.pending = nil
		e.mu.Unlock()
		for _, ev := range batch {
			e.call(ev)
		}
		if len(batch) == 0 {
			if closing {
				return
			}
			<-e.wake
		}
	}
}

// call calls OnEvent. A panic there is logged, not spread.
func (e *emitter) call(ev Event) {
	defer func() {
		if v := recover(); v != nil {
			e.log.Error("pgqueue: OnEvent panicked", "event", ev.Kind, "panic", v)
		}
	}()
	e.fn(ev)
}

// close lets the delivering goroutine end once every queued event is delivered, and waits up to
// timeout for that; it reports whether it ended.
func (e *emitter) close(timeout time.Duration) bool {
	e.mu.Lock()
	e.closing = true
	e.mu.Unlock()
	e.wake.signal()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-e.done:
		return true
	case <-t.C:
		return false
	}
}

// bothOnEvent returns the OnEvent of a worker whose own is worker and whose client's is client:
// worker's, then client's; nil when neither is set, so that a worker nobody listens to emits
// nothing.
func bothOnEvent(worker, client func(Event)) func(Event) {
	switch {
	case client == nil:
		return worker
	case worker == nil:
		return client
	}
	return func(ev Event) {
		worker(ev)
		client(ev)
	}
}
