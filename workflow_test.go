package pgqueue

import (
	"context"
	"errors"
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
	mu    sync.Mutex
	ended map[string]time.Time
	seq   []string
}

func (o *order) run(ctx context.Context, j *Job[stepArgs]) error {
	o.mu.Lock()
	o.seq = append(o.seq, j.Payload.Name)
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
