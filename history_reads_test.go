package pgqueue

// The reads of finished jobs see the history (migration 20261214120000): a job moved there is
// found by id, listed, counted in its workflow and read as a parent exactly as it was before the
// move, and the workflows and edges of jobs kept there are not pruned.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// assertInHistory fails the test unless job id is in one of the history's partitions.
func (b *bundle) assertInHistory(id ulid.ULID) {
	b.t.Helper()
	if table := b.tableOf([16]byte(id)); !strings.HasPrefix(table, "pgqueue_history_") {
		b.t.Fatalf("job %s is in %q, want a partition of the history", id, table)
	}
}

// moveAll stops the runtimes of stops (each keeps the history's partitions under the lock that
// toHistory takes too), waits until no transaction holds that lock, and moves every finished job
// into the history; it returns how many moved.
func (b *bundle) moveAll(stops ...func()) int {
	b.t.Helper()
	for _, stop := range stops {
		stop()
	}
	waitFor(b.t, 10*time.Second, "the history's lock to be free", func() bool {
		var free bool
		err := b.pool.QueryRow(context.Background(), "SELECT pg_try_advisory_xact_lock(hashtext($1))",
			b.schema+".pgqueue_history").Scan(&free)
		return err == nil && free
	})
	return b.toHistory()
}

// planNodes returns every node of a plan as EXPLAIN (FORMAT JSON) gives it.
func planNodes(t *testing.T, plan string) []map[string]any {
	t.Helper()
	var parsed []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal([]byte(plan), &parsed); err != nil {
		t.Fatal(err)
	}
	var nodes []map[string]any
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		nodes = append(nodes, n)
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(parsed[0].Plan)
	return nodes
}

// sameRead fails the test unless before and after are deeply equal.
func sameRead[V any](t *testing.T, what string, before, after V) {
	t.Helper()
	if !reflect.DeepEqual(before, after) {
		b, _ := json.Marshal(before)
		a, _ := json.Marshal(after)
		t.Fatalf("%s changed with the move into the history:\nbefore %s\nafter  %s", what, b, a)
	}
}

