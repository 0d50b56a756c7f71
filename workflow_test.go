package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

type stepArgs struct {
	Name string `json:"name"`
}

// order records the order in which steps ran, by name, with their start and end.
type order struct {
	mu       sync.Mutex
	ended    map[string]time.Time
	seq      []string
	workflow map[string]ulid.ULID // the Job.Workflow each step's handler saw
}

func (o *order) run(ctx context.Context, j *Job[stepArgs]) error {
	o.mu.Lock()
	o.seq = append(o.seq, j.Payload.Name)
	if o.workflow == nil {
		o.workflow = map[string]ulid.ULID{}
	}
	o.workflow[j.Payload.Name] = j.Workflow
	o.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	o.mu.Lock()
	if o.ended == nil {
		o.ended = map[string]time.Time{}
	}
	o.ended[j.Payload.Name] = time.Now()
	o.mu.Unlock()
	return nil
}

func (o *order) done(names ...string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, n := range names {
		if _, ok := o.ended[n]; !ok {
			return false
		}
	}
	return true
}

func (o *order) index(name string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Index(o.seq, name)
}

// A diamond across two queues: b and c wait for a, d for both; each starts only after its
// parents ended, and the workflow is counted finished.
func TestWorkflowDiamond(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q1 := newQueue[stepArgs](t, b.client, "wf-one")
	q2 := newQueue[stepArgs](t, b.client, "wf-two")
	var o order
	w1 := must(q1.NewWorker(o.run, &WorkerOptions{Concurrency: 4, PollInterval: noPoll}))
	w2 := must(q2.NewWorker(o.run, &WorkerOptions{Concurrency: 4, PollInterval: noPoll}))

	wf := b.client.NewWorkflow("diamond")
	a := q1.AddStep(wf, stepArgs{"a"}, &StepOptions{Name: "a"})
	bb := q2.AddStep(wf, stepArgs{"b"}, &StepOptions{Name: "b", After: After(a)})
	c := q1.AddStep(wf, stepArgs{"c"}, &StepOptions{Name: "c", After: After(a)})
	q2.AddStep(wf, stepArgs{"d"}, &StepOptions{Name: "d", After: After(bb, c)})
	if err := wf.Enqueue(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := b.count("status = 'pending'"); n != 3 {
		t.Fatalf("%d pending jobs, want 3", n)
	}
	if st := must(q2.Stats(t.Context())); st.Pending != 2 || st.Available != 0 {
		t.Fatalf("stats of %s: %d pending, %d available; want 2 and 0", q2.Name(), st.Pending, st.Available)
	}
	stop := runWorkers(t, b.client, w1, w2)
	defer stop()
	waitFor(t, 20*time.Second, "the diamond to run", func() bool { return o.done("a", "b", "c", "d") })
	if o.index("a") != 0 || o.index("d") != 3 {
		t.Fatalf("ran in order %v", o.seq)
	}
	if o.workflow["d"] != wf.ID {
		t.Fatalf("the handler saw Job.Workflow %s, want %s", o.workflow["d"], wf.ID)
	}
	for _, x := range []string{"b", "c"} {
		if !o.ended["a"].Before(o.ended[x]) {
			t.Fatalf("%s ended before a", x)
		}
	}
	waitFor(t, 10*time.Second, "the workflow to be counted finished", func() bool {
		return b.count("true") == 4 && b.countIn("pgqueue_workflows", "finished_at IS NOT NULL AND unfinished = 0") == 1
	})
}

// A failed parent cancels its dependents by default, transitively, with the reason in their
// errors; a dependent with RunDependent runs anyway.
func TestWorkflowFailureCancels(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-fail")
	var o order
	w := must(q.NewWorker(func(ctx context.Context, j *Job[stepArgs]) error {
		if j.Payload.Name == "bad" {
			return errors.New("broken on purpose")
		}
		return o.run(ctx, j)
	}, &WorkerOptions{Concurrency: 4, PollInterval: noPoll}))
	wf := b.client.NewWorkflow("failing")
	bad := q.AddStep(wf, stepArgs{"bad"}, &StepOptions{EnqueueOptions: EnqueueOptions{MaxAttempts: 1}})
	child := q.AddStep(wf, stepArgs{"child"}, &StepOptions{After: After(bad)})
	grandchild := q.AddStep(wf, stepArgs{"grandchild"}, &StepOptions{After: After(child)})
	q.AddStep(wf, stepArgs{"cleanup"}, &StepOptions{After: []Dependency{{Job: bad.ID, OnFailure: RunDependent}}})
	if err := wf.Enqueue(t.Context()); err != nil {
		t.Fatal(err)
	}
	stop := runWorkers(t, b.client, w)
	defer stop()
	waitFor(t, 20*time.Second, "cleanup to run", func() bool { return o.done("cleanup") })
	waitFor(t, 20*time.Second, "the dependents to be cancelled", func() bool {
		return b.count("status = 'cancelled'") == 2
	})
	for _, id := range []ulid.ULID{child.ID, grandchild.ID} {
		j := must(q.Job(t.Context(), id))
		if len(j.Errors) == 0 || !strings.Contains(j.Errors[len(j.Errors)-1].Error, "it depends on job") {
			t.Fatalf("cancelled job %s has errors %+v", id, j.Errors)
		}
	}
	if o.done("child") || o.done("grandchild") {
		t.Fatal("a cancelled dependent ran")
	}
}

type sum struct {
	N int `json:"n"`
}

// A step's result reaches the steps that depend on it in one read (Job.Parents), AwaitJob returns
// a job's result, and AwaitWorkflow returns the finished workflow with its counts.
func TestWorkflowResults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-results")
	got := make(chan *Parents, 1)
	w := must(q.NewWorker(func(ctx context.Context, j *Job[stepArgs]) error {
		switch j.Payload.Name {
		case "total":
			p, err := j.Parents(ctx)
			if err != nil {
				return err
			}
			got <- p
			n := 0
			for _, r := range p.Jobs {
				var s sum
				if err := json.Unmarshal(r.Result, &s); err != nil {
					return err
				}
				n += s.N
			}
			return j.SetResult(sum{n})
		default:
			return j.SetResult(sum{len(j.Payload.Name)})
		}
	}, &WorkerOptions{Concurrency: 4, PollInterval: noPoll}))
	wf := b.client.NewWorkflow("results")
	one := q.AddStep(wf, stepArgs{"a"}, &StepOptions{Name: "one"})
	three := q.AddStep(wf, stepArgs{"abc"}, &StepOptions{Name: "three"})
	total := q.AddStep(wf, stepArgs{"total"}, &StepOptions{Name: "total", After: After(one, three)})
	if err := wf.Enqueue(t.Context()); err != nil {
		t.Fatal(err)
	}
	awaited := make(chan *WorkflowInfo, 1)
	go func() {
		info, err := b.client.AwaitWorkflow(t.Context(), wf.ID)
		if err != nil {
			t.Errorf("AwaitWorkflow: %v", err)
		}
		awaited <- info
	}()
	runWorkers(t, b.client, w)
	r, err := b.client.AwaitJob(t.Context(), total.ID)
	if err != nil || r.Status != StatusCompleted || string(r.Result) != `{"n": 4}` {
		t.Fatalf("AwaitJob: %+v, %v; want completed with {\"n\": 4}", r, err)
	}
	p := receive(t, got, time.Second, "the parents")
	if p.Completed != 2 || p.Step("three") == nil || string(p.Step("three").Result) != `{"n": 3}` {
		t.Fatalf("parents %+v", p)
	}
	info := receive(t, awaited, 10*time.Second, "AwaitWorkflow to return")
	if info == nil || info.Status != WorkflowCompleted || info.Counts[StatusCompleted] != 3 || len(info.Steps) != 3 ||
		info.Steps[2].Name != "total" || len(info.Steps[2].After) != 2 || info.Steps[2].After[0].State != DependencyMet {
		t.Fatalf("awaited workflow %+v", info)
	}
}

