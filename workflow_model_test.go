package pgqueue

// The workflow model test enqueues random DAGs — random fan-in, policies, callbacks and failing
// steps, across two queues — runs them with two clients at once, and compares every job's final
// status with what a small model of the rules predicts, and every start with its parents' ends:
// no job starts before each of its parents has finished. A failure prints the seed;
// PGQUEUE_MODEL_SEED=<seed> replays it.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// flowNode is one step of a random DAG, as the model sees it.
type flowNode struct {
	fails    bool // its handler returns an error (MaxAttempts 1: it fails for good)
	parents  []int
	policy   []OnParentFailure // per parent
	callback CallbackWhen
	step     Step
}

// flowArgs is the payload of the model's jobs.
type flowArgs struct {
	Fails bool `json:"fails"`
}

// randomDAG draws a DAG of n steps: each step depends on up to four earlier ones.
func randomDAG(r *rand.Rand, n int) []*flowNode {
	nodes := make([]*flowNode, n)
	policies := []OnParentFailure{CancelDependent, RunDependent, WaitForRetry}
	callbacks := []CallbackWhen{CallbackOnSuccess, CallbackOnFailure, CallbackAlways}
	for i := range nodes {
		nd := &flowNode{fails: r.IntN(6) == 0}
		if i > 0 {
			for _, p := range r.Perm(i)[:min(i, r.IntN(5))] {
				nd.parents = append(nd.parents, p)
				nd.policy = append(nd.policy, policies[r.IntN(len(policies))])
			}
		}
		if len(nd.parents) > 1 && r.IntN(5) == 0 {
			nd.callback = callbacks[r.IntN(len(callbacks))]
		}
		nodes[i] = nd
	}
	return nodes
}

// predict returns the status each step ends in, by the rules of docs/workflows.md: a step
// still pending at the end waits for ever (a parent failed under WaitForRetry, or a parent of
// its waits so).
func predict(nodes []*flowNode) []Status {
	out := make([]Status, len(nodes))
	broke := func(s Status) bool { return s == StatusFailed || s == StatusCancelled }
	for i, nd := range nodes {
		var cancel, pending, anyBroken bool
		for k, p := range nd.parents {
			s := out[p]
			policy := nd.policy[k]
			switch nd.callback {
			case CallbackOnSuccess:
				policy = CancelDependent
			case CallbackOnFailure, CallbackAlways:
				policy = RunDependent
			}
			switch {
			case broke(s) && policy == CancelDependent:
				cancel = true
			case broke(s) && policy == WaitForRetry, s == StatusPending:
				pending = true
			}
			anyBroken = anyBroken || broke(s)
		}
		switch {
		case cancel:
			out[i] = StatusCancelled
		case pending:
			out[i] = StatusPending
		case nd.callback == CallbackOnFailure && !anyBroken:
			out[i] = StatusCancelled
		case nd.fails:
			out[i] = StatusFailed
		default:
			out[i] = StatusCompleted
		}
	}
	return out
}

func TestWorkflowModel(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	if s := os.Getenv("PGQUEUE_MODEL_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (PGQUEUE_MODEL_SEED=%d replays it)", seed, seed)
	r := rand.New(rand.NewPCG(seed, seed))
	b := setup(t)
	b.exec(`CREATE TABLE flow_starts (job_id uuid PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	clients := []*Client{b.newClientWith(Config{Retention: Retention{Completed: time.Hour}}),
		b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})}
	handler := func(ctx context.Context, j *Job[flowArgs]) error {
		if _, err := b.pool.Exec(ctx, `INSERT INTO flow_starts (job_id) VALUES ($1)`, [16]byte(j.ID)); err != nil {
			return err
		}
		time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		if j.Payload.Fails {
			return fmt.Errorf("step fails on purpose")
		}
		return nil
	}
	for _, c := range clients {
		var workers []AnyWorker
		for _, name := range []string{"model-a", "model-b"} {
			q := newQueue[flowArgs](t, c, name)
			workers = append(workers, must(q.NewWorker(handler, &WorkerOptions{Concurrency: 4, PollInterval: time.Second})))
		}
		runWorkers(t, c, workers...)
	}
	queues := []*Queue[flowArgs]{newQueue[flowArgs](t, b.client, "model-a"), newQueue[flowArgs](t, b.client, "model-b")}
	type run struct {
		wf    *Workflow
		nodes []*flowNode
		want  []Status
	}
	var runs []run
	for range 12 {
		nodes := randomDAG(r, 3+r.IntN(30))
		wf := b.client.NewWorkflow("model")
		for _, nd := range nodes {
			opts := &StepOptions{Callback: nd.callback, EnqueueOptions: EnqueueOptions{MaxAttempts: 1}}
			for k, p := range nd.parents {
				opts.After = append(opts.After, Dependency{Job: nodes[p].step.ID, OnFailure: nd.policy[k]})
			}
			nd.step = queues[r.IntN(2)].AddStep(wf, flowArgs{Fails: nd.fails}, opts)
		}
		must(0, wf.Enqueue(t.Context()))
		runs = append(runs, run{wf, nodes, predict(nodes)})
	}
	predicted := map[Status]int{}
	for i, ru := range runs {
		checkModelRun(t, b, ru.wf, ru.nodes, ru.want, fmt.Sprintf("seed %d, workflow %d", seed, i))
		for _, s := range ru.want {
			predicted[s]++
		}
	}
	t.Logf("%d workflows, their steps ended %v", len(runs), predicted)
}

// checkModelRun waits for wf's jobs to reach the predicted statuses, then checks that each job
// that ran started after every parent had finished, and the workflow's count of unfinished jobs.
func checkModelRun(t *testing.T, b *bundle, wf *Workflow, nodes []*flowNode, want []Status, what string) {
	t.Helper()
	ctx := t.Context()
	var info *WorkflowInfo
	deadline := time.Now().Add(30 * time.Second)
	for {
		info = must(b.client.Workflow(ctx, wf.ID))
		pending := 0
		settled := true
		for i, s := range info.Steps {
			settled = settled && s.Status == want[i]
			if want[i] == StatusPending {
				pending++
			}
		}
		if settled && info.Unfinished == pending {
			break
		}
		if time.Now().After(deadline) {
			for i, s := range info.Steps {
				if s.Status != want[i] {
					t.Errorf("%s: step %d (parents %v, policies %v, callback %q, fails %v) is %s, want %s; last error %q",
						what, i, nodes[i].parents, nodes[i].policy, nodes[i].callback, nodes[i].fails, s.Status, want[i], s.LastError)
				}
			}
			t.Fatalf("%s: unfinished %d, want %d", what, info.Unfinished, pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	started := map[ulid.ULID]time.Time{}
	rows, err := b.pool.Query(ctx, `SELECT job_id, at FROM flow_starts`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id [16]byte
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			t.Fatal(err)
		}
		started[ulid.ULID(id)] = at
	}
	for i, s := range info.Steps {
		at, ran := started[s.ID]
		if ran != (want[i] == StatusCompleted || want[i] == StatusFailed) {
			t.Errorf("%s: step %d ran %v, but ends %s", what, i, ran, want[i])
		}
		for _, p := range nodes[i].parents {
			if parent := info.Steps[p]; ran && !parent.FinishedAt.Before(at) {
				t.Errorf("%s: step %d started at %s, before its parent %d finished (%s)", what, i, at, p, parent.FinishedAt)
			}
		}
	}
}
