package pgqueue

// Workflows under operations: policies that wait for a retry, retries and cancellation of a whole
// workflow, deletion of a parent, dependencies added from SQL, bad input, pruning.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/oklog/ulid/v2"
)

// A parent that fails until it is retried: WaitForRetry keeps its dependent pending with the
// reason, RetryWorkflow brings back the cancelled dependents of another parent, and each runs
// once its parent has completed.
func TestWorkflowRetryAfterFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-retry")
	var fixed atomic.Bool
	var o order
	w := must(q.NewWorker(func(ctx context.Context, j *Job[stepArgs]) error {
		if strings.HasPrefix(j.Payload.Name, "flaky") && !fixed.Load() {
			return errors.New("not yet")
		}
		return o.run(ctx, j)
	}, &WorkerOptions{Concurrency: 4, PollInterval: noPoll}))
	ctx := t.Context()
	wf := b.client.NewWorkflow("retry")
	flakyA := q.AddStep(wf, stepArgs{"flaky-a"}, &StepOptions{EnqueueOptions: EnqueueOptions{MaxAttempts: 1}})
	waits := q.AddStep(wf, stepArgs{"waits"}, &StepOptions{After: []Dependency{{Job: flakyA.ID, OnFailure: WaitForRetry}}})
	flakyB := q.AddStep(wf, stepArgs{"flaky-b"}, &StepOptions{EnqueueOptions: EnqueueOptions{MaxAttempts: 1}})
	cancelled := q.AddStep(wf, stepArgs{"cancelled"}, &StepOptions{After: After(flakyB)})
	last := q.AddStep(wf, stepArgs{"last"}, &StepOptions{After: After(waits, cancelled)})
	must(0, wf.Enqueue(ctx))
	runWorkers(t, b.client, w)
	waitFor(t, 10*time.Second, "the dependents to hear of the failures", func() bool {
		return must(q.Job(ctx, cancelled.ID)).Status == StatusCancelled && must(q.Job(ctx, last.ID)).Status == StatusCancelled &&
			len(must(q.Job(ctx, waits.ID)).Errors) == 1
	})
	j := must(q.Job(ctx, waits.ID))
	if j.Status != StatusPending || !strings.Contains(j.Errors[0].Error, "waiting: it depends on job "+flakyA.ID.String()+", which failed") {
		t.Fatalf("the WaitForRetry dependent: %s, %+v", j.Status, j.Errors)
	}
	// The resolver counts the last cancellation down in the batch after the one that made it.
	waitFor(t, 10*time.Second, "the workflow to count one unfinished job, the waiting step", func() bool {
		info := must(b.client.Workflow(ctx, wf.ID))
		return info.Status == WorkflowRunning && info.Unfinished == 1
	})
	fixed.Store(true)
	n, err := b.client.RetryWorkflow(ctx, wf.ID)
	if err != nil || n != 4 {
		t.Fatalf("RetryWorkflow: %d, %v; want the 2 failed and the 2 cancelled", n, err)
	}
	final := must(b.client.AwaitWorkflow(ctx, wf.ID))
	if final.Status != WorkflowCompleted || o.index("last") != 4 {
		t.Fatalf("after the retry: %s, ran %v", final.Status, o.seq)
	}
}

// CancelWorkflow cancels every unfinished job, pending ones included, and the workflow finishes.
func TestWorkflowCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-cancel")
	ctx := t.Context()
	wf := b.client.NewWorkflow("cancel")
	a := q.AddStep(wf, stepArgs{"a"}, &StepOptions{EnqueueOptions: EnqueueOptions{Delay: time.Hour}})
	q.AddStep(wf, stepArgs{"b"}, &StepOptions{After: After(a)})
	must(0, wf.Enqueue(ctx))
	if n, err := b.client.CancelWorkflow(ctx, wf.ID); err != nil || n != 2 {
		t.Fatalf("CancelWorkflow: %d, %v; want 2", n, err)
	}
	w := must(q.NewWorker(func(context.Context, *Job[stepArgs]) error { return nil }, &WorkerOptions{PollInterval: noPoll}))
	runWorkers(t, b.client, w) // its resolver counts the ends
	if info := must(b.client.AwaitWorkflow(ctx, wf.ID)); info.Status != WorkflowFailed || info.Counts[StatusCancelled] != 2 {
		t.Fatalf("cancelled workflow: %s %v", info.Status, info.Counts)
	}
	if n, err := b.client.CountJobs(ctx, JobFilter{Workflow: wf.ID, Statuses: []Status{StatusCancelled}}); err != nil || n != 2 {
		t.Fatalf("CountJobs of the workflow: %d, %v", n, err)
	}
}