// A batch's callbacks: on success, on failure and always, over a batch with a failed job and a
// batch without.
func TestWorkflowCallbacks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	// Completed jobs kept: once the workflows have finished, the next prune may delete their
	// completed steps (retention's default), and the counts read below would find them gone
	// (counted under "", as WorkflowInfo.Counts says), as a loaded CI run once did.
	b.client = b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[stepArgs](t, b.client, "wf-batch")
	var o order
	w := must(q.NewWorker(func(ctx context.Context, j *Job[stepArgs]) error {
		if strings.HasPrefix(j.Payload.Name, "bad") {
			return errors.New("fails on purpose")
		}
		return o.run(ctx, j)
	}, &WorkerOptions{Concurrency: 8, PollInterval: noPoll}))
	batch := func(prefix string, failing bool) *Workflow {
		wf := b.client.NewWorkflow(prefix)
		for i := range 5 {
			name := fmt.Sprintf("%s-member-%d", prefix, i)
			if failing && i == 2 {
				name = "bad-" + name
			}
			q.AddStep(wf, stepArgs{name}, &StepOptions{EnqueueOptions: EnqueueOptions{MaxAttempts: 1}})
		}
		members := wf.Steps()
		for _, when := range []CallbackWhen{CallbackOnSuccess, CallbackOnFailure, CallbackAlways} {
			q.AddStep(wf, stepArgs{prefix + "-" + string(when)}, &StepOptions{After: After(members...), Callback: when})
		}
		if err := wf.Enqueue(t.Context()); err != nil {
			t.Fatal(err)
		}
		return wf
	}
	mixed, clean := batch("mixed", true), batch("clean", false)
	runWorkers(t, b.client, w)
	for _, wf := range []*Workflow{mixed, clean} {
		if _, err := b.client.AwaitWorkflow(t.Context(), wf.ID); err != nil {
			t.Fatal(err)
		}
	}
	ran := func(name string) bool { return o.done(name) }
	if ran("mixed-success") || !ran("mixed-failure") || !ran("mixed-always") ||
		!ran("clean-success") || ran("clean-failure") || !ran("clean-always") {
		t.Fatalf("callbacks that ran: %v", o.seq)
	}
	info := must(b.client.Workflow(t.Context(), clean.ID))
	if info.Status != WorkflowFailed || info.Counts[StatusCancelled] != 1 || info.Counts[StatusCompleted] != 7 {
		t.Fatalf("clean batch: %s with %v; want failed (its failure callback cancelled), 7 completed", info.Status, info.Counts)
	}
	last := info.Steps[6] // clean-failure
	if last.Status != StatusCancelled || !strings.Contains(last.LastError, "runs only if some did") {
		t.Fatalf("the failure callback of a clean batch: %s, %q", last.Status, last.LastError)
	}
}