// Job, Queue.Job and AwaitJob find a completed, a failed and a cancelled job in the history as
// they found it in pgqueue_jobs; a look-up in the wrong queue still finds nothing, and a job that
// still runs is read from pgqueue_jobs.
func TestHistoryReadsJobByID(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[int](t, c, "hr-job")
	other := newQueue[int](t, c, "hr-job-other")
	ctx := t.Context()
	ok := must(q.Enqueue(ctx, 1, &EnqueueOptions{Metadata: map[string]string{"k": "v"}, Priority: 3}))
	bad := must(q.Enqueue(ctx, 2, &EnqueueOptions{MaxAttempts: 1}))
	later := must(q.Enqueue(ctx, 3, &EnqueueOptions{Delay: time.Hour}))
	must(0, q.Cancel(ctx, later.ID))
	waiting := must(other.Enqueue(ctx, 4, nil))
	stop := startWorker(t, must(q.NewWorker(func(_ context.Context, j *Job[int]) error {
		if j.Payload == 2 {
			return errors.New("failed on purpose")
		}
		return j.SetResult(map[string]int{"n": j.Payload})
	}, &WorkerOptions{PollInterval: 50 * time.Millisecond})))
	finished := []ulid.ULID{ok.ID, bad.ID, later.ID}
	waitFor(t, 20*time.Second, "the jobs to finish", func() bool {
		return b.count("queue = 'hr-job' AND status IN ('completed', 'failed', 'cancelled')") == 3
	})

	type reads struct {
		entry  *JobEntry[int]
		raw    *JobEntry[json.RawMessage]
		result *JobResult
	}
	read := func(id ulid.ULID) reads {
		t.Helper()
		r := reads{entry: must(q.Job(ctx, id)), raw: must(c.Job(ctx, id)), result: must(c.AwaitJob(ctx, id))}
		if _, err := other.Job(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Fatalf("job %s of %s looked up in %s: %v, want ErrNotFound", id, q.Name(), other.Name(), err)
		}
		return r
	}
	before := map[ulid.ULID]reads{}
	for _, id := range finished {
		before[id] = read(id)
	}
	waitingBefore := must(c.Job(ctx, waiting.ID))

	if n := b.moveAll(stop); n != 3 {
		t.Fatalf("%d jobs moved into the history, want 3", n)
	}
	for _, id := range finished {
		b.assertInHistory(id)
		after := read(id)
		sameRead(t, "Queue.Job of "+id.String(), before[id].entry, after.entry)
		sameRead(t, "Client.Job of "+id.String(), before[id].raw, after.raw)
		sameRead(t, "AwaitJob of "+id.String(), before[id].result, after.result)
	}
	r := before[ok.ID]
	if r.entry.Status != StatusCompleted || r.entry.Place != -1 || string(r.result.Result) != `{"n": 1}` ||
		r.entry.Metadata["k"] != "v" || r.entry.Priority != 3 {
		t.Fatalf("the completed job read %+v, result %+v", r.entry, r.result)
	}
	if s := before[bad.ID].result; s.Status != StatusFailed || s.LastError != "failed on purpose" {
		t.Fatalf("the failed job's result %+v", s)
	}
	if s := before[later.ID].entry.Status; s != StatusCancelled {
		t.Fatalf("the cancelled job is %s", s)
	}
	if table := b.tableOf([16]byte(waiting.ID)); table != "pgqueue_jobs" {
		t.Fatalf("the waiting job is in %q", table)
	}
	sameRead(t, "Client.Job of the waiting job", waitingBefore, must(c.Job(ctx, waiting.ID)))
	if _, err := c.Job(ctx, c.ids.next(1)[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a job that never was: %v, want ErrNotFound", err)
	}
}

// A listing of finished jobs pages through jobs spread over pgqueue_jobs and the history (every
// other one moved, several finished in the same settle, so at the same finished_at) and gives
// each once, in the order it gave before the move; Client.Jobs finds a queue whose finished jobs
// are all in the history.
func TestHistoryReadsListFinished(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[int](t, c, "hr-list")
	gone := newQueue[int](t, c, "hr-list-gone")
	ctx := t.Context()
	handler := func(_ context.Context, j *Job[int]) error {
		if j.Payload%3 == 1 {
			return errors.New("failed on purpose")
		}
		return nil
	}
	for i := range 40 {
		opts := &EnqueueOptions{MaxAttempts: 1}
		if i%10 == 9 {
			opts.Delay = time.Hour
		}
		must(q.Enqueue(ctx, i, opts))
	}
	for i := range 5 {
		must(gone.Enqueue(ctx, 3*i+1, &EnqueueOptions{MaxAttempts: 1}))
	}
	page := must(q.Jobs(ctx, &ListOptions{Statuses: []Status{StatusScheduled}}))
	for _, e := range page.Jobs {
		must(0, q.Cancel(ctx, e.ID))
	}
	stop1 := startWorker(t, must(q.NewWorker(handler, &WorkerOptions{Concurrency: 8, PollInterval: 50 * time.Millisecond})))
	stop2 := startWorker(t, must(gone.NewWorker(handler, &WorkerOptions{PollInterval: 50 * time.Millisecond})))
	waitFor(t, 20*time.Second, "the jobs to finish", func() bool {
		return b.count("status IN ('completed', 'failed', 'cancelled')") == 45
	})

	finished := []Status{StatusFailed, StatusCancelled, StatusCompleted}
	list := func(queue *Queue[int], limit int) []*JobEntry[int] {
		t.Helper()
		var all []*JobEntry[int]
		opts := &ListOptions{Statuses: finished, Limit: limit}
		for {
			p := must(queue.Jobs(ctx, opts))
			all = append(all, p.Jobs...)
			if p.Next == "" {
				return all
			}
			opts.Cursor = p.Next
		}
	}
	listAll := func() []*JobEntry[json.RawMessage] {
		t.Helper()
		var all []*JobEntry[json.RawMessage]
		opts := &ListOptions{Statuses: []Status{StatusFailed}, Limit: 3}
		for {
			p := must(c.Jobs(ctx, opts))
			all = append(all, p.Jobs...)
			if p.Next == "" {
				return all
			}
			opts.Cursor = p.Next
		}
	}
	before, beforeAll := list(q, 1000), listAll()
	if len(before) != 40 || len(beforeAll) != 17 {
		t.Fatalf("listed %d finished jobs of %s and %d failed ones of every queue, want 40 and 17", len(before), q.Name(), len(beforeAll))
	}

	// Every other finished job of hr-list is held by a transaction while the others move, so
	// that the listing's pages alternate between the two tables; all of hr-list-gone's move.
	held := map[ulid.ULID]bool{}
	tx, err := b.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	for i, e := range before {
		if i%2 == 1 {
			held[e.ID] = true
			if _, err := tx.Exec(ctx, "SELECT FROM pgqueue_jobs WHERE id = $1 FOR UPDATE", [16]byte(e.ID)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := b.moveAll(stop1, stop2); n != 25 {
		t.Fatalf("%d jobs moved into the history, want 25", n)
	}
	must(0, tx.Rollback(ctx))
	for _, e := range before {
		if table := b.tableOf([16]byte(e.ID)); held[e.ID] != (table == "pgqueue_jobs") {
			t.Fatalf("job %s (held %v) is in %s", e.ID, held[e.ID], table)
		}
	}
	for _, e := range beforeAll {
		if e.Queue == gone.Name() {
			b.assertInHistory(e.ID)
		}
	}

	for _, limit := range []int{1, 3, 7, 100} {
		sameRead(t, fmt.Sprintf("the listing in pages of %d", limit), before, list(q, limit))
	}
	sameRead(t, "the listing of every queue's failed jobs", beforeAll, listAll())
	// The order is the index's: each status's jobs by (finished_at, id).
	for i := 1; i < len(before); i++ {
		p, e := before[i-1], before[i]
		if p.Status == e.Status && (p.FinishedAt.After(e.FinishedAt) || p.FinishedAt.Equal(e.FinishedAt) && p.ID.Compare(e.ID) > 0) {
			t.Fatalf("listed %s (%s) before %s (%s)", p.ID, p.FinishedAt, e.ID, e.FinishedAt)
		}
	}
	ids := map[ulid.ULID]bool{}
	for _, e := range before {
		ids[e.ID] = true
	}
	if len(ids) != 40 {
		t.Fatalf("the listing gave %d distinct jobs, want 40", len(ids))
	}
}

// The listing of finished jobs reads both tables' indexes, each limited, whatever the plan
// cache's mode: a few pages of index per table (and per partition of the history), not a scan.
func TestHistoryListFinishedPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.toHistory() // the partitions
	b.exec(`INSERT INTO pgqueue_jobs (id, queue, status, payload, finished_at, attempt)
		SELECT gen_random_uuid(), CASE WHEN g % 4 = 0 THEN 'plan-other' ELSE 'plan' END,
		       (ARRAY['completed', 'failed', 'cancelled', 'available'])[1 + g % 4], '{}',
		       CASE WHEN g % 4 < 3 THEN now() - g * interval '1 ms' END, 1
		FROM generate_series(1, 20000) AS g`)
	b.exec(`INSERT INTO pgqueue_history (id, queue, status, payload, finished_at, created_at, run_at, priority, attempt,
			max_attempts, repeat_remaining, counted, weight, ahead_lost, waits_for, has_dependents, parents_failed, expires_at)
		SELECT gen_random_uuid(), CASE WHEN g % 4 = 0 THEN 'plan-other' ELSE 'plan' END,
		       (ARRAY['completed', 'failed', 'cancelled'])[1 + g % 3], '{}', now() - interval '1 hour' - g * interval '1 ms',
		       now(), now(), 0, 1, 1, 0, false, 1, false, 0, false, 0, now() + (g % 3) * interval '1 day'
		FROM generate_series(1, 20000) AS g`)
	b.exec("ANALYZE pgqueue_jobs")
	b.exec("ANALYZE pgqueue_history")
	historyIndex := regexp.MustCompile(`"Index Name": "pgqueue_history_[0-9]{8}_queue_status_finished_at_id_idx"`)
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		for _, from := range []time.Time{{}, time.Now().Add(-30 * time.Minute)} {
			plan, buffers := explainBuffers(t, b, mode, listFinishedSQL, "plan", StatusFailed, from, [16]byte{}, 100)
			if !strings.Contains(plan, `"Index Name": "pgqueue_jobs_finished_idx"`) || !historyIndex.MatchString(plan) {
				t.Fatalf("%s, from %v: the listing does not read both finished indexes:\n%s", mode, from, plan)
			}
			for _, n := range planNodes(t, plan) {
				// (an empty partition, no page, may be scanned: it costs nothing)
				hit, _ := n["Shared Hit Blocks"].(float64)
				read, _ := n["Shared Read Blocks"].(float64)
				if n["Node Type"] == "Seq Scan" && hit+read > 0 {
					t.Fatalf("%s, from %v: the listing scans %s:\n%s", mode, from, n["Relation Name"], plan)
				}
			}
			t.Logf("%s, from %v: a page of 100 touched %d buffers", mode, from, buffers)
			if buffers > 300 {
				t.Fatalf("%s, from %v: a page of 100 touched %d buffers:\n%s", mode, from, buffers, plan)
			}
		}
	}
}

// historyLookUps returns how many times the plan of sql with args ran pgqueue_history_job.
func historyLookUps(t *testing.T, b *bundle, sql string, args ...any) int {
	t.Helper()
	plan, _ := explainBuffers(t, b, "", sql, args...)
	loops := 0
	for _, n := range planNodes(t, plan) {
		if n["Function Name"] == "pgqueue_history_job" {
			l, _ := n["Actual Loops"].(float64)
			loops += int(l)
		}
	}
	return loops
}

// The look-ups by id read the history only for the jobs pgqueue_jobs has not.
func TestHistoryLookUpsOnlyForJobsMoved(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[int](t, c, "hr-plan")
	ctx := t.Context()
	moved := must(q.Enqueue(ctx, 1, &EnqueueOptions{Delay: time.Hour}))
	must(0, q.Cancel(ctx, moved.ID))
	b.toHistory()
	live := must(q.Enqueue(ctx, 2, nil))
	b.assertInHistory(moved.ID)
	for _, s := range []struct {
		name string
		sql  string
		args func(id ulid.ULID) []any
	}{
		{"job", jobSQL, func(id ulid.ULID) []any { return []any{[16]byte(id), nil, PlaceCountMax} }},
		{"job_result", jobResultSQL, func(id ulid.ULID) []any { return []any{[16]byte(id)} }},
		{"lost_status", lostStatusSQL, func(id ulid.ULID) []any { return []any{[][16]byte{id}} }},
	} {
		if n := historyLookUps(t, b, s.sql, s.args(live.ID)...); n != 0 {
			t.Errorf("%s of a job in pgqueue_jobs looked in the history %d times", s.name, n)
		}
		if n := historyLookUps(t, b, s.sql, s.args(moved.ID)...); n != 1 {
			t.Errorf("%s of a job in the history looked there %d times, want 1", s.name, n)
		}
	}
	if n := historyLookUps(t, b, lostStatusSQL, [][16]byte{live.ID, moved.ID}); n != 1 {
		t.Errorf("lost_status of a job in each table looked in the history %d times, want 1", n)
	}
}

// The status of a job whose lock was lost is read from the history too: a job cancelled while
// it ran, moved before the heartbeat asked, is told cancelled, not taken over.
func TestHistoryLostStatus(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "hr-lost")
	ctx := t.Context()
	started := make(chan struct{})
	j := must(q.Enqueue(ctx, 1, nil))
	live := must(q.Enqueue(ctx, 2, &EnqueueOptions{Delay: time.Hour}))
	stop := startWorker(t, must(q.NewWorker(func(ctx context.Context, job *Job[int]) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	}, &WorkerOptions{PollInterval: 50 * time.Millisecond})))
	receive(t, started, 10*time.Second, "the job to start")
	must(0, q.Cancel(ctx, j.ID))
	waitFor(t, 10*time.Second, "the job to be cancelled", func() bool { return b.count("status = 'cancelled'") == 1 })
	b.moveAll(stop)
	b.assertInHistory(j.ID)
	got := map[ulid.ULID]Status{}
	rows, _ := b.pool.Query(ctx, lostStatusSQL, [][16]byte{j.ID, live.ID, noSuchJob})
	for rows.Next() {
		var id [16]byte
		var s Status
		if err := rows.Scan(&id, &s); err != nil {
			t.Fatal(err)
		}
		got[ulid.ULID(id)] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[ulid.ULID]Status{j.ID: StatusCancelled, live.ID: StatusScheduled}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lost_status read %v, want %v", got, want)
	}
}

