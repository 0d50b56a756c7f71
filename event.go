package pgqueue

import (
	"log/slog"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// EventKind says what an Event reports.
type EventKind string

// The kinds of Event a worker reports through WorkerOptions.OnEvent.
const (
	// EventCompleted: a job succeeded and was settled in the table.
	EventCompleted EventKind = "completed"
	// EventRetrying: an attempt failed (Err) and the job will run again at RunAt.
	EventRetrying EventKind = "retrying"
	// EventFailed: the last attempt failed (Err); the job ended failed and stays in the table.
	EventFailed EventKind = "failed"
	// EventLockLost: the worker lost a job's lock (its lease ran out, or the row was changed or
	// deleted under it). The handler's context was cancelled with ErrLockLost and the attempt's
	// outcome is discarded; whoever holds the job now decides it.
	EventLockLost EventKind = "lock_lost"
	// EventDrained: the queue had no runnable job left and every job this worker took was
	// settled. Reported once each time the worker goes from busy to idle, and at start when the
	// queue is empty.
	EventDrained EventKind = "drained"
	// EventSnoozed: the handler returned Snooze; the job runs again at RunAt, attempt not charged.
	EventSnoozed EventKind = "snoozed"
	// EventCancelled: a running job was cancelled (Queue.Cancel, or Queue.Delete with Cancel);
	// the handler's context was cancelled with ErrCancelled and its outcome is discarded.
	EventCancelled EventKind = "cancelled"
	// EventError: the worker could not reach the database or a statement failed (Err). The
	// worker keeps going and retries with back-off; no job is lost.
	EventError EventKind = "error"
)

// Event is something that happened in a worker. Job fields are zero for EventDrained and
// EventError.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Queue is the worker's queue.
	Queue string
	// JobID is the job concerned.
	JobID ulid.ULID
	// Attempt is the attempt concerned, counted from 1.
	Attempt int
	// Err is the attempt's error (EventRetrying, EventFailed), or the worker's (EventError).
	Err error
	// RunAt is when the job may run again (EventRetrying, EventSnoozed).
	RunAt time.Time
	// RepeatedAs is the id of the job's next run, enqueued when it completed (EventCompleted of
	// a repeating job); zero otherwise.
	RepeatedAs ulid.ULID
	// Elapsed is how long the handler ran (EventCompleted, EventRetrying, EventFailed).
	Elapsed time.Duration
}

// emitter hands a worker's events to its OnEvent, in order, from a goroutine of its own. Events
// wait in memory until OnEvent takes them, so no loop of the runtime (nor the listener) ever
// waits for user code: a slow or blocking OnEvent delays only the later events of its worker.
type emitter struct {
	queue string
	fn    func(Event) // nil: events are dropped at once
	log   *slog.Logger

	mu      sync.Mutex
	pending []Event
	closing bool
	wake    chan struct{}
	done    chan struct{} // closed when the delivering goroutine has returned
}

func newEmitter(queue string, fn func(Event), log *slog.Logger) *emitter {
	return &emitter{queue: queue, fn: fn, log: log, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

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
	ev.Queue = e.queue
	e.mu.Lock()
	e.pending = append(e.pending, ev)
	e.mu.Unlock()
	signal(e.wake)
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
	signal(e.wake)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-e.done:
		return true
	case <-t.C:
		return false
	}
}
