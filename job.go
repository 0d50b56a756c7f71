package pgqueue

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// Status is the state of a job, as stored in pgqueue_jobs.status.
type Status string

// The states of a job. A job is live while scheduled, available or running.
const (
	// StatusScheduled: waiting for its run_at (a delayed job, or a retry backing off).
	StatusScheduled Status = "scheduled"
	// StatusAvailable: runnable now, waiting for a worker.
	StatusAvailable Status = "available"
	// StatusRunning: leased by a worker, whose heartbeats keep lock_until in the future.
	StatusRunning Status = "running"
	// StatusCompleted: succeeded (kept only when retention is configured; by default a
	// succeeded job is deleted).
	StatusCompleted Status = "completed"
	// StatusFailed: its last attempt failed; it stays in the table with every attempt's error.
	StatusFailed Status = "failed"
	// StatusCancelled: cancelled before it could succeed.
	StatusCancelled Status = "cancelled"
)

// AttemptError is one failed attempt of a job, as kept in pgqueue_jobs.errors.
type AttemptError struct {
	// Attempt is the number of the attempt that failed, from 1.
	Attempt int `json:"attempt"`
	// At is when the failure was recorded, by the database clock.
	At time.Time `json:"at"`
	// Error is the error's message.
	Error string `json:"error"`
	// Stack is the stack of a handler that panicked; empty otherwise.
	Stack string `json:"stack,omitempty"`
}

// Job is a job of a queue whose payloads have type T.
//
// A handler receives a *Job[T] for the attempt it runs; the enqueue calls return one describing
// the row they wrote.
type Job[T any] struct {
	// ID identifies the job: a ULID, so ids sort by creation time.
	ID ulid.ULID
	// Queue is the name of the job's queue.
	Queue string
	// Payload is the job's data, stored as JSON.
	Payload T
	// Status is the job's state when this value was read.
	Status Status
	// Priority orders runnable jobs: higher runs first, then older ids.
	Priority int
	// Attempt is the number of attempts started so far; a handler sees 1 on the first attempt.
	Attempt int
	// MaxAttempts is how many attempts the job may use before it ends failed.
	MaxAttempts int
	// RunAt is the earliest time the job may run.
	RunAt time.Time
	// CreatedAt is when the job was enqueued, by the database clock.
	CreatedAt time.Time
	// Errors holds the errors of earlier failed attempts, oldest first.
	Errors []AttemptError
}

// jobRow is a claimed job as the claim statement returns it, before its payload is decoded.
type jobRow struct {
	id          ulid.ULID
	priority    int
	attempt     int
	maxAttempts int
	runAt       time.Time
	createdAt   time.Time
	token       [16]byte
	payload     []byte
	errors      []byte
}

// scanJobRow reads one row of the claim statement.
func scanJobRow(rows pgx.CollectableRow) (*jobRow, error) {
	r := new(jobRow)
	err := rows.Scan((*[16]byte)(&r.id), &r.priority, &r.attempt, &r.maxAttempts, &r.runAt,
		&r.createdAt, &r.token, &r.payload, &r.errors)
	return r, err
}

// decodeJob turns a claimed row into the handler's Job. An error means the payload no longer
// decodes into T.
func decodeJob[T any](queue string, r *jobRow) (*Job[T], error) {
	j := &Job[T]{
		ID:          r.id,
		Queue:       queue,
		Status:      StatusRunning,
		Priority:    r.priority,
		Attempt:     r.attempt,
		MaxAttempts: r.maxAttempts,
		RunAt:       r.runAt,
		CreatedAt:   r.createdAt,
	}
	if len(r.errors) > 0 {
		if err := json.Unmarshal(r.errors, &j.Errors); err != nil {
			return nil, fmt.Errorf("pgqueue: decode errors of job %s: %w", r.id, err)
		}
	}
	if err := json.Unmarshal(r.payload, &j.Payload); err != nil {
		return nil, fmt.Errorf("pgqueue: payload of job %s does not decode into %T: %w", r.id, j.Payload, err)
	}
	return j, nil
}
