package pgqueue

// Workflows: jobs, across queues, that run only after the jobs they depend on have finished.
// The design, the guarantees and the costs are in docs/workflows.md; the schema in migration
// 20261212120000.

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
)

// OnParentFailure says what a job does when a job it depends on fails (after its last attempt),
// is cancelled or is deleted. It is chosen per dependency (Dependency.OnFailure).
type OnParentFailure string

const (
	// CancelDependent, the default, cancels the dependent, with the reason in its errors; its
	// own dependents then follow their policies in turn.
	CancelDependent OnParentFailure = "cancel"
	// RunDependent runs the dependent anyway: the parent's failure meets the dependency as a
	// completion would. Use it for clean-up steps and for callbacks that report failures.
	RunDependent OnParentFailure = "run"
	// WaitForRetry leaves the dependent pending, with the reason in its errors, until the parent
	// is retried by hand (Queue.Retry, Client.RetryJob, Client.RetryWorkflow) and completes.
	WaitForRetry OnParentFailure = "wait"
)

// Dependency is one job a step waits for.
type Dependency struct {
	// Job is the job depended on: a Step of the same workflow (Step.ID), or any job in the table
	// (enqueued before; it must still exist when the workflow is enqueued, and one that has
	// completed meets the dependency at once).
	Job ulid.ULID
	// OnFailure is what the step does if Job fails, is cancelled or is deleted. Defaults to
	// CancelDependent.
	OnFailure OnParentFailure
}

// After returns dependencies on steps, each with the default policy (CancelDependent).
func After(steps ...Step) []Dependency {
	deps := make([]Dependency, len(steps))
	for i, s := range steps {
		deps[i] = Dependency{Job: s.ID}
	}
	return deps
}

// CallbackWhen makes a step the callback of the jobs it depends on, as batches have: it runs
// once, when all of them have finished, on the condition it names, whatever OnFailure its
// dependencies give. Its handler reads their outcomes and results with Job.Parents.
type CallbackWhen string

const (
	// CallbackOnSuccess runs the step if every job it depends on completed; it is cancelled as
	// soon as one fails, is cancelled or is deleted.
	CallbackOnSuccess CallbackWhen = "success"
	// CallbackOnFailure runs the step once all have finished if some failed, were cancelled or
	// deleted; it is cancelled if all completed.
	CallbackOnFailure CallbackWhen = "failure"
	// CallbackAlways runs the step once all have finished, however they ended.
	CallbackAlways CallbackWhen = "always"
)

// StepOptions are the options of one step of a workflow. A nil *StepOptions means defaults.
type StepOptions struct {
	// Name is the step's name in the workflow's view (Client.Workflow, the CLI, the dashboard).
	// Defaults to the queue's name.
	Name string
	// After lists the jobs the step waits for. Without any it can run as soon as it is enqueued.
	After []Dependency
	// Callback, if set, makes the step a callback of the jobs After names (a batch's): it runs
	// once they have all finished, on this condition; their OnFailure is ignored.
	Callback CallbackWhen
	// EnqueueOptions are the job's options, as for Enqueue. UniqueKey and the Repeat options are
	// refused in a workflow: a step is one run of one job.
	EnqueueOptions
}

// Step is a job added to a workflow; its ID is known before the workflow is enqueued, so that
// later steps can depend on it and the application can store it.
type Step struct {
	ID   ulid.ULID
	Name string
}

// Workflow is a set of jobs, across queues of one Client, some of which wait for others to
// finish: a directed acyclic graph. Build it with Client.NewWorkflow and Queue.AddStep, then
// enqueue it, all or nothing, with Enqueue, EnqueueTx or EnqueueSQLTx. A step can depend only on
// steps added before it, or on jobs already in the table, so a workflow has no cycle. A
// Workflow is not safe for concurrent use while it is being built.
type Workflow struct {
	// ID identifies the workflow (Client.Workflow, Await, the CLI), known before it is enqueued.
	ID ulid.ULID
	// Name describes it in listings; it need not be unique.
	Name string
	// Metadata is kept on the workflow's row, as a job's (EnqueueOptions.Metadata).
	Metadata map[string]string

	c     *Client
	steps []*flowStep
	index map[ulid.ULID]int // step id → position in steps
	err   error             // the first error of an AddStep, returned by the enqueue
}

// flowStep is one step as it will be inserted.
type flowStep struct {
	id     ulid.ULID
	queue  string
	name   string
	body   []byte
	opts   EnqueueOptions
	params enqueueParams
	after  []Dependency
	parent bool   // some later step depends on it
	when   string // run_when: "some_failed" for a callback on failure
}

// NewWorkflow starts a workflow named name (for listings; it may be empty).
func (c *Client) NewWorkflow(name string) *Workflow {
	return &Workflow{ID: c.ids.next(1)[0], Name: name, c: c, index: make(map[ulid.ULID]int)}
}