// noSuchJob is an id no job has.
var noSuchJob = [16]byte{0xff, 1, 2, 3}

// A workflow's view — its counts by status and every step's status, times, error and result —
// and AwaitWorkflow read the same once its finished steps have moved into the history.
func TestHistoryReadsWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[stepArgs](t, c, "hr-flow")
	q2 := newQueue[stepArgs](t, c, "hr-flow-two")
	ctx := t.Context()
	handler := func(_ context.Context, j *Job[stepArgs]) error {
		if j.Payload.Name == "bad" {
			return errors.New("broken on purpose")
		}
		return j.SetResult(sum{len(j.Payload.Name)})
	}
	wf := c.NewWorkflow("history")
	a := q.AddStep(wf, stepArgs{"a"}, &StepOptions{Name: "a"})
	bad := q2.AddStep(wf, stepArgs{"bad"}, &StepOptions{Name: "bad", After: After(a), EnqueueOptions: EnqueueOptions{MaxAttempts: 1}})
	q.AddStep(wf, stepArgs{"child"}, &StepOptions{Name: "child", After: After(bad)})
	q.AddStep(wf, stepArgs{"cleanup"}, &StepOptions{Name: "cleanup", After: []Dependency{{Job: bad.ID, OnFailure: RunDependent}}})
	must(0, wf.Enqueue(ctx))
	stop1 := startWorker(t, must(q.NewWorker(handler, &WorkerOptions{Concurrency: 2, PollInterval: 50 * time.Millisecond})))
	stop2 := startWorker(t, must(q2.NewWorker(handler, &WorkerOptions{PollInterval: 50 * time.Millisecond})))
	awaited := must(c.AwaitWorkflow(ctx, wf.ID))
	before := must(c.Workflow(ctx, wf.ID))
	listed := must(c.Workflows(ctx, nil))
	if before.Status != WorkflowFailed || before.Counts[StatusCompleted] != 2 || before.Counts[StatusFailed] != 1 ||
		before.Counts[StatusCancelled] != 1 || len(before.Steps) != 4 {
		t.Fatalf("the finished workflow %+v", before)
	}
	sameRead(t, "AwaitWorkflow against Workflow", awaited, before)

	if n := b.moveAll(stop1, stop2); n != 4 {
		t.Fatalf("%d jobs moved into the history, want 4", n)
	}
	for _, s := range wf.Steps() {
		b.assertInHistory(s.ID)
	}
	sameRead(t, "Workflow", before, must(c.Workflow(ctx, wf.ID)))
	sameRead(t, "AwaitWorkflow", before, must(c.AwaitWorkflow(ctx, wf.ID)))
	sameRead(t, "Workflows", listed, must(c.Workflows(ctx, nil)))
	for _, s := range before.Steps {
		if s.Status == "" || s.Queue == "" || s.FinishedAt.IsZero() {
			t.Fatalf("step %s read from the history without its row: %+v", s.Name, s)
		}
	}
}

