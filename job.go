package pgqueue

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// Status is the state of a job, as stored in pgqueue_jobs.status.
type Status string

// The states of a job. A job is live while scheduled, available or running.
const (
	// StatusPending: a step of a workflow (or a job added with dependencies) waiting for the
	// jobs it depends on to finish. No claim sees it until the last of them has.
	StatusPending Status = "pending"
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
// A Job marshals to JSON that an API can return as it is: snake_case names, the payload as T
// marshals it, RepeatEvery as a duration string (e.g. "1m30s"), and zero times and empty fields
// left out. It unmarshals from the same form.
//
// A handler receives a *Job[T] for the attempt it runs, and may call Update and CompleteTx on it;
// the enqueue calls and the listings return Jobs describing rows as they were read.
type Job[T any] struct {
	// ID identifies the job: a ULID, so ids sort by creation time.
	ID ulid.ULID `json:"id"`
	// Queue is the name of the job's queue.
	Queue string `json:"queue"`
	// Payload is the job's data, stored as JSON.
	Payload T `json:"payload"`
	// Status is the job's state when this value was read.
	Status Status `json:"status"`
	// Priority orders runnable jobs: higher runs first, then older ids.
	Priority int `json:"priority"`
	// Attempt is the number of attempts started so far; a handler sees 1 on the first attempt.
	Attempt int `json:"attempt"`
	// MaxAttempts is how many attempts the job may use before it ends failed.
	MaxAttempts int `json:"max_attempts"`
	// RunAt is the earliest time the job may run.
	RunAt time.Time `json:"run_at,omitzero"`
	// CreatedAt is when the job was enqueued, by the database clock.
	CreatedAt time.Time `json:"created_at,omitzero"`
	// AttemptedAt is when its latest attempt started; zero if none has.
	AttemptedAt time.Time `json:"attempted_at,omitzero"`
	// FinishedAt is when it completed, failed or was cancelled; zero while it is live.
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Errors holds the errors of earlier failed attempts, oldest first.
	Errors []AttemptError `json:"errors,omitempty"`
	// UniqueKey is the job's unique key; empty if it has none.
	UniqueKey string `json:"unique_key,omitempty"`
	// Key is the job's flow-control key (EnqueueOptions.Key); empty if it has none.
	Key string `json:"key,omitempty"`
	// Weight is how much of its queue's rate limits the job's start uses (EnqueueOptions.Weight).
	Weight int `json:"weight,omitempty"`
	// RepeatRemaining is how many more runs follow this one when it succeeds; RepeatForever
	// for no end.
	RepeatRemaining int `json:"repeat_remaining,omitempty"`
	// RepeatEvery is the delay before each repeat.
	RepeatEvery time.Duration `json:"repeat_every,omitzero"`
	// LockedBy names the worker running the job (Config.ID); empty unless running.
	LockedBy string `json:"locked_by,omitempty"`
	// LockUntil is the end of the running attempt's lease when this value was read.
	LockUntil time.Time `json:"lock_until,omitzero"`
	// Metadata is what the job was enqueued with (EnqueueOptions.Metadata, and what enqueue
	// middleware added); nil if nothing.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Workflow is the workflow the job is a step of (Client.NewWorkflow), as its handler sees it;
	// zero for a job of no workflow.
	Workflow ulid.ULID `json:"workflow,omitzero"`
	// Duplicate is set on the Job returned by an enqueue with a UniqueKey when a live job of the
	// queue already had that key: that job is returned and nothing was inserted.
	Duplicate bool `json:"duplicate,omitempty"`

	held *attempt // the attempt a handler's Job belongs to; nil on other Jobs
}

// Update saves payload as the job's new payload, under the lock of the running attempt: a later
// attempt of the job (a retry) and its repeats start from it. Use it to checkpoint progress. It
// fails with ErrNotHeld once the attempt has lost its lock, and on a Job no handler holds.
func (j *Job[T]) Update(ctx context.Context, payload T) error {
	if j.held == nil {
		return ErrNotHeld
	}
	rt := j.held.q.rt
	if rt.set.stoppedBy(j.held) != nil {
		// The runtime gave the attempt up (its lease could not be kept, or the job was cancelled):
		// its row may still carry the token until another worker takes it, but its handler's
		// outcome is ignored, and so is what it would save.
		return wrapf(ErrNotHeld, "update job %s: lock lost", j.ID)
	}
	c := rt.c
	body, err := encodePayload(c.cfg, j.Queue, payload)
	if err != nil {
		return err
	}
	tag, err := c.pool.Exec(ctx, updatePayloadSQL, [16]byte(j.ID), j.held.token, body)
	if err != nil {
		return wrapf(err, "update job %s", j.ID)
	}
	if tag.RowsAffected() == 0 {
		return wrapf(ErrNotHeld, "update job %s: lock lost", j.ID)
	}
	j.Payload = payload
	return nil
}

// CompleteTx completes the job inside the caller's transaction tx, under the lock of the running
// attempt: the job's completion (and its next repeat, if any) commits together with whatever
// else tx does, or not at all. When tx commits, the worker does not complete the job again, and
// reports it completed (EventCompleted) even if the handler then returns an error or panics;
// when it rolls back, the job is still the handler's to finish — unless another attempt has
// taken it meanwhile: the worker then learns from the server that tx rolled back, and treats the
// attempt as one that lost its lock (ErrLockLost, EventLockLost). For work whose effects live in
// the same database this gives exactly-once effects.
//
// CompleteTx fails with ErrNotHeld once the attempt has lost its lock, and on a Job no handler
// holds. Call it at most once, from the handler, before the handler returns.
func (j *Job[T]) CompleteTx(ctx context.Context, tx pgx.Tx) error {
	if j.held == nil {
		return ErrNotHeld
	}
	if tx == nil {
		return invalidf("CompleteTx needs a transaction")
	}
	a := j.held
	rt := a.q.rt
	// From here a missing row means "completed in tx", not "lock lost": the heartbeat extends
	// the lease apart and the completer reports the job completed. On any failure the attempt is
	// running again, and its lock is checked as any other's.
	if !rt.set.beginCompleteTx(a) {
		return wrapf(ErrNotHeld, "complete job %s: lock lost", j.ID)
	}
	xact, repeat, err := completeInTx(ctx, tx, a, rt.c.ids.next(1)[0])
	rt.set.endCompleteTx(a, xact, repeat)
	if err != nil {
		return wrapf(err, "complete job %s", j.ID)
	}
	return nil
}

// completeInTx completes a's job in tx, followed by its next run (with id next) if it repeats,
// and returns the transaction's id and the next run's id (zero if none: no repeats left, or a
// live job with its unique key is the next run). It waits for a transaction that locks the row
// (a heartbeat) rather than skip it, as the completer does. The id goes along in the same round
// trip: should the job's row later be found settled by another attempt, the runtime asks whether
// tx committed.
func completeInTx(ctx context.Context, tx pgx.Tx, a *attempt, next ulid.ULID) (xact string, repeat ulid.ULID, err error) {
	b := &pgx.Batch{}
	b.Queue(holdRowSQL, [16]byte(a.id), a.token)
	b.Queue(completeRepeatSQL, [][16]byte{a.id}, [][16]byte{a.token}, [][16]byte{next}, []bool{a.keep()},
		[]*string{a.resultArg()})
	b.Queue(xactIDSQL)
	br := tx.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return "", repeat, err
	}
	rows, _ := br.Query()
	var id, nextRun *[16]byte
	done, err := pgx.ForEachRow(rows, []any{&id, &nextRun}, func() error { return nil })
	if err != nil {
		return "", repeat, err
	}
	if err := br.QueryRow().Scan(&xact); err != nil {
		return "", repeat, err
	}
	if err := br.Close(); err != nil {
		return "", repeat, err
	}
	if done.RowsAffected() == 0 {
		return "", repeat, wrapf(ErrNotHeld, "lock lost")
	}
	if nextRun != nil {
		repeat = *nextRun
	}
	return xact, repeat, nil
}

