package pgqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// ErrResultNotKept is returned by Job.SetResult for a job whose row is deleted as it completes
// (its queue keeps no completed jobs, Config.Retention, and it is no step of a workflow): there
// would be nowhere to keep the result.
var ErrResultNotKept = errors.New("pgqueue: result not kept")

// SetResult records v, encoded as JSON, as the job's result: it is written with the job's
// completion, in the same statement, and read by the jobs that depend on it (Job.Parents), by
// Client.AwaitJob, Client.Workflow and the listings. A later call replaces it; a result
// recorded by an attempt that then fails is dropped. It does no I/O. It fails with ErrNotHeld on
// a Job no handler holds, with ErrResultNotKept for a job that is deleted as it completes, and
// for a value that does not encode, or encodes to more than Config.MaxPayloadBytes.
func (j *Job[T]) SetResult(v any) error {
	a := j.held
	if a == nil {
		return ErrNotHeld
	}
	if !a.keep() {
		return wrapf(ErrResultNotKept, "set result of job %s: it is deleted as it completes "+
			"(its queue keeps no completed jobs, Config.Retention, and it is no step of a workflow)", j.ID)
	}
	doc, err := json.Marshal(v)
	if err != nil {
		return wrapf(err, "set result of job %s", j.ID)
	}
	if max := a.q.rt.c.cfg.MaxPayloadBytes; len(doc) > max {
		return wrapf(ErrPayloadTooLarge, "set result of job %s: %d bytes encoded, limit %d (Config.MaxPayloadBytes)", j.ID, len(doc), max)
	}
	if err := checkJSONB(doc); err != nil {
		return wrapf(err, "set result of job %s", j.ID)
	}
	s := string(doc)
	a.result.Store(&s)
	return nil
}

// ParentResult is one job a job depends on, as Job.Parents reads it.
type ParentResult struct {
	ID ulid.ULID `json:"id"`
	// Step is its name in its workflow; empty for a job of no workflow.
	Step string `json:"step,omitempty"`
	// Status is its status; empty once its row has been deleted.
	Status Status `json:"status,omitempty"`
	// Result is what its handler recorded (Job.SetResult); nil if none, or once deleted.
	Result    json.RawMessage `json:"result,omitempty"`
	OnFailure OnParentFailure `json:"on_failure"`
	State     DependencyState `json:"state"`
}

// Parents are the jobs a job depends on, with how they ended.
type Parents struct {
	Jobs []ParentResult `json:"jobs"`
	// How many completed, failed, were cancelled, or were deleted before they finished; the
	// others (Jobs less these) have not finished.
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Cancelled int `json:"cancelled"`
	Deleted   int `json:"deleted"`
}

// Step returns the parent that is the step named name of its workflow, or nil.
func (p *Parents) Step(name string) *ParentResult {
	i := slices.IndexFunc(p.Jobs, func(r ParentResult) bool { return r.Step == name })
	if i < 0 {
		return nil
	}
	return &p.Jobs[i]
}

// Parents reads the jobs this job depends on, in id order, with their statuses and results and
// the counts of how they ended, in one query: what a dependent or a batch's callback reads. It
// fails with ErrNotHeld on a Job no handler holds (use Client.Parents).
func (j *Job[T]) Parents(ctx context.Context) (*Parents, error) {
	if j.held == nil {
		return nil, ErrNotHeld
	}
	return j.held.q.rt.c.Parents(ctx, j.ID)
}

// Parents reads the jobs job id depends on, as Job.Parents does.
func (c *Client) Parents(ctx context.Context, id ulid.ULID) (*Parents, error) {
	rows, _ := c.pool.Query(ctx, parentsSQL, [16]byte(id))
	jobs, err := pgx.CollectRows(rows, scanParent)
	if err != nil {
		return nil, wrapf(err, "read the parents of job %s", id)
	}
	p := &Parents{Jobs: jobs}
	for _, r := range jobs {
		switch {
		case r.Status == StatusCompleted, r.Status == "" && r.State == DependencyMet:
			p.Completed++ // deleted since, by retention
		case r.Status == StatusFailed:
			p.Failed++
		case r.Status == StatusCancelled:
			p.Cancelled++
		case r.Status == "":
			p.Deleted++
		}
	}
	return p, nil
}