// AddStep adds a job of q with payload to wf and returns the step, whose ID later steps name in
// their After. It does no I/O: an invalid option, payload or dependency is reported by the
// workflow's enqueue, before anything is written (and only the first such error).
func (q *Queue[T]) AddStep(wf *Workflow, payload T, opts *StepOptions) Step {
	var o StepOptions
	if opts != nil {
		o = *opts
	}
	s := &flowStep{id: q.c.ids.next(1)[0], queue: q.name, name: o.Name, opts: o.EnqueueOptions,
		after: slices.Clone(o.After)}
	if s.name == "" {
		s.name = q.name
	}
	if wf.err == nil {
		body, err := encodePayload(q.c.cfg, q.name, payload)
		s.body = body
		wf.err = cmp.Or(err, s.callback(o.Callback), wf.check(q.c, s))
	}
	wf.index[s.id] = len(wf.steps)
	wf.steps = append(wf.steps, s)
	return Step{ID: s.id, Name: s.name}
}

// callback applies a Callback condition to the step's dependencies.
func (s *flowStep) callback(when CallbackWhen) error {
	policy := map[CallbackWhen]OnParentFailure{CallbackOnSuccess: CancelDependent, CallbackOnFailure: RunDependent,
		CallbackAlways: RunDependent}
	switch {
	case when == "":
		return nil
	case policy[when] == "":
		return invalidf("step %q: Callback %q is none of success, failure, always", s.name, when)
	case len(s.after) == 0:
		return invalidf("step %q: a Callback needs jobs in After", s.name)
	}
	for i := range s.after {
		s.after[i].OnFailure = policy[when]
	}
	if when == CallbackOnFailure {
		s.when = "some_failed"
	}
	return nil
}

// Steps returns the steps added so far, in order: After(wf.Steps()...) makes a step wait for
// all of them, as a batch's callback does.
func (wf *Workflow) Steps() []Step {
	steps := make([]Step, len(wf.steps))
	for i, s := range wf.steps {
		steps[i] = Step{ID: s.id, Name: s.name}
	}
	return steps
}

// check validates a step as AddStep adds it, and marks the steps it depends on as parents.
func (wf *Workflow) check(c *Client, s *flowStep) error {
	if c != wf.c {
		return invalidf("step %q: its queue belongs to another Client than the workflow", s.name)
	}
	if s.opts.UniqueKey != "" || s.opts.RepeatCount != 0 {
		return invalidf("step %q: UniqueKey and RepeatCount cannot be used in a workflow", s.name)
	}
	if len(s.name) > 255 || !storableText(s.name) {
		return invalidf("step name %.40q is longer than 255 bytes, not UTF-8 or contains U+0000", s.name)
	}
	p, err := s.opts.params()
	if err != nil {
		return fmt.Errorf("%w, in step %q", err, s.name) // "pgqueue: " leads, and is said once
	}
	s.params = p
	seen := make(map[ulid.ULID]bool, len(s.after))
	for _, d := range s.after {
		switch d.OnFailure {
		case "", CancelDependent, RunDependent, WaitForRetry:
		default:
			return invalidf("step %q: OnFailure %q is none of cancel, run, wait", s.name, d.OnFailure)
		}
		if seen[d.Job] {
			return invalidf("step %q depends on job %s twice", s.name, d.Job)
		}
		seen[d.Job] = true
		if i, ok := wf.index[d.Job]; ok {
			wf.steps[i].parent = true
		}
	}
	return nil
}

// Enqueue inserts the workflow, all its jobs and their dependencies in one transaction of its
// own: all or nothing. Jobs without unmet dependencies can run when it returns; the others wait
// ('pending') until their parents finish. It blocks for one round trip, or, when steps depend
// on jobs already in the table, for a transaction of two, which waits for a transaction that
// holds one of those jobs' rows (an enqueue of another workflow that depends on it too).
func (wf *Workflow) Enqueue(ctx context.Context) error {
	if err := wf.ready(); err != nil {
		return err
	}
	if len(wf.outsideParents()) == 0 {
		return wf.enqueue(ctx, pgxFlow{wf.c.pool}, false)
	}
	return pgx.BeginFunc(ctx, wf.c.pool, func(tx pgx.Tx) error { return wf.enqueue(ctx, pgxFlow{tx}, false) })
}

// EnqueueTx is Enqueue inside the caller's transaction tx: the workflow exists if and only if tx
// commits, together with the application's own writes, and workers are woken on commit. An
// invalid step fails before anything is sent. The jobs depended on from outside the workflow
// stay locked (FOR NO KEY UPDATE) until tx ends: their completion waits for it.
func (wf *Workflow) EnqueueTx(ctx context.Context, tx pgx.Tx) error {
	if tx == nil {
		return invalidf("EnqueueTx needs a transaction")
	}
	if err := wf.ready(); err != nil {
		return err
	}
	return wf.enqueue(ctx, pgxFlow{tx}, true)
}