// jobRow is a claimed job as the claim statement returns it, before its payload is decoded.
type jobRow struct {
	queue           string
	id              ulid.ULID
	priority        int
	attempt         int
	maxAttempts     int
	runAt           time.Time
	createdAt       time.Time
	token           [16]byte
	payload         []byte
	errors          []byte
	uniqueKey       *string
	repeatRemaining int
	repeatEveryUs   *int64
	metadata        []byte
	key             *string
	weight          int
	workflow        *[16]byte // the workflow the job is a step of; nil if none
	watched         bool      // the queue is being watched
	// ahead: claimed ahead of a free slot, its start not recorded by the claim (claimWant.ahead);
	// set by the claim loop, not read from the row.
	ahead bool

	meta        map[string]string // metadata decoded, once metaDecoded
	metaDecoded bool
}

// place returns the row's place in its queue's line.
func (r *jobRow) place() linePos { return linePos{int32(r.priority), r.id} }

// metadataMap returns the row's metadata decoded, decoding it on the first call, so that the
// middleware's JobInfo and the handler's Job share one map. Only the goroutine that handles the
// job calls it.
func (r *jobRow) metadataMap() map[string]string {
	if !r.metaDecoded {
		r.meta, r.metaDecoded = decodeMetadata(r.metadata), true
	}
	return r.meta
}