// A parent deleted before it finished breaks its edges ("was deleted"), and a plain job that gained
// a dependent from SQL while it ran, deleted as it completes (no retention), counts as completed:
// complete.sql tells the trigger so.
func TestDependencyOnDeletedAndOnPlainParents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-plain")
	ctx := t.Context()
	release := make(chan struct{})
	var o order
	w := must(q.NewWorker(func(ctx context.Context, j *Job[stepArgs]) error {
		if j.Payload.Name == "parent" {
			<-release
		}
		return o.run(ctx, j)
	}, &WorkerOptions{Concurrency: 2, PollInterval: noPoll}))
	parent := must(q.Enqueue(ctx, stepArgs{"parent"}, nil))
	doomed := must(q.Enqueue(ctx, stepArgs{"doomed"}, &EnqueueOptions{Delay: time.Hour}))
	runWorkers(t, b.client, w)
	waitFor(t, 10*time.Second, "the parent to run", func() bool { return must(q.Job(ctx, parent.ID)).Status == StatusRunning })
	var child, orphan ulid.ULID
	if err := b.pool.QueryRow(ctx, `SELECT pgqueue_add_job('wf-plain', '{"name": "child"}', after => ARRAY[$1::uuid])`,
		FormatUUID(parent.ID)).Scan((*uuidText)(&child)); err != nil {
		t.Fatal(err)
	}
	if err := b.pool.QueryRow(ctx, `SELECT pgqueue_add_job('wf-plain', '{"name": "orphan"}', after => ARRAY[$1::uuid])`,
		FormatUUID(doomed.ID)).Scan((*uuidText)(&orphan)); err != nil {
		t.Fatal(err)
	}
	must(0, b.client.DeleteJob(ctx, doomed.ID, nil))
	close(release)
	waitFor(t, 10*time.Second, "the child of the completed plain job to run", func() bool { return o.done("child") })
	if n := b.count("id = $1", [16]byte(parent.ID)); n != 0 {
		t.Fatal("the plain parent was kept; it should have been deleted as it completed")
	}
	waitFor(t, 10*time.Second, "the orphan to be cancelled", func() bool {
		j := must(q.Job(ctx, orphan))
		return j.Status == StatusCancelled && strings.Contains(j.Errors[len(j.Errors)-1].Error, "which was deleted")
	})
}

// pgqueue_add_job's dependencies: refused when a parent is missing, with a unique key, or with a
// policy it does not know; nothing is written then.
func TestAddJobAfterRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-sql")
	ctx := t.Context()
	parent := must(q.Enqueue(ctx, stepArgs{"p"}, nil))
	for _, c := range []struct {
		args, code, text string
	}{
		{`after => ARRAY[gen_random_uuid()]`, "23503", "do not exist"},
		{`after => ARRAY[$1::uuid], unique_key => 'u'`, "22023", "unique_key cannot be given with after"},
		{`after => ARRAY[$1::uuid], on_parent_failure => 'maybe'`, "22023", "on_parent_failure 'maybe'"},
		{`after => ARRAY[$1::uuid, $1::uuid]`, "22023", "a job twice"},
	} {
		_, err := b.pool.Exec(ctx, `SELECT pgqueue_add_job('wf-sql', '{}', `+c.args+`) WHERE $1::uuid IS NOT NULL`, FormatUUID(parent.ID))
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != c.code || !strings.Contains(pgErr.Message, c.text) {
			t.Errorf("%s: %v; want SQLSTATE %s saying %q", c.args, err, c.code, c.text)
		}
	}
	if n := b.count("true"); n != 1 {
		t.Fatalf("%d jobs after refused calls, want the parent alone", n)
	}
}