// EnqueueSQLTx is EnqueueTx for a database/sql transaction, whatever Postgres driver opened it.
func (wf *Workflow) EnqueueSQLTx(ctx context.Context, tx *sql.Tx) error {
	if tx == nil {
		return invalidf("EnqueueSQLTx needs a transaction")
	}
	if err := wf.ready(); err != nil {
		return err
	}
	return wf.enqueue(ctx, sqlFlow{tx}, true)
}

// ready reports what keeps the workflow from being enqueued.
func (wf *Workflow) ready() error {
	switch {
	case wf.c.closed.Load():
		return ErrClosed
	case wf.err != nil:
		return wrapf(wf.err, "enqueue workflow %s", wf.ID)
	case len(wf.steps) == 0:
		return invalidf("workflow %s has no steps", wf.ID)
	case len(wf.Name) > 255 || !storableText(wf.Name):
		return invalidf("workflow name %.40q is longer than 255 bytes, not UTF-8 or contains U+0000", wf.Name)
	}
	return nil
}

// outsideParents returns the jobs the steps depend on that are not steps of the workflow, in
// id order, once each.
func (wf *Workflow) outsideParents() []ulid.ULID {
	var ids []ulid.ULID
	for _, s := range wf.steps {
		for _, d := range s.after {
			if _, ok := wf.index[d.Job]; !ok {
				ids = append(ids, d.Job)
			}
		}
	}
	slices.SortFunc(ids, ulid.ULID.Compare)
	return slices.Compact(ids)
}

// enqueue runs the workflow's insert through the client's enqueue middleware, once for all its
// steps; inTx says that db is the caller's transaction.
func (wf *Workflow) enqueue(ctx context.Context, db flowConn, inTx bool) error {
	ids := make([]ulid.ULID, len(wf.steps))
	for i, s := range wf.steps {
		ids[i] = s.id
	}
	e := &EnqueueInfo{Queue: wf.steps[0].queue, IDs: ids, Metadata: map[string]string{}, InTx: inTx, Workflow: wf.ID}
	return wf.c.enqueueThrough(ctx, e, func(ctx context.Context, _ []byte) error { return wf.insert(ctx, db, e.Metadata) })
}

// insert locks the parents from outside the workflow, if any (depend_lock.sql), and inserts the
// workflow (enqueue_workflow.sql), through db, every step's metadata with added's.
func (wf *Workflow) insert(ctx context.Context, db flowConn, added map[string]string) error {
	statuses := map[ulid.ULID]Status{}
	if outside := wf.outsideParents(); len(outside) > 0 {
		var err error
		if statuses, err = db.lockParents(ctx, idsDocument(outside)); err != nil {
			return wrapf(err, "enqueue workflow %s: lock the jobs it depends on", wf.ID)
		}
	}
	docs, err := wf.documents(statuses, added)
	if err != nil {
		return err
	}
	meta, err := encodeMetadata(wf.Metadata)
	if err != nil {
		return err
	}
	if err := db.exec(ctx, enqueueWorkflowSQL, FormatUUID(wf.ID), wf.Name, nullJSON(meta),
		docs.jobs, docs.edges, docs.ended); err != nil {
		return wrapf(err, "enqueue workflow %s", wf.ID)
	}
	return nil
}

// flowDocuments are enqueue_workflow.sql's $4, $5 and $6, as JSON text.
type flowDocuments struct{ jobs, edges, ended string }

// flowJob is one element of enqueue_workflow.sql's $4.
type flowJob struct {
	ID          string          `json:"id"`
	Queue       string          `json:"queue"`
	Step        string          `json:"step"`
	Payload     json.RawMessage `json:"payload"`
	Priority    int32           `json:"priority"`
	RunAt       *time.Time      `json:"run_at"`
	DelayUs     int64           `json:"delay_us"`
	MaxAttempts int32           `json:"max_attempts"`
	RetryUs     *int64          `json:"retry_us"`
	Metadata    json.RawMessage `json:"metadata"`
	Key         *string         `json:"key"`
	Weight      int32           `json:"weight"`
	Waits       int             `json:"waits"`
	Parent      bool            `json:"parent"`
	RunWhen     *string         `json:"run_when"`
}