// A workflow enqueued in a transaction exists if and only if the transaction commits, through
// pgx and database/sql alike.
func TestWorkflowTransactions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[stepArgs](t, b.client, "wf-tx")
	ctx := t.Context()
	build := func() *Workflow {
		wf := b.client.NewWorkflow("tx")
		a := q.AddStep(wf, stepArgs{"a"}, nil)
		q.AddStep(wf, stepArgs{"b"}, &StepOptions{After: After(a)})
		return wf
	}
	tx := must(b.pool.Begin(ctx))
	if err := build().EnqueueTx(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	db := b.db()
	stx := must(db.BeginTx(ctx, nil))
	if err := build().EnqueueSQLTx(ctx, stx); err != nil {
		t.Fatal(err)
	}
	if err := stx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := b.count("true") + b.countIn("pgqueue_workflows", "true") + b.countIn("pgqueue_deps", "true"); n != 0 {
		t.Fatalf("%d rows left by rolled-back enqueues", n)
	}
	tx = must(b.pool.Begin(ctx))
	if err := build().EnqueueTx(ctx, tx); err != nil {
		t.Fatal(err)
	}
	must(0, tx.Commit(ctx))
	stx = must(db.BeginTx(ctx, nil))
	if err := build().EnqueueSQLTx(ctx, stx); err != nil {
		t.Fatal(err)
	}
	must(0, stx.Commit())
	if n, p := b.count("status = 'available'"), b.count("status = 'pending'"); n != 2 || p != 2 {
		t.Fatalf("%d available and %d pending after two commits, want 2 and 2", n, p)
	}
}

