package pgqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// Walk 10⁵ waiting jobs page by page: every job once, in run order, places strictly increasing.
func TestJobsPagesThroughALargeQueue(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "big")
	const available, scheduled = 90_000, 10_000
	for p := range 3 { // three priorities, interleaved in id order
		if _, err := q.EnqueueMany(ctx, make([]int, available/3), &EnqueueOptions{Priority: p}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.EnqueueMany(ctx, make([]int, scheduled), &EnqueueOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	b.exec("VACUUM ANALYZE pgqueue_jobs")

	checkWalkInRunOrder(t, q, available+scheduled)

	// Scheduled jobs alone keep their places behind the available ones.
	page, err := q.Jobs(ctx, &ListOptions{Statuses: []Status{StatusScheduled}, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if page.Jobs[0].Place != available+1 || page.Jobs[0].Status != StatusScheduled {
		t.Fatalf("first scheduled job has place %d, want %d", page.Jobs[0].Place, available+1)
	}
	// Job agrees with the listing: exactly near the head, as a lower bound this deep.
	one, err := q.Job(ctx, page.Jobs[3].ID)
	if err != nil {
		t.Fatal(err)
	}
	if !one.PlaceAtLeast || one.Place != PlaceCountMax+2 || one.Place > page.Jobs[3].Place {
		t.Fatalf("Job says place %d (at least: %t), the listing %d", one.Place, one.PlaceAtLeast, page.Jobs[3].Place)
	}
	first, err := q.Jobs(ctx, &ListOptions{Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	head, err := q.Job(ctx, first.Jobs[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	if head.PlaceAtLeast || head.Place != first.Jobs[2].Place {
		t.Fatalf("Job says place %d (at least: %t), the listing %d", head.Place, head.PlaceAtLeast, first.Jobs[2].Place)
	}
}

// checkWalkInRunOrder walks q's listing in pages of 1000 and checks that it lists each of its
// total jobs once, in run order, at places 1 to total.
func checkWalkInRunOrder(t testing.TB, q *Queue[int], total int) {
	t.Helper()
	ctx := t.Context()
	seen := make(map[ulid.ULID]bool, total)
	var last *JobEntry[int]
	pages := 0
	opts := &ListOptions{Limit: 1000}
	for {
		page, err := q.Jobs(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, e := range page.Jobs {
			if seen[e.ID] {
				t.Fatalf("job %s listed twice", e.ID)
			}
			seen[e.ID] = true
			if last != nil {
				if e.Place != last.Place+1 {
					t.Fatalf("place %d follows %d", e.Place, last.Place)
				}
				if !runsBefore(last, e) {
					t.Fatalf("%s (%s, priority %d) listed after %s (%s, priority %d)",
						e.ID, e.Status, e.Priority, last.ID, last.Status, last.Priority)
				}
			} else if e.Place != 1 {
				t.Fatalf("first place is %d", e.Place)
			}
			last = e
		}
		if page.Next == "" {
			break
		}
		opts.Cursor = page.Next
	}
	if len(seen) != total || last.Place != total {
		t.Fatalf("listed %d jobs up to place %d over %d pages, want %d", len(seen), last.Place, pages, total)
	}
}

// runsBefore reports whether a runs before b in a listing of waiting jobs.
func runsBefore(a, b *JobEntry[int]) bool {
	if a.Status != b.Status {
		return a.Status == StatusAvailable && b.Status == StatusScheduled
	}
	if a.Status == StatusScheduled {
		return a.RunAt.Before(b.RunAt) || (a.RunAt.Equal(b.RunAt) && a.ID.Compare(b.ID) < 0)
	}
	return a.Priority > b.Priority || (a.Priority == b.Priority && a.ID.Compare(b.ID) < 0)
}

// Jobs lists running jobs first (place 0), then waiting ones in run order (places from 1), then
// finished ones (place -1); Job gives the same places; bad list options are refused.
func TestJobsStatusesAndPlaces(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[string](t, b.client, "mixed")
	ev := newEvents()
	release := make(chan struct{})
	w := must(q.NewWorker(func(ctx context.Context, job *Job[string]) error {
		switch job.Payload {
		case "fails":
			return Permanent(errors.New("bad"))
		case "runs":
			<-release
		}
		return nil
	}, &WorkerOptions{Concurrency: 2, OnEvent: ev.on, PollInterval: noPoll}))
	runs, _ := q.Enqueue(ctx, "runs", &EnqueueOptions{Priority: 9})
	fails, _ := q.Enqueue(ctx, "fails", &EnqueueOptions{Priority: 8})
	startWorker(t, w)
	ev.next(t, EventFailed)
	waitFor(t, 10*time.Second, "the job to run", func() bool { return b.count("status = 'running'") == 1 })
	// Paused, so that the jobs enqueued next stay waiting while the worker has a free slot.
	if err := q.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	a1, _ := q.Enqueue(ctx, "a1", nil)
	later, _ := q.Enqueue(ctx, "later", &EnqueueOptions{Delay: time.Hour})
	page, err := q.Jobs(ctx, &ListOptions{Statuses: []Status{StatusRunning, StatusAvailable, StatusScheduled, StatusFailed}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	places := map[ulid.ULID]int{}
	for _, e := range page.Jobs {
		got = append(got, e.Payload)
		places[e.ID] = e.Place
	}
	if len(got) != 4 || got[0] != "runs" || got[1] != "a1" || got[2] != "later" || got[3] != "fails" {
		t.Fatalf("listing order %v, want running, available, scheduled, failed", got)
	}
	if places[runs.ID] != 0 || places[a1.ID] != 1 || places[later.ID] != 2 || places[fails.ID] != -1 {
		t.Fatalf("places = %v; want running 0, available 1, scheduled 2, failed -1", places)
	}
	f, err := q.Job(ctx, fails.ID)
	if err != nil || f.Status != StatusFailed || f.Place != -1 || len(f.Errors) != 1 || f.FinishedAt.IsZero() {
		t.Fatalf("Job(failed) = %+v, %v", f, err)
	}
	r, err := q.Job(ctx, runs.ID)
	if err != nil || r.Place != 0 || r.LockedBy == "" || r.LockUntil.IsZero() || r.AttemptedAt.IsZero() {
		t.Fatalf("Job(running) = %+v, %v", r, err)
	}
	close(release)

	checkJobsRefusesBadOptions(t, q)
}

// checkJobsRefusesBadOptions checks that Jobs refuses a negative Limit, an unknown status and a
// malformed cursor with ErrInvalidOption.
func checkJobsRefusesBadOptions(t testing.TB, q *Queue[string]) {
	t.Helper()
	ctx := t.Context()
	if _, err := q.Jobs(ctx, &ListOptions{Limit: -1}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("negative Limit = %v", err)
	}
	if _, err := q.Jobs(ctx, &ListOptions{Statuses: []Status{"waiting"}}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("unknown status = %v", err)
	}
	if _, err := q.Jobs(ctx, &ListOptions{Cursor: "not a cursor"}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("bad cursor = %v", err)
	}
}

// A payload that no longer decodes into T does not break the listing: the entry says so.
func TestJobsUndecodablePayload(t *testing.T) {
	t.Parallel()
	b := setup(t)
	old := newQueue[string](t, b.client, "evolved")
	if _, err := old.Enqueue(t.Context(), "text", nil); err != nil {
		t.Fatal(err)
	}
	q := newQueue[int](t, b.client, "evolved")
	page, err := q.Jobs(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 1 || page.Jobs[0].PayloadError == nil || string(page.Jobs[0].RawPayload) != `"text"` {
		t.Fatalf("entry = %+v", page.Jobs)
	}
}

func TestStats(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	q := newQueue[int](t, b.client, "stats")
	if _, err := q.EnqueueMany(ctx, make([]int, 5), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueMany(ctx, make([]int, 3), &EnqueueOptions{Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	b.exec("UPDATE pgqueue_jobs SET run_at = now() - interval '1 minute' WHERE status = 'available'")
	st, err := q.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Available != 5 || st.Scheduled != 3 || st.Running != 0 || st.Paused || st.OldestWait < time.Minute {
		t.Fatalf("stats = %+v", st)
	}
	other := newQueue[int](t, b.client, "other")
	if err := other.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	all, err := b.client.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Queues) != 2 || all.Queues[0].Queue != "other" || !all.Queues[0].Paused ||
		all.Queues[1].Available != 5 || all.Queues[1].Scheduled != 3 {
		t.Fatalf("client stats = %+v", all.Queues)
	}
}

// listed is an entry as a cross-queue listing is compared.
type listed struct {
	queue  string
	id     ulid.ULID
	status Status
	place  int
}

// walkClientJobs pages through Client.Jobs with opts and returns every entry.
func walkClientJobs(t testing.TB, c *Client, opts ListOptions) []listed {
	t.Helper()
	var out []listed
	for pages := 0; ; pages++ {
		page, err := c.Jobs(t.Context(), &opts)
		if err != nil {
			t.Fatal(err)
		}
		if opts.Limit > 0 && len(page.Jobs) > opts.Limit {
			t.Fatalf("page of %d entries, limit %d", len(page.Jobs), opts.Limit)
		}
		for _, e := range page.Jobs {
			out = append(out, listed{e.Queue, e.ID, e.Status, e.Place})
		}
		if page.Next == "" {
			return out
		}
		if pages > 100 {
			t.Fatal("the listing does not end")
		}
		opts.Cursor = page.Next
	}
}

// walkQueueJobs lists each queue with Queue.Jobs, one after the other.
func walkQueueJobs(t testing.TB, c *Client, statuses []Status, queues ...string) []listed {
	t.Helper()
	var out []listed
	for _, name := range queues {
		page, err := newQueue[json.RawMessage](t, c, name).Jobs(t.Context(), &ListOptions{Statuses: statuses})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Jobs {
			out = append(out, listed{e.Queue, e.ID, e.Status, e.Place})
		}
	}
	return out
}

// Client.Jobs lists the jobs of every queue, queue by queue in name order, each queue's as
// Queue.Jobs does, whatever the page size; filters by queue and status; and gives payloads as
// stored.
func TestClientJobsAcrossQueues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	c := b.client
	alpha := newQueue[int](t, c, "alpha")
	beta := newQueue[string](t, c, "beta")
	gamma := newQueue[signup](t, c, "gamma")
	delta := newQueue[int](t, c, "delta")
	for _, p := range []int{0, 5, 0} {
		must(alpha.Enqueue(ctx, p, &EnqueueOptions{Priority: p}))
	}
	must(alpha.Enqueue(ctx, 9, &EnqueueOptions{Delay: time.Hour}))
	must(beta.Enqueue(ctx, "x", nil))
	must(beta.Enqueue(ctx, "y", nil))
	failedBeta := must(beta.Enqueue(ctx, "z", nil))
	must(gamma.Enqueue(ctx, signup{Email: "ada@example.com"}, &EnqueueOptions{Delay: time.Hour}))
	failedDelta := must(delta.Enqueue(ctx, 1, nil))
	b.exec("UPDATE pgqueue_jobs SET status = 'failed', finished_at = now() WHERE id = ANY ($1)",
		[][16]byte{failedBeta.ID, failedDelta.ID})

	live := walkQueueJobs(t, c, nil, "alpha", "beta", "gamma")
	if len(live) != 7 {
		t.Fatalf("Queue.Jobs listed %d live jobs, want 7", len(live))
	}
	for _, limit := range []int{1, 2, 3, 4, 7, 8, 0} {
		if got := walkClientJobs(t, c, ListOptions{Limit: limit}); !slices.Equal(got, live) {
			t.Fatalf("Client.Jobs with limit %d:\n%v\nwant\n%v", limit, got, live)
		}
	}
	failed := []Status{StatusFailed}
	if got, want := walkClientJobs(t, c, ListOptions{Statuses: failed, Limit: 1}), walkQueueJobs(t, c, failed, "beta", "delta"); len(got) != 2 || !slices.Equal(got, want) {
		t.Fatalf("failed jobs: %v, want %v", got, want)
	}
	named := ListOptions{Queues: []string{"gamma", "alpha", "gamma", "empty"}, Limit: 2}
	if got, want := walkClientJobs(t, c, named), walkQueueJobs(t, c, nil, "gamma", "alpha"); !slices.Equal(got, want) {
		t.Fatalf("queues gamma and alpha: %v, want %v", got, want)
	}
	if got := walkClientJobs(t, c, ListOptions{Queues: []string{"empty"}}); len(got) != 0 {
		t.Fatalf("a queue without jobs lists %v", got)
	}

	// Payloads as stored, whatever the queue's type.
	page, err := c.Jobs(ctx, &ListOptions{Queues: []string{"gamma", "beta"}})
	if err != nil {
		t.Fatal(err)
	}
	var first signup
	if err := json.Unmarshal(page.Jobs[0].Payload, &first); err != nil || first.Email != "ada@example.com" || string(page.Jobs[1].Payload) != `"x"` {
		t.Fatalf("payloads %s, %s", page.Jobs[0].Payload, page.Jobs[1].Payload)
	}

	// A cursor belongs to its listing.
	checkClientJobsCursors(t, c, alpha, beta)
}

// checkClientJobsCursors checks that a cursor of a listing is refused by another listing (of
// other queues, or by Queue.Jobs of another queue) with ErrInvalidOption, as are Queue.Jobs
// with Queues, a bad queue name and a bad cursor; and that a cursor of alpha's Queue.Jobs
// continues alpha's listing in Client.Jobs.
func checkClientJobsCursors(t testing.TB, c *Client, alpha *Queue[int], beta *Queue[string]) {
	t.Helper()
	ctx := t.Context()
	page, err := c.Jobs(ctx, &ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Client.Jobs, cursor of a queue not named": errOf(c.Jobs(ctx, &ListOptions{Queues: []string{"beta"}, Cursor: page.Next})),
		"Queue.Jobs, cursor of another queue":      errOf(beta.Jobs(ctx, &ListOptions{Cursor: page.Next})),
		"Queue.Jobs with Queues":                   errOf(alpha.Jobs(ctx, &ListOptions{Queues: []string{"alpha"}})),
		"Client.Jobs, bad queue name":              errOf(c.Jobs(ctx, &ListOptions{Queues: []string{"a b"}})),
		"Client.Jobs, bad cursor":                  errOf(c.Jobs(ctx, &ListOptions{Cursor: "x"})),
	} {
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s = %v, want ErrInvalidOption", name, err)
		}
	}
	// A cursor of Queue.Jobs continues that queue's listing in Client.Jobs too.
	one, err := alpha.Jobs(ctx, &ListOptions{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	rest := walkClientJobs(t, c, ListOptions{Queues: []string{"alpha"}, Cursor: one.Next})
	if want := walkQueueJobs(t, c, nil, "alpha")[1:]; !slices.Equal(rest, want) {
		t.Fatalf("continued listing %v, want %v", rest, want)
	}
}

// Finding the next queue of a listing is a probe of an index, not a scan: it touches a few
// buffers whether the table holds ten jobs per queue or a thousand, with a custom plan and with
// the generic plan a prepared statement settles on.
func TestNextQueuePlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 50 {
		q := newQueue[int](t, b.client, fmt.Sprintf("q%03d", i))
		if _, err := q.EnqueueMany(t.Context(), make([]int, 1000), nil); err != nil {
			t.Fatal(err)
		}
	}
	b.exec("VACUUM ANALYZE pgqueue_jobs")
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		tx, err := b.pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(t.Context(), "SET LOCAL plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		var plan []byte
		err = tx.QueryRow(t.Context(), "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+nextQueueSQL,
			"q010", []string{"running", "available", "scheduled"}).Scan(&plan)
		_ = tx.Rollback(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var parsed []struct {
			Plan map[string]any `json:"Plan"`
		}
		if err := json.Unmarshal(plan, &parsed); err != nil {
			t.Fatal(err)
		}
		hit, _ := parsed[0].Plan["Shared Hit Blocks"].(float64)
		read, _ := parsed[0].Plan["Shared Read Blocks"].(float64)
		t.Logf("%s: next_queue touched %v buffers", mode, hit+read)
		if hit+read > 40 {
			t.Fatalf("%s: next_queue touched %v buffers over 50,000 jobs:\n%s", mode, hit+read, plan)
		}
	}
}

// A look-up by id counts the jobs ahead exactly up to PlaceCountMax, across priorities and into
// the scheduled jobs, and beyond it gives a lower bound and says so.
func TestJobPlaceBound(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q := newQueue[int](t, b.client, "deep")
	ids := enqueueInts(t, q, PlaceCountMax+500, nil)
	urgent := enqueueInts(t, q, 2, &EnqueueOptions{Priority: 5})
	later := enqueueInts(t, q, 1, &EnqueueOptions{Delay: time.Hour})

	for _, c := range []struct {
		id      ulid.ULID
		place   int
		atLeast bool
	}{
		{urgent[0], 1, false},
		{urgent[1], 2, false},
		{ids[0], 3, false},
		{ids[PlaceCountMax-3], PlaceCountMax, false},
		{ids[PlaceCountMax-2], PlaceCountMax + 1, false},
		{ids[PlaceCountMax+400], PlaceCountMax + 2, true}, // PlaceCountMax + 403 exactly
		{later[0], PlaceCountMax + 2, true},
	} {
		e, err := b.client.Job(t.Context(), c.id)
		if err != nil {
			t.Fatal(err)
		}
		if e.Place != c.place || e.PlaceAtLeast != c.atLeast {
			t.Errorf("job %s: place %d (at least: %t), want %d (%t)", c.id, e.Place, e.PlaceAtLeast, c.place, c.atLeast)
		}
		if c.atLeast {
			raw, _ := json.Marshal(e)
			if !strings.Contains(string(raw), `"place_at_least":true`) {
				t.Errorf("its JSON lacks place_at_least: %s", raw)
			}
		}
	}
}

// A workflow's steps that wait for their parents are listed when pending is asked for: after the
// scheduled jobs, in the order they were added, with no place in line (-1). The default listing
// leaves them out; Job finds them; Client.Jobs goes through the queues that have some only.
func TestJobsListsPendingSteps(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	c := b.client
	build := newQueue[stepArgs](t, c, "wf-build")
	ship := newQueue[stepArgs](t, c, "wf-ship")
	plain := newQueue[stepArgs](t, c, "wf-plain")
	wf := c.NewWorkflow("release")
	compile := build.AddStep(wf, stepArgs{"compile"}, &StepOptions{Name: "compile"})
	test := build.AddStep(wf, stepArgs{"test"}, &StepOptions{Name: "test", After: After(compile)})
	lint := build.AddStep(wf, stepArgs{"lint"}, &StepOptions{Name: "lint", After: After(compile)})
	deploy := ship.AddStep(wf, stepArgs{"deploy"}, &StepOptions{Name: "deploy", After: After(test, lint)})
	if err := wf.Enqueue(ctx); err != nil {
		t.Fatal(err)
	}
	later := must(build.Enqueue(ctx, stepArgs{"later"}, &EnqueueOptions{Delay: time.Hour}))
	must(plain.Enqueue(ctx, stepArgs{"plain"}, nil))

	// The default listing: the jobs in line only.
	if got := walkQueueJobs(t, c, nil, "wf-build"); len(got) != 2 || got[0].id != compile.ID || got[1].id != later.ID {
		t.Fatalf("default listing of wf-build: %v, want compile and the scheduled job", got)
	}
	// Every unfinished job: in line first, then the pending ones in the order they were added.
	unfinished := []Status{StatusRunning, StatusAvailable, StatusScheduled, StatusPending}
	want := []listed{
		{"wf-build", compile.ID, StatusAvailable, 1}, {"wf-build", later.ID, StatusScheduled, 2},
		{"wf-build", test.ID, StatusPending, -1}, {"wf-build", lint.ID, StatusPending, -1},
	}
	for _, limit := range []int{1, 2, 3, 0} {
		got := walkClientJobs(t, c, ListOptions{Queues: []string{"wf-build"}, Statuses: unfinished, Limit: limit})
		if !slices.Equal(got, want) {
			t.Fatalf("unfinished jobs of wf-build, limit %d:\n%v\nwant\n%v", limit, got, want)
		}
	}
	// Pending jobs of every queue: wf-plain, which has none, is not visited.
	pending := []Status{StatusPending}
	wantPending := []listed{want[2], want[3], {"wf-ship", deploy.ID, StatusPending, -1}}
	for _, limit := range []int{1, 2, 0} {
		if got := walkClientJobs(t, c, ListOptions{Statuses: pending, Limit: limit}); !slices.Equal(got, wantPending) {
			t.Fatalf("pending jobs, limit %d:\n%v\nwant\n%v", limit, got, wantPending)
		}
	}
	if got := walkQueueJobs(t, c, pending, "wf-plain"); len(got) != 0 {
		t.Fatalf("pending jobs of a queue without any: %v", got)
	}
	e, err := c.Job(ctx, deploy.ID)
	if err != nil || e.Status != StatusPending || e.Place != -1 || e.Queue != "wf-ship" {
		t.Fatalf("Job(pending) = %+v, %v", e, err)
	}
}

// Pending jobs are in no index: a page of a queue's pending jobs reads the table, but only when
// the queue has some, and the queues that have some are found from the kept counts. Over a table
// of 50,000 jobs none of them pending, both touch a few buffers.
func TestPendingListingPlan(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for i := range 50 {
		q := newQueue[int](t, b.client, fmt.Sprintf("q%03d", i))
		if _, err := q.EnqueueMany(t.Context(), make([]int, 1000), nil); err != nil {
			t.Fatal(err)
		}
	}
	b.exec("VACUUM ANALYZE pgqueue_jobs")
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if plan, n := explainBuffers(t, b, mode, listPendingSQL, "q010", [16]byte{}, 100); n > 10 {
			t.Errorf("%s: list_pending of a queue without pending jobs touched %d buffers:\n%s", mode, n, plan)
		}
		if plan, n := explainBuffers(t, b, mode, nextQueueSQL, "q010", []string{"pending"}); n > 10 {
			t.Errorf("%s: next_queue of pending jobs touched %d buffers:\n%s", mode, n, plan)
		}
	}
}