// Job.Parents and Client.Parents read a parent kept in the history — a plain job moved before
// the step that depends on it was enqueued, and, once the workflow finished, its steps — with
// its status and result as before the move.
func TestHistoryReadsParents(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[stepArgs](t, c, "hr-parents")
	ctx := t.Context()
	seen := make(chan *Parents, 1)
	work := func() func() {
		return startWorker(t, must(q.NewWorker(func(ctx context.Context, j *Job[stepArgs]) error {
			if j.Payload.Name == "total" {
				p, err := j.Parents(ctx)
				if err != nil {
					return err
				}
				seen <- p
			}
			return j.SetResult(sum{len(j.Payload.Name)})
		}, &WorkerOptions{Concurrency: 2, PollInterval: 50 * time.Millisecond})))
	}
	stop := work()
	outside := must(q.Enqueue(ctx, stepArgs{"outside"}, nil))
	waitFor(t, 10*time.Second, "the outside job to complete", func() bool {
		return b.count("status = 'completed'") == 1
	})
	if n := b.moveAll(stop); n != 1 {
		t.Fatalf("%d jobs moved into the history, want 1", n)
	}
	b.assertInHistory(outside.ID)
	stop = work()

	wf := c.NewWorkflow("parents")
	one := q.AddStep(wf, stepArgs{"a"}, &StepOptions{Name: "one"})
	total := q.AddStep(wf, stepArgs{"total"}, &StepOptions{Name: "total", After: []Dependency{{Job: one.ID}, {Job: outside.ID}}})
	must(0, wf.Enqueue(ctx))
	inHandler := receive(t, seen, 20*time.Second, "the step's parents")
	if inHandler.Completed != 2 || len(inHandler.Jobs) != 2 {
		t.Fatalf("the handler read parents %+v", inHandler)
	}
	for _, p := range inHandler.Jobs {
		want := map[ulid.ULID]string{one.ID: `{"n": 1}`, outside.ID: `{"n": 7}`}[p.ID]
		if p.Status != StatusCompleted || string(p.Result) != want || p.State != DependencyMet {
			t.Fatalf("the handler read parent %+v, want it completed with %s", p, want)
		}
	}
	if inHandler.Step("one") == nil || inHandler.Jobs[slices.IndexFunc(inHandler.Jobs, func(p ParentResult) bool { return p.ID == outside.ID })].Step != "" {
		t.Fatalf("the parents' steps: %+v", inHandler.Jobs)
	}
	must(c.AwaitWorkflow(ctx, wf.ID))
	before := must(c.Parents(ctx, total.ID))
	sameRead(t, "Parents read by the handler and after", inHandler, before)
	if n := b.moveAll(stop); n != 2 {
		t.Fatalf("%d jobs moved into the history, want 2", n)
	}
	b.assertInHistory(one.ID)
	b.assertInHistory(total.ID)
	sameRead(t, "Client.Parents", before, must(c.Parents(ctx, total.ID)))
}