// Bad steps are refused by the enqueue, before anything is written, each with its reason.
func TestWorkflowRefusesBadSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-bad")
	other := newQueue[stepArgs](t, b.newClient(), "wf-bad")
	cases := map[string]func(wf *Workflow){
		"has no steps": func(*Workflow) {},
		"UniqueKey": func(wf *Workflow) {
			q.AddStep(wf, stepArgs{}, &StepOptions{EnqueueOptions: EnqueueOptions{UniqueKey: "u"}})
		},
		"another Client": func(wf *Workflow) { other.AddStep(wf, stepArgs{}, nil) },
		"none of cancel": func(wf *Workflow) {
			a := q.AddStep(wf, stepArgs{}, nil)
			q.AddStep(wf, stepArgs{}, &StepOptions{After: []Dependency{{Job: a.ID, OnFailure: "maybe"}}})
		},
		"twice": func(wf *Workflow) {
			a := q.AddStep(wf, stepArgs{}, nil)
			q.AddStep(wf, stepArgs{}, &StepOptions{After: After(a, a)})
		},
		"needs jobs in After": func(wf *Workflow) { q.AddStep(wf, stepArgs{}, &StepOptions{Callback: CallbackAlways}) },
		"Priority": func(wf *Workflow) {
			q.AddStep(wf, stepArgs{}, &StepOptions{EnqueueOptions: EnqueueOptions{Priority: 1 << 40}})
		},
		"none of success": func(wf *Workflow) {
			a := q.AddStep(wf, stepArgs{}, nil)
			q.AddStep(wf, stepArgs{}, &StepOptions{After: After(a), Callback: "later"})
		},
		"longer than 255": func(wf *Workflow) { q.AddStep(wf, stepArgs{}, &StepOptions{Name: strings.Repeat("x", 256)}) },
	}
	for want, build := range cases {
		wf := b.client.NewWorkflow("bad")
		build(wf)
		if err := wf.Enqueue(t.Context()); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", want, err)
		}
	}
	if n := b.count("true") + b.countIn("pgqueue_workflows", "true"); n != 0 {
		t.Fatalf("%d rows written by refused workflows", n)
	}
}

// A workflow's completed jobs are kept until it has finished, then pruned by retention (none for
// completed jobs here), and the finished workflow with no job left is deleted with its edges.
func TestWorkflowPruning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-prune")
	ctx := t.Context()
	gate := make(chan struct{})
	w := must(q.NewWorker(func(_ context.Context, j *Job[stepArgs]) error {
		if j.Payload.Name == "b" {
			<-gate
		}
		return nil
	}, &WorkerOptions{Concurrency: 2, PollInterval: 50 * time.Millisecond}))
	wf := b.client.NewWorkflow("prune")
	a := q.AddStep(wf, stepArgs{"a"}, nil)
	q.AddStep(wf, stepArgs{"b"}, &StepOptions{After: After(a)})
	must(0, wf.Enqueue(ctx))
	runWorkers(t, b.client, w)
	waitFor(t, 10*time.Second, "a to complete", func() bool { return b.count("status = 'completed'") == 1 })
	time.Sleep(200 * time.Millisecond) // several polls, each pruning
	if n := b.count("status = 'completed'"); n != 1 {
		t.Fatalf("a step of a running workflow was pruned")
	}
	close(gate)
	must(b.client.AwaitWorkflow(ctx, wf.ID))
	waitFor(t, 10*time.Second, "the finished workflow's jobs to be pruned", func() bool { return b.count("true") == 0 })
	var workflows, edges int
	if err := b.pool.QueryRow(ctx, pruneWorkflowsSQL, 100).Scan(&workflows, &edges); err != nil || workflows != 1 || edges != 1 {
		t.Fatalf("prune_workflows: %d workflows, %d edges, %v; want 1 and 1", workflows, edges, err)
	}
	if _, err := b.client.Workflow(ctx, wf.ID); !errors.Is(err, ErrWorkflowNotFound) {
		t.Fatalf("the pruned workflow: %v, want ErrWorkflowNotFound", err)
	}
}

