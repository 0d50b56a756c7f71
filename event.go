package pgqueue

import (
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