// A finished workflow whose jobs are all in the history is not pruned, nor are the edges of a
// job enqueued alone whose child is there; once the history lets them go (here deleted by hand,
// as a dropped partition would), both are.
func TestHistoryKeepsWorkflowsFromPruning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := b.newClientWith(Config{Retention: Retention{Completed: time.Hour}})
	q := newQueue[stepArgs](t, c, "hr-prune")
	ctx := t.Context()
	stop := startWorker(t, must(q.NewWorker(func(context.Context, *Job[stepArgs]) error { return nil },
		&WorkerOptions{Concurrency: 2, PollInterval: 50 * time.Millisecond})))
	wf := c.NewWorkflow("kept")
	a := q.AddStep(wf, stepArgs{"a"}, nil)
	q.AddStep(wf, stepArgs{"b"}, &StepOptions{After: After(a)})
	must(0, wf.Enqueue(ctx))
	must(c.AwaitWorkflow(ctx, wf.ID))
	parent := must(q.Enqueue(ctx, stepArgs{"parent"}, nil))
	var child ulid.ULID
	if err := b.pool.QueryRow(ctx, `SELECT pgqueue_add_job('hr-prune', '{"name": "child"}', after => ARRAY[$1::uuid])`,
		FormatUUID(parent.ID)).Scan((*uuidText)(&child)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the jobs to complete", func() bool { return b.count("status = 'completed'") == 4 })
	before := must(c.Workflow(ctx, wf.ID))
	parents := must(c.Parents(ctx, child))
	if n := b.moveAll(stop); n != 4 {
		t.Fatalf("%d jobs moved into the history, want 4", n)
	}
	b.assertInHistory(child)
	prune := func() (workflows, edges int) {
		t.Helper()
		if err := b.pool.QueryRow(ctx, pruneWorkflowsSQL, 100).Scan(&workflows, &edges); err != nil {
			t.Fatal(err)
		}
		return workflows, edges
	}
	if w, e := prune(); w != 0 || e != 0 {
		t.Fatalf("prune_workflows deleted %d workflows and %d edges of jobs kept in the history", w, e)
	}
	sameRead(t, "Workflow after a prune", before, must(c.Workflow(ctx, wf.ID)))
	sameRead(t, "Parents after a prune", parents, must(c.Parents(ctx, child)))

	b.exec("DELETE FROM pgqueue_history")
	if w, e := prune(); w != 1 || e != 2 {
		t.Fatalf("prune_workflows deleted %d workflows and %d edges once the history let the jobs go, want 1 and 2", w, e)
	}
	if _, err := c.Workflow(ctx, wf.ID); !errors.Is(err, ErrWorkflowNotFound) {
		t.Fatalf("the pruned workflow: %v, want ErrWorkflowNotFound", err)
	}
}