// scanJobRow reads one row of the claim statement.
func scanJobRow(rows pgx.CollectableRow) (*jobRow, error) {
	r := new(jobRow)
	err := rows.Scan(&r.queue, (*[16]byte)(&r.id), &r.priority, &r.attempt, &r.maxAttempts, &r.runAt,
		&r.createdAt, &r.token, &r.payload, &r.errors, &r.uniqueKey, &r.repeatRemaining,
		&r.repeatEveryUs, &r.metadata, &r.key, &r.weight, &r.workflow, &r.watched)
	return r, err
}

// decodeJob turns a claimed row into the handler's Job. An error means the payload no longer
// decodes into T.
func decodeJob[T any](queue string, r *jobRow) (*Job[T], error) {
	j := &Job[T]{
		ID:              r.id,
		Queue:           queue,
		Status:          StatusRunning,
		Priority:        r.priority,
		Attempt:         r.attempt,
		MaxAttempts:     r.maxAttempts,
		RunAt:           r.runAt,
		CreatedAt:       r.createdAt,
		UniqueKey:       deref(r.uniqueKey),
		Key:             deref(r.key),
		Weight:          r.weight,
		RepeatRemaining: r.repeatRemaining,
		RepeatEvery:     time.Duration(deref(r.repeatEveryUs)) * time.Microsecond,
	}
	if err := decodeErrors(r.id, r.errors, &j.Errors); err != nil {
		return nil, err
	}
	j.Metadata = r.metadataMap()
	if r.workflow != nil {
		j.Workflow = ulid.ULID(*r.workflow)
	}
	if err := decodePayload(r.id, r.payload, &j.Payload); err != nil {
		return nil, err
	}
	return j, nil
}

func deref[V any](p *V) V {
	var zero V
	if p == nil {
		return zero
	}
	return *p
}

func decodeErrors(id ulid.ULID, raw []byte, dst *[]AttemptError) error {
	if len(raw) == 0 {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return wrapf(err, "decode errors of job %s", id)
	}
	return nil
}

func decodePayload[T any](id ulid.ULID, raw []byte, dst *T) error {
	if err := json.Unmarshal(raw, dst); err != nil {
		return wrapf(err, "payload of job %s does not decode into %T", id, *dst)
	}
	return nil
}

// entryRow is a job as the listing and look-up statements return it.
type entryRow struct {
	queue                     string // read by scanEntryRow; set by listQueue, which knows it
	id                        ulid.ULID
	status                    Status
	priority, attempt, maxAtt int
	runAt, createdAt          time.Time
	attemptedAt, finishedAt   *time.Time
	payload, errors           []byte
	uniqueKey                 *string
	repeatRemaining           int
	repeatEveryUs             *int64
	lockedBy                  *string
	lockUntil                 *time.Time
	metadata                  []byte
	key                       *string
	weight                    int
	place                     int
	placeAtLeast              bool
}