// scanParent reads one row of parents.sql.
func scanParent(row pgx.CollectableRow) (ParentResult, error) {
	var r ParentResult
	var id [16]byte
	var step, status *string
	err := row.Scan(&id, &step, &status, &r.Result, &r.OnFailure, &r.State)
	r.ID, r.Step, r.Status = ulid.ULID(id), deref(step), Status(deref(status))
	return r, err
}

// JobResult is how a job ended, as Client.AwaitJob returns it.
type JobResult struct {
	ID    ulid.ULID `json:"id"`
	Queue string    `json:"queue"`
	// Status is StatusCompleted, StatusFailed or StatusCancelled.
	Status Status `json:"status"`
	// Result is what its handler recorded (Job.SetResult); nil if none, or if the job was
	// deleted as it completed.
	Result json.RawMessage `json:"result,omitempty"`
	// LastError is the newest entry of its errors: why it failed or was cancelled.
	LastError  string    `json:"last_error,omitempty"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// finished reports whether the job has ended.
func (r *JobResult) finished() bool {
	return r.Status == StatusCompleted || r.Status == StatusFailed || r.Status == StatusCancelled
}

// AwaitJob blocks until job id has finished (completed, failed for good, or cancelled), or ctx
// ends, and returns how it ended. It watches the job's queue (Queue.Watch: woken by NOTIFY, not
// by polling) and reads the job when the watch names it or resyncs. A job whose row is deleted
// as it completes (no Retention of completed jobs, no workflow) is reported completed without a
// result. ErrNotFound if there is no such job, or it is deleted before it finished.
func (c *Client) AwaitJob(ctx context.Context, id ulid.ULID) (*JobResult, error) {
	r, err := c.readJobResult(ctx, id)
	if err != nil || r.finished() {
		return r, err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	changes, err := c.watch(wctx, r.Queue)
	if err != nil {
		return nil, wrapf(err, "await job %s", id)
	}
	for ch := range changes {
		if ch.Kind != ChangeResync && !slices.Contains(ch.JobIDs, id) {
			continue
		}
		r, err := c.readJobResult(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound) && ch.Kind == ChangeCompleted:
			return &JobResult{ID: id, Queue: ch.Queue, Status: StatusCompleted}, nil
		case err != nil || r.finished():
			return r, err
		}
	}
	return nil, wrapf(cmp.Or(ctx.Err(), ErrClosed), "await job %s", id)
}

// readJobResult reads job id's status and result.
func (c *Client) readJobResult(ctx context.Context, id ulid.ULID) (*JobResult, error) {
	r := &JobResult{ID: id}
	var lastErr *string
	var finished *time.Time
	err := c.pool.QueryRow(ctx, jobResultSQL, [16]byte(id)).Scan(&r.Queue, &r.Status, &r.Result, &lastErr, &finished)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, wrapf(ErrNotFound, "await job %s", id)
	}
	if err != nil {
		return nil, wrapf(err, "await job %s", id)
	}
	r.LastError, r.FinishedAt = deref(lastErr), deref(finished)
	return r, nil
}

// AwaitWorkflow blocks until workflow id has finished (every job completed, failed or was
// cancelled), or ctx ends, and returns it as Client.Workflow reads it. The resolver announces
// each workflow it finishes (NOTIFY); AwaitWorkflow reads the workflow's row when told, and when
// the listener reconnects. ErrWorkflowNotFound if there is no such workflow.
func (c *Client) AwaitWorkflow(ctx context.Context, id ulid.ULID) (*WorkflowInfo, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	woken := make(chan struct{}, 1)
	sub := c.listener.subscribe(flowTopic, func(m message) {
		if m.kind == msgResync || m.kind == msgListening || (m.kind == msgFinished && slices.Contains(m.ids, id)) {
			select {
			case woken <- struct{}{}:
			default:
			}
		}
	})
	defer sub.close()
	if err := c.listener.waitListening(ctx, c.done); err != nil {
		return nil, wrapf(err, "await workflow %s", id)
	}
	for {
		var finished bool
		err := c.pool.QueryRow(ctx, workflowFinishedSQL, [16]byte(id)).Scan(&finished)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, wrapf(ErrWorkflowNotFound, "await workflow %s", id)
		}
		if err != nil {
			return nil, wrapf(err, "await workflow %s", id)
		}
		if finished {
			return c.Workflow(ctx, id)
		}
		select {
		case <-ctx.Done():
			return nil, wrapf(ctx.Err(), "await workflow %s", id)
		case <-c.done:
			return nil, ErrClosed
		case <-woken:
		}
	}
}