// SetResult on a job deleted as it completes is refused, and Workflows lists newest first.
func TestSetResultNotKeptAndListing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-misc")
	ctx := t.Context()
	errs := make(chan error, 1)
	w := must(q.NewWorker(func(_ context.Context, j *Job[stepArgs]) error {
		errs <- j.SetResult(1)
		return nil
	}, &WorkerOptions{PollInterval: noPoll}))
	must(q.Enqueue(ctx, stepArgs{"plain"}, nil))
	runWorkers(t, b.client, w)
	if err := receive(t, errs, 10*time.Second, "the handler"); !errors.Is(err, ErrResultNotKept) {
		t.Fatalf("SetResult on a plain job: %v, want ErrResultNotKept", err)
	}
	var ids []ulid.ULID
	for range 3 {
		wf := b.client.NewWorkflow("listed")
		q.AddStep(wf, stepArgs{"x"}, &StepOptions{EnqueueOptions: EnqueueOptions{Delay: time.Hour}})
		must(0, wf.Enqueue(ctx))
		ids = append(ids, wf.ID)
	}
	list := must(b.client.Workflows(ctx, &WorkflowListOptions{Unfinished: true, Limit: 2}))
	if len(list) != 2 || list[0].ID != ids[2] || list[1].ID != ids[1] || list[0].Status != WorkflowRunning {
		t.Fatalf("first page %+v", list)
	}
	list = must(b.client.Workflows(ctx, &WorkflowListOptions{Before: list[1].ID}))
	if len(list) != 1 || list[0].ID != ids[0] {
		t.Fatalf("second page %+v", list)
	}
}

// Steps released by the resolver line up as any other job: a paused queue starts none of them
// until it is resumed, MaxRunning caps them, and they run in order of priority.
func TestWorkflowKeepsQueueGuarantees(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-guarantees")
	ctx := t.Context()
	must(0, q.SetLimits(ctx, Limits{MaxRunning: 1}))
	var running, most atomic.Int32
	var o order
	w := must(q.NewWorker(func(ctx context.Context, j *Job[stepArgs]) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return o.run(ctx, j)
	}, &WorkerOptions{Concurrency: 4, PollInterval: noPoll}))
	runWorkers(t, b.client, w)
	wf := b.client.NewWorkflow("guarantees")
	root := q.AddStep(wf, stepArgs{"root"}, nil)
	for i := range 6 {
		q.AddStep(wf, stepArgs{fmt.Sprintf("child-%d", i)}, &StepOptions{After: After(root),
			EnqueueOptions: EnqueueOptions{Priority: i}})
	}
	must(0, wf.Enqueue(ctx))
	waitFor(t, 10*time.Second, "the root to run", func() bool { return o.done("root") })
	must(0, q.Pause(ctx))
	// The root's completion and the children's release race the pause: those released before
	// it may have started; none may start after it.
	waitFor(t, 10*time.Second, "the children to be released", func() bool { return b.count("status = 'pending'") == 0 })
	o.mu.Lock()
	before := len(o.seq)
	o.mu.Unlock()
	time.Sleep(300 * time.Millisecond)
	o.mu.Lock()
	after := len(o.seq)
	o.mu.Unlock()
	if after != before {
		t.Fatalf("%d steps started while the queue was paused", after-before)
	}
	must(0, q.Resume(ctx))
	must(b.client.AwaitWorkflow(ctx, wf.ID))
	if most.Load() > 1 {
		t.Fatalf("%d steps ran at once under MaxRunning 1", most.Load())
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := 1; i < len(o.seq); i++ {
		if o.seq[i] == "root" {
			t.Fatalf("the root ran after a child: %v", o.seq)
		}
	}
	waitingChildren := o.seq[before:]
	for i := 1; i < len(waitingChildren); i++ {
		if waitingChildren[i] > waitingChildren[i-1] {
			t.Fatalf("children released together ran out of priority order: %v", o.seq)
		}
	}
}

// A workflow's errors name the package once, and the step.
func TestWorkflowErrorsSayPgqueueOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-err")
	wf := b.client.NewWorkflow("errors")
	q.AddStep(wf, stepArgs{}, &StepOptions{Name: "first", EnqueueOptions: EnqueueOptions{MaxAttempts: -1}})
	err := wf.Enqueue(t.Context())
	if err == nil || strings.Count(err.Error(), "pgqueue") != 1 || !strings.Contains(err.Error(), `step "first"`) {
		t.Fatalf("error %q: want pgqueue named once, and the step", err)
	}
}