// columns returns the scan destinations of an entry's columns, from status to weight, after
// the queue (if withQueue) and id, whose destination is given, and before the place and whether
// it is a lower bound (if withPlace): the column order of job.sql, unique_job.sql, list_*.sql and
// waiting_jobs.sql.
func (r *entryRow) columns(withQueue bool, id any, withPlace bool) []any {
	dest := make([]any, 0, 19)
	if withQueue {
		dest = append(dest, &r.queue)
	}
	dest = append(dest, id, &r.status, &r.priority, &r.attempt, &r.maxAtt, &r.runAt,
		&r.createdAt, &r.attemptedAt, &r.finishedAt, &r.payload, &r.errors, &r.uniqueKey,
		&r.repeatRemaining, &r.repeatEveryUs, &r.lockedBy, &r.lockUntil, &r.metadata, &r.key, &r.weight)
	if withPlace {
		dest = append(dest, &r.place, &r.placeAtLeast)
	}
	return dest
}

// scanEntryRow reads one row of job.sql or unique_job.sql.
func scanEntryRow(row pgx.CollectableRow) (*entryRow, error) {
	r := new(entryRow)
	err := row.Scan(r.columns(true, (*[16]byte)(&r.id), true)...)
	return r, err
}

// scanListRow reads one row of list_*.sql, which carry neither queue nor place.
func scanListRow(row pgx.CollectableRow) (*entryRow, error) {
	r := new(entryRow)
	err := row.Scan(r.columns(false, (*[16]byte)(&r.id), false)...)
	return r, err
}

// JobEntry is a job as a listing or look-up returns it: the Job, its place in line, and, when
// its payload no longer decodes into T, the error (the rest of the entry is still filled in).
// Client.Job and Client.Jobs return entries whose payload is the stored JSON as it is
// (T = json.RawMessage), for code that does not know the job's payload type.
//
// In JSON an entry is its Job's object with "place" added; when the payload did not decode,
// "payload" holds the stored JSON and "payload_error" the error's message.
type JobEntry[T any] struct {
	Job[T]
	// Place is the job's place in its queue: 0 running, 1, 2, … waiting (available jobs in run
	// order, then scheduled ones in due order), -1 finished, or pending (its place is not known
	// until the jobs it depends on have finished).
	Place int `json:"place"`
	// PlaceAtLeast says that Place is a lower bound: a look-up by id (Queue.Job, Client.Job)
	// counts at most PlaceCountMax jobs ahead of the job, so that a job deep in a queue of
	// millions is found in milliseconds. Listings count every place exactly.
	PlaceAtLeast bool `json:"place_at_least,omitempty"`
	// PayloadError is set when the stored payload does not decode into T; Payload is then the
	// zero value and RawPayload holds the stored JSON.
	PayloadError error `json:"payload_error,omitempty"`
	// RawPayload is the payload as stored.
	RawPayload json.RawMessage `json:"-"`
}

// decodeEntry turns a listed row into a JobEntry of queue. A payload that does not decode is
// reported in the entry, not as an error: a listing must show every job.
func decodeEntry[T any](queue string, r *entryRow) (*JobEntry[T], error) {
	e := &JobEntry[T]{
		Job: Job[T]{
			ID:              r.id,
			Queue:           queue,
			Status:          r.status,
			Priority:        r.priority,
			Attempt:         r.attempt,
			MaxAttempts:     r.maxAtt,
			RunAt:           r.runAt,
			CreatedAt:       r.createdAt,
			AttemptedAt:     deref(r.attemptedAt),
			FinishedAt:      deref(r.finishedAt),
			UniqueKey:       deref(r.uniqueKey),
			Key:             deref(r.key),
			Weight:          r.weight,
			RepeatRemaining: r.repeatRemaining,
			RepeatEvery:     time.Duration(deref(r.repeatEveryUs)) * time.Microsecond,
			LockedBy:        deref(r.lockedBy),
			LockUntil:       deref(r.lockUntil),
		},
		Place:        r.place,
		PlaceAtLeast: r.placeAtLeast,
		RawPayload:   r.payload,
	}
	if err := decodeErrors(r.id, r.errors, &e.Errors); err != nil {
		return nil, err
	}
	e.Metadata = decodeMetadata(r.metadata)
	e.PayloadError = decodePayload(r.id, r.payload, &e.Payload)
	return e, nil
}
