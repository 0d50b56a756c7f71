package pgqueue

import (
	"context"
	"errors"
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

	seen := make(map[ulid.ULID]bool, available+scheduled)
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
	if len(seen) != available+scheduled || last.Place != available+scheduled {
		t.Fatalf("listed %d jobs up to place %d over %d pages, want %d", len(seen), last.Place, pages, available+scheduled)
	}

	// Scheduled jobs alone keep their places behind the available ones.
	page, err := q.Jobs(ctx, &ListOptions{Statuses: []Status{StatusScheduled}, Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if page.Jobs[0].Place != available+1 || page.Jobs[0].Status != StatusScheduled {
		t.Fatalf("first scheduled job has place %d, want %d", page.Jobs[0].Place, available+1)
	}
	// Job agrees with the listing.
	one, err := q.Job(ctx, page.Jobs[3].ID)
	if err != nil {
		t.Fatal(err)
	}
	if one.Place != page.Jobs[3].Place {
		t.Fatalf("Job says place %d, the listing %d", one.Place, page.Jobs[3].Place)
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
