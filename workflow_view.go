package pgqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// ErrWorkflowNotFound is returned for a workflow id the table has no row for: never enqueued,
// or pruned once all its jobs were gone.
var ErrWorkflowNotFound = errors.New("pgqueue: workflow not found")

// WorkflowStatus is where a workflow stands, derived from its jobs.
type WorkflowStatus string

const (
	// WorkflowRunning: some of its jobs have not finished.
	WorkflowRunning WorkflowStatus = "running"
	// WorkflowCompleted: every job completed.
	WorkflowCompleted WorkflowStatus = "completed"
	// WorkflowFailed: every job finished, and some failed or were cancelled.
	WorkflowFailed WorkflowStatus = "failed"
)

// WorkflowInfo is a workflow as read from the table.
type WorkflowInfo struct {
	ID        ulid.ULID         `json:"id"`
	Name      string            `json:"name"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	// FinishedAt is when its last job finished; zero while it runs.
	FinishedAt time.Time      `json:"finished_at,omitzero"`
	Status     WorkflowStatus `json:"status"`
	// Jobs is how many jobs it has; Unfinished how many have not completed, failed or been
	// cancelled (a job deleted before it finished counts as finished).
	Jobs       int `json:"jobs"`
	Unfinished int `json:"unfinished"`
	// Counts is how many of its jobs are in each status, read by Client.Workflow (nil in
	// listings). A job deleted since (by retention, after the workflow finished) counts under "".
	Counts map[Status]int `json:"counts,omitempty"`
	// Steps are its jobs in the order they were added, read by Client.Workflow (nil in listings).
	Steps []WorkflowStep `json:"steps,omitempty"`
}

// WorkflowStep is one job of a workflow, with what it waits for.
type WorkflowStep struct {
	ID   ulid.ULID `json:"id"`
	Name string    `json:"name"`
	// Queue and Status are empty once the job has been deleted.
	Queue       string    `json:"queue,omitempty"`
	Status      Status    `json:"status,omitempty"`
	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	RunAt       time.Time `json:"run_at,omitzero"`
	AttemptedAt time.Time `json:"attempted_at,omitzero"`
	FinishedAt  time.Time `json:"finished_at,omitzero"`
	// LastError is the newest entry of the job's errors: an attempt's error, or why it was
	// cancelled or waits (a parent failed).
	LastError string `json:"last_error,omitempty"`
	// Result is what its handler recorded (Job.SetResult); nil if none.
	Result json.RawMessage `json:"result,omitempty"`
	// After are the jobs it depends on, each with its policy and state.
	After []StepDependency `json:"after,omitempty"`
}

// DependencyState is where one dependency stands.
type DependencyState string

const (
	// DependencyWaiting: the parent has not finished (or failed and the child waits for its
	// retry: WaitForRetry).
	DependencyWaiting DependencyState = "waiting"
	// DependencyMet: the parent completed (or failed, and the child runs anyway: RunDependent).
	DependencyMet DependencyState = "met"
	// DependencyBroken: the parent failed, was cancelled or deleted, and the child's policy was
	// applied.
	DependencyBroken DependencyState = "broken"
)

// StepDependency is one dependency of a step as stored.
type StepDependency struct {
	Job       ulid.ULID       `json:"job"`
	OnFailure OnParentFailure `json:"on_failure"`
	State     DependencyState `json:"state"`
}

// Workflow reads workflow id: its row, the count of its jobs by status, and every step with its
// dependencies. It reads each of its jobs once (by primary key): a workflow of 10⁵ jobs takes a
// moment. ErrWorkflowNotFound if there is no such workflow.
func (c *Client) Workflow(ctx context.Context, id ulid.ULID) (*WorkflowInfo, error) {
	w := &WorkflowInfo{ID: id}
	var finished *time.Time
	var meta, counts []byte
	err := c.pool.QueryRow(ctx, workflowSQL, [16]byte(id)).
		Scan(&w.Name, &w.CreatedAt, &finished, &w.Jobs, &w.Unfinished, &meta, &counts)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, wrapf(ErrWorkflowNotFound, "read workflow %s", id)
	}
	if err != nil {
		return nil, wrapf(err, "read workflow %s", id)
	}
	w.fill(finished, meta)
	if err := json.Unmarshal(counts, &w.Counts); err != nil {
		return nil, wrapf(err, "read workflow %s: counts", id)
	}
	rows, _ := c.pool.Query(ctx, workflowStepsSQL, [16]byte(id))
	if w.Steps, err = pgx.CollectRows(rows, scanWorkflowStep); err != nil {
		return nil, wrapf(err, "read workflow %s: steps", id)
	}
	w.Status = w.status()
	return w, nil
}

// fill sets what the row's nullable columns say.
func (w *WorkflowInfo) fill(finished *time.Time, meta []byte) {
	if finished != nil {
		w.FinishedAt = *finished
	}
	w.Metadata = decodeMetadata(meta)
}

// status derives the workflow's status: from its counts when read, else (in listings) from
// whether it finished, which cannot tell failures.
func (w *WorkflowInfo) status() WorkflowStatus {
	switch {
	case w.Unfinished > 0:
		return WorkflowRunning
	case w.Counts[StatusFailed] > 0 || w.Counts[StatusCancelled] > 0:
		return WorkflowFailed
	}
	return WorkflowCompleted
}

// scanWorkflowStep reads one row of workflow_steps.sql.
func scanWorkflowStep(row pgx.CollectableRow) (WorkflowStep, error) {
	var s WorkflowStep
	var id [16]byte
	var queue, status, lastErr *string
	var attempt, maxAttempts *int
	var runAt, attemptedAt, finishedAt *time.Time
	var result, after []byte
	if err := row.Scan(&id, &s.Name, &queue, &status, &attempt, &maxAttempts, &runAt, &attemptedAt,
		&finishedAt, &lastErr, &result, &after); err != nil {
		return s, err
	}
	s.ID, s.Queue, s.Status, s.LastError = ulid.ULID(id), deref(queue), Status(deref(status)), deref(lastErr)
	s.Attempt, s.MaxAttempts = deref(attempt), deref(maxAttempts)
	s.RunAt, s.AttemptedAt, s.FinishedAt = deref(runAt), deref(attemptedAt), deref(finishedAt)
	if len(result) > 0 {
		s.Result = result
	}
	var deps [][3]string
	if len(after) > 0 {
		if err := json.Unmarshal(after, &deps); err != nil {
			return s, err
		}
	}
	for _, d := range deps {
		parent, ok := parseUUID(d[0])
		if !ok {
			return s, errors.New("dependency: parent " + d[0] + " is no uuid")
		}
		s.After = append(s.After, StepDependency{Job: parent, OnFailure: OnParentFailure(d[1]), State: DependencyState(d[2])})
	}
	return s, nil
}

// WorkflowListOptions select the workflows Client.Workflows returns.
type WorkflowListOptions struct {
	// Unfinished keeps only the workflows that have not finished.
	Unfinished bool
	// Before keeps those with ids below it (the last ID of the previous page). Defaults to none.
	Before ulid.ULID
	// Limit is how many to return at most. Defaults to 100.
	Limit int
}

// Workflows lists workflows, newest first, without their steps and counts (Status says running
// or completed; Client.Workflow tells a failed one). It reads one index range.
func (c *Client) Workflows(ctx context.Context, opts *WorkflowListOptions) ([]WorkflowInfo, error) {
	var o WorkflowListOptions
	if opts != nil {
		o = *opts
	}
	if o.Limit < 0 {
		return nil, invalidf("WorkflowListOptions.Limit %d is negative", o.Limit)
	}
	before := o.Before
	if before == (ulid.ULID{}) {
		before = ulid.ULID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	}
	rows, _ := c.pool.Query(ctx, workflowListSQL, o.Unfinished, [16]byte(before), cmp.Or(o.Limit, 100))
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (WorkflowInfo, error) {
		var w WorkflowInfo
		var id [16]byte
		var finished *time.Time
		var meta []byte
		err := row.Scan(&id, &w.Name, &w.CreatedAt, &finished, &w.Jobs, &w.Unfinished, &meta)
		w.ID = ulid.ULID(id)
		w.fill(finished, meta)
		w.Status = w.status()
		return w, err
	})
	if err != nil {
		return nil, wrapf(err, "list workflows")
	}
	return list, nil
}

// CancelWorkflow cancels every job of workflow id that has not finished, as CancelJobs does,
// and returns how many it cancelled. Their dependents outside the workflow follow their policies.
func (c *Client) CancelWorkflow(ctx context.Context, id ulid.ULID) (int, error) {
	return c.CancelJobs(ctx, JobFilter{Workflow: id, Statuses: []Status{StatusPending, StatusScheduled, StatusAvailable, StatusRunning}}, nil)
}

// RetryWorkflow retries every failed or cancelled job of workflow id, as RetryJobs does: each
// runs again once the jobs it depends on have completed (those it waits for are retried too),
// and returns how many it retried.
func (c *Client) RetryWorkflow(ctx context.Context, id ulid.ULID) (int, error) {
	return c.RetryJobs(ctx, JobFilter{Workflow: id, Statuses: []Status{StatusFailed, StatusCancelled}}, nil)
}