// Jobs already in the table can be depended on: a completed one meets the dependency at once, a
// running one is waited for, a failed one applies the policy at once, and a missing one fails
// the enqueue before anything is written.
func TestWorkflowOutsideParents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[stepArgs](t, c, "wf-outside")
	ctx := t.Context()
	done := must(q.Enqueue(ctx, stepArgs{"done"}, nil))
	failed := must(q.Enqueue(ctx, stepArgs{"failed"}, nil))
	waiting := must(q.Enqueue(ctx, stepArgs{"waiting"}, &EnqueueOptions{Delay: time.Hour}))
	b.exec("UPDATE pgqueue_jobs SET status = 'completed', finished_at = now() WHERE id = $1", [16]byte(done.ID))
	b.exec("UPDATE pgqueue_jobs SET status = 'failed', finished_at = now() WHERE id = $1", [16]byte(failed.ID))

	wf := c.NewWorkflow("missing")
	q.AddStep(wf, stepArgs{"x"}, &StepOptions{After: []Dependency{{Job: c.ids.next(1)[0]}}})
	if err := wf.Enqueue(ctx); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("a dependency on a missing job: %v, want ErrNotFound", err)
	}
	if n := b.countIn("pgqueue_workflows", "true"); n != 0 {
		t.Fatalf("%d workflows written by a refused enqueue", n)
	}

	wf = c.NewWorkflow("outside")
	afterDone := q.AddStep(wf, stepArgs{"after-done"}, &StepOptions{After: []Dependency{{Job: done.ID}}})
	afterFailed := q.AddStep(wf, stepArgs{"after-failed"}, &StepOptions{After: []Dependency{{Job: failed.ID}}})
	afterWaiting := q.AddStep(wf, stepArgs{"after-waiting"}, &StepOptions{After: []Dependency{{Job: waiting.ID}}})
	if err := wf.Enqueue(ctx); err != nil {
		t.Fatal(err)
	}
	var o order
	w := must(q.NewWorker(o.run, &WorkerOptions{PollInterval: noPoll}))
	runWorkers(t, c, w)
	waitFor(t, 10*time.Second, "the step after a completed job to run", func() bool { return o.done("after-done") })
	waitFor(t, 10*time.Second, "the step after a failed job to be cancelled", func() bool {
		return must(q.Job(ctx, afterFailed.ID)).Status == StatusCancelled
	})
	if s := must(q.Job(ctx, afterWaiting.ID)).Status; s != StatusPending {
		t.Fatalf("the step after a scheduled job is %s, want pending", s)
	}
	must(0, q.Retry(ctx, waiting.ID))
	waitFor(t, 10*time.Second, "the step after the retried job to run", func() bool { return o.done("waiting", "after-waiting") })
	_ = afterDone
}

// The client's enqueue middleware runs once for a workflow, told so, and what it adds to the
// metadata reaches every step, beside the step's own.
func TestWorkflowEnqueueMiddleware(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var seen []EnqueueInfo
	c := b.newClientWith(Config{EnqueueMiddleware: []EnqueueMiddleware{func(ctx context.Context, e *EnqueueInfo, next func(context.Context) error) error {
		seen = append(seen, *e)
		e.Metadata["trace"] = "t-1"
		return next(ctx)
	}}})
	q := newQueue[stepArgs](t, c, "wf-mw")
	wf := c.NewWorkflow("traced")
	a := q.AddStep(wf, stepArgs{"a"}, &StepOptions{EnqueueOptions: EnqueueOptions{Metadata: map[string]string{"own": "1", "trace": "mine"}}})
	bb := q.AddStep(wf, stepArgs{"b"}, &StepOptions{After: After(a)})
	must(0, wf.Enqueue(t.Context()))
	if len(seen) != 1 || seen[0].Workflow != wf.ID || len(seen[0].IDs) != 2 || seen[0].IDs[1] != bb.ID || seen[0].InTx {
		t.Fatalf("the middleware saw %+v", seen)
	}
	if m := must(q.Job(t.Context(), a.ID)).Metadata; m["own"] != "1" || m["trace"] != "t-1" {
		t.Fatalf("step a's metadata %v", m)
	}
	if m := must(q.Job(t.Context(), bb.ID)).Metadata; len(m) != 1 || m["trace"] != "t-1" {
		t.Fatalf("step b's metadata %v", m)
	}
}