// documents builds the statement's documents, given the statuses of the parents from outside
// the workflow (a parent missing there does not exist: the enqueue fails).
func (wf *Workflow) documents(outside map[ulid.ULID]Status, added map[string]string) (flowDocuments, error) {
	jobs := make([]flowJob, len(wf.steps))
	edges, ended := [][4]any{}, [][2]string{} // [] rather than null when empty
	applied := map[ulid.ULID]bool{}
	for i, s := range wf.steps {
		meta, err := encodeMetadata(withAdded(s.opts.Metadata, added))
		if err != nil {
			return flowDocuments{}, wrapf(err, "enqueue workflow %s: step %q", wf.ID, s.name)
		}
		p := s.params
		jobs[i] = flowJob{ID: FormatUUID(s.id), Queue: s.queue, Step: s.name, Payload: s.body,
			Priority: p.priority, RunAt: p.runAt, DelayUs: p.delayUs, MaxAttempts: p.maxAttempts,
			RetryUs: p.retryDelay, Metadata: nullJSON(meta), Key: p.key, Weight: p.weight, Parent: s.parent}
		if s.when != "" {
			jobs[i].RunWhen = &s.when
		}
		for _, d := range s.after {
			status, inside := StatusPending, false
			if _, inside = wf.index[d.Job]; !inside {
				var ok bool
				if status, ok = outside[d.Job]; !ok {
					return flowDocuments{}, wrapf(ErrNotFound, "enqueue workflow %s: step %q depends on job %s, "+
						"which does not exist (a completed job is deleted at once unless it is kept: Config.Retention)",
						wf.ID, s.name, d.Job)
				}
			}
			met := status == StatusCompleted
			if !met {
				jobs[i].Waits++
			}
			edges = append(edges, [4]any{FormatUUID(d.Job), FormatUUID(s.id), cmp.Or(d.OnFailure, CancelDependent), met})
			if (status == StatusFailed || status == StatusCancelled) && !applied[d.Job] {
				applied[d.Job] = true
				ended = append(ended, [2]string{FormatUUID(d.Job), string(status)})
			}
		}
	}
	return marshalFlow(jobs, edges, ended)
}

// withAdded returns m with added's entries, which take precedence; m itself if nothing is added.
func withAdded(m, added map[string]string) map[string]string {
	if len(added) == 0 {
		return m
	}
	out := maps.Clone(m)
	if out == nil {
		out = make(map[string]string, len(added))
	}
	maps.Copy(out, added)
	return out
}

// marshalFlow encodes the three documents.
func marshalFlow(jobs []flowJob, edges [][4]any, ended [][2]string) (flowDocuments, error) {
	var d flowDocuments
	for _, x := range []struct {
		v   any
		dst *string
	}{{jobs, &d.jobs}, {edges, &d.edges}, {ended, &d.ended}} {
		b, err := json.Marshal(x.v)
		if err != nil {
			return d, fmt.Errorf("pgqueue: enqueue workflow: %w", err)
		}
		*x.dst = string(b)
	}
	return d, nil
}

// nullJSON is a JSON document as a statement's parameter: nil (SQL NULL, or JSON null inside a
// document) when empty.
func nullJSON(doc []byte) json.RawMessage {
	if len(doc) == 0 {
		return nil
	}
	return doc
}

// idsDocument is a JSON array of ids as uuid text, as depend_lock.sql takes them.
func idsDocument(ids []ulid.ULID) string {
	b := []byte{'['}
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = appendUUID(b, id)
		b = append(b, '"')
	}
	return string(append(b, ']'))
}

// flowConn is what a workflow's enqueue runs its two statements on: pgx (pgxFlow) or a
// database/sql transaction (sqlFlow). Every parameter is text, bound alike by both.
type flowConn interface {
	// lockParents runs depend_lock.sql and returns the status of each job it found.
	lockParents(ctx context.Context, ids string) (map[ulid.ULID]Status, error)
	exec(ctx context.Context, sql string, args ...any) error
}

type pgxFlow struct{ db querier }

func (f pgxFlow) lockParents(ctx context.Context, ids string) (map[ulid.ULID]Status, error) {
	rows, err := f.db.Query(ctx, dependLockSQL, ids)
	if err != nil {
		return nil, err
	}
	found := map[ulid.ULID]Status{}
	var id [16]byte
	var status Status
	_, err = pgx.ForEachRow(rows, []any{&id, &status}, func() error {
		found[ulid.ULID(id)] = status
		return nil
	})
	return found, err
}

func (f pgxFlow) exec(ctx context.Context, sql string, args ...any) error {
	rows, err := f.db.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

type sqlFlow struct{ tx *sql.Tx }

func (f sqlFlow) lockParents(ctx context.Context, ids string) (map[ulid.ULID]Status, error) {
	rows, err := f.tx.QueryContext(ctx, dependLockSQL, ids)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	found := map[ulid.ULID]Status{}
	for rows.Next() {
		var id uuidText
		var status Status
		if err := rows.Scan(&id, &status); err != nil {
			return nil, err
		}
		found[ulid.ULID(id)] = status
	}
	return found, rows.Err()
}

func (f sqlFlow) exec(ctx context.Context, sql string, args ...any) error {
	_, err := f.tx.ExecContext(ctx, sql, args...)
	return err
}
